#include <cstdio>

#include "commands.hpp"

namespace svm::admin {
int cmd_inventory(const Args&) {
    std::fprintf(stderr, "slurm-vm inventory: not implemented yet\n");
    return 2;
}
int cmd_doctor(const Args&) {
    std::fprintf(stderr, "slurm-vm doctor: not implemented yet\n");
    return 2;
}
}  // namespace svm::admin
