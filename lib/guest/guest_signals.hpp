// The signals a task's slurm-vm-exec carries into the guest, shared by the
// task wrapper and the batch step's srun relay.
#pragma once
#include <string>
#include <vector>

namespace svm {

// TERM, INT, HUP, QUIT, USR1 and USR2; their names for kill(1) ("" for any
// other), and back (0 for any other).
const std::vector<int>& forwarded_signals();
std::string forwarded_signal_name(int sig);
int forwarded_signal_number(const std::string& name);

}  // namespace svm
