#include <cstdio>

#include "commands.hpp"

namespace svm::admin {
int cmd_status(const Args&) {
    std::fprintf(stderr, "slurm-vm status: not implemented yet\n");
    return 2;
}
int cmd_sweep(const Args&) {
    std::fprintf(stderr, "slurm-vm sweep: not implemented yet\n");
    return 2;
}
}  // namespace svm::admin
