// Interrupt moderation profiles for the guest's SR-IOV VF. SR-IOV InfiniBand
// reaches native-like latency only with the NIC's moderation tuned for a VM
// (rx-frames 88 -> 1, adaptive moderation off); bandwidth-bound applications
// instead gain from a wider moderation window (rx-usecs-low 40, rx-usecs-high
// 1000). The guest applies the chosen profile with `ethtool -C` from its seed.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace svm {

struct IrqProfile {
    std::string name;
    std::string summary;  // one line for --help and the docs
    // ethtool -C arguments, in order; empty = leave the driver's settings alone.
    std::vector<std::pair<std::string, std::string>> settings;
};

// "default", "latency", "throughput".
const std::vector<IrqProfile>& irq_profiles();
// The profile of that name, or nullptr.
const IrqProfile* find_irq_profile(const std::string& name);
// "default, latency, throughput"
std::string irq_profile_names();
// Throws svm::Error with one sentence naming the valid profiles when `name`
// is not one; `what` says where the name came from ("--vm-irq-profile").
const IrqProfile& require_irq_profile(const std::string& name, const std::string& what);

}  // namespace svm
