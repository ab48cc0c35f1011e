#include "irq_profile.hpp"

#include "error.hpp"

namespace svm {

const std::vector<IrqProfile>& irq_profiles() {
    static const std::vector<IrqProfile> k = {
        {"default", "leave the VF driver's interrupt moderation as it is", {}},
        {"latency",
         "an interrupt per received packet: adaptive moderation off, rx-usecs 0, rx-frames 1 (small messages, "
         "collectives, blocking MPI)",
         {{"adaptive-rx", "off"}, {"rx-usecs", "0"}, {"rx-frames", "1"}}},
        {"throughput",
         "adaptive moderation within a wide window: rx-usecs-low 40, rx-usecs-high 1000, rx-frames 88 "
         "(bandwidth-bound applications)",
         {{"adaptive-rx", "on"}, {"rx-usecs-low", "40"}, {"rx-usecs-high", "1000"}, {"rx-frames", "88"}}},
    };
    return k;
}

const IrqProfile* find_irq_profile(const std::string& name) {
    for (const auto& p : irq_profiles())
        if (p.name == name) return &p;
    return nullptr;
}

std::string irq_profile_names() {
    std::string s;
    for (const auto& p : irq_profiles()) s += (s.empty() ? "" : ", ") + p.name;
    return s;
}

const IrqProfile& require_irq_profile(const std::string& name, const std::string& what) {
    if (const IrqProfile* p = find_irq_profile(name)) return *p;
    SVM_THROW(what + " \"" + name +
              "\" is not an interrupt moderation profile; valid profiles: " + irq_profile_names());
}

}  // namespace svm
