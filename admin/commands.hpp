// Subcommands of the admin command `slurm-vm`. Each takes the arguments after
// its name and returns the process exit status.
#pragma once
#include <string>
#include <vector>

namespace svm::admin {

using Args = std::vector<std::string>;

int cmd_inventory(const Args& args);
int cmd_doctor(const Args& args);
int cmd_status(const Args& args);
int cmd_sweep(const Args& args);
int cmd_images(const Args& args);
int cmd_console(const Args& args);

}  // namespace svm::admin
