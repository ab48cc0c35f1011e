// The kernel command line a user gives with --vm-cmdline: one line of at
// most kMaxKernelCmdline bytes (the x86 kernel's COMMAND_LINE_SIZE less its
// NUL), printable. Checked at submit and again by the prolog (the submit
// side is the user's: a user can run a Slurm client of their own).
#pragma once
#include <string>

#include "error.hpp"

namespace svm {

inline constexpr size_t kMaxKernelCmdline = 2047;

inline void require_kernel_cmdline(const std::string& cmdline) {
    if (cmdline.size() > kMaxKernelCmdline)
        SVM_THROW("--vm-cmdline is " + std::to_string(cmdline.size()) + " bytes, longer than the kernel takes (" +
                  std::to_string(kMaxKernelCmdline) + ")");
    for (unsigned char c : cmdline)
        if (c < 0x20 || c == 0x7f) SVM_THROW("--vm-cmdline must be a single line of printable characters");
}

}  // namespace svm
