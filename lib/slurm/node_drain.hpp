// Draining this node with a reason that names the cause, for node-side
// failures the helpers cannot repair themselves (a device that did not go
// back to its driver). Slurm's own reason for a failed epilog is only
// "Epilog error"; ours says what is wrong and what was done about it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace svm {

// "slurm-vm: job N: <first failure>" (and "(+K more)"), cut to what
// `sinfo -R` shows comfortably. Pure, for tests.
std::string drain_reason(uint32_t job, const std::vector<std::string>& failures);

// `scontrol update nodename=NODE state=drain reason=REASON` with the caller's
// PATH and SLURM_CONF. False (with the error in `err`) when Slurm refused or
// could not be reached: then the caller must fail so that Slurm drains.
bool drain_node(const std::string& node, const std::string& reason, std::string& err);

}  // namespace svm
