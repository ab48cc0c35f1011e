// slurm-vm: the admin command (inventory, doctor, status, sweep, images, console).
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "error.hpp"

namespace {

const char* kUsage =
    "usage: slurm-vm COMMAND [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  inventory   list the PCI devices usable by VM jobs (GPUs, SR-IOV functions)\n"
    "  doctor      check this node's readiness for VM jobs, with the fix for each failure\n"
    "  status      show the VM jobs on this node: guests, devices, ledger state\n"
    "  sweep       find and repair leftovers of jobs that no longer exist\n"
    "  images      list the site's images (--vm-image=NAME) and its VM partitions\n"
    "  console     show the serial console of a job's guest (root and the job's owner)\n"
    "\n"
    "Run 'slurm-vm COMMAND --help' for the options of a command.\n";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::printf("slurm-vm %s\n", SVM_VERSION);
        return 0;
    }
    std::string cmd = argv[1];
    svm::admin::Args args(argv + 2, argv + argc);
    try {
        if (cmd == "inventory") return svm::admin::cmd_inventory(args);
        if (cmd == "doctor") return svm::admin::cmd_doctor(args);
        if (cmd == "status") return svm::admin::cmd_status(args);
        if (cmd == "sweep") return svm::admin::cmd_sweep(args);
        if (cmd == "images") return svm::admin::cmd_images(args);
        if (cmd == "console") return svm::admin::cmd_console(args);
    } catch (const svm::Error& e) {
        std::fprintf(stderr, "slurm-vm %s: %s\n", cmd.c_str(), e.chain().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "slurm-vm %s: %s\n", cmd.c_str(), e.what());
        return 1;
    }
    std::fprintf(stderr, "slurm-vm: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
}
