// slurm-vm inventory: the PCI functions usable by VM jobs on this node.
#include <cstdio>
#include <optional>
#include <string>

#include "commands.hpp"
#include "device_config.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "inventory.hpp"
#include "json.hpp"
#include "sysfs.hpp"

namespace svm::admin {

namespace {

const char* kInventoryHelp =
    "usage: slurm-vm inventory [--root DIR] [--json] [--all] [--config FILE]\n"
    "\n"
    "List the PCI functions usable by VM jobs on this node: GPUs and network\n"
    "functions (InfiniBand, Ethernet), plus any configured in the node\n"
    "configuration. For each: address, vendor:device, class, driver, NUMA node,\n"
    "local CPUs, IOMMU group and its other members, reset methods, SR-IOV\n"
    "totals and VFs, and what would keep it from being passed through.\n"
    "Node facts come first: IOMMU on, interrupt remapping, allow_unsafe_interrupts,\n"
    "vfio-pci loaded, NUMA nodes and their CPUs. Reads only; changes nothing.\n"
    "\n"
    "Options:\n"
    "  --root DIR     read sysfs, /proc and /dev under DIR instead of / (a copy or\n"
    "                 a test tree)\n"
    "  --json         print JSON (one object: \"root\", \"node\", \"devices\") instead\n"
    "                 of a table\n"
    "  --all          list every PCI function, not only GPUs and network functions\n"
    "  --config FILE  node configuration whose \"devices\" object marks configured\n"
    "                 GPUs and VF providers (default " SVM_SYSCONFDIR
    "/slurm-vm.json\n"
    "                 when it exists)\n"
    "  -h, --help     show this help\n"
    "\n"
    "Exit status: 0 on success, 1 when sysfs cannot be read, 2 on a usage error.\n";

}  // namespace

// Shared by inventory and doctor: the configuration, when there is one.
std::optional<DeviceConfig> load_admin_device_config(const std::string& explicit_path) {
    std::string path = explicit_path.empty() ? std::string(SVM_SYSCONFDIR) + "/slurm-vm.json" : explicit_path;
    if (explicit_path.empty() && !path_exists(path)) return std::nullopt;
    return load_device_config(path);
}

int cmd_inventory(const Args& args) {
    std::string root = "/", config;
    bool json = false;
    InventoryOptions opts;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](const char* name) -> std::string {
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "slurm-vm inventory: %s needs a value\n", name);
                throw 2;
            }
            return args[++i];
        };
        try {
            if (a == "-h" || a == "--help") {
                std::fputs(kInventoryHelp, stdout);
                return 0;
            } else if (a == "--root") {
                root = value("--root");
            } else if (a.compare(0, 7, "--root=") == 0) {
                root = a.substr(7);
            } else if (a == "--config") {
                config = value("--config");
            } else if (a.compare(0, 9, "--config=") == 0) {
                config = a.substr(9);
            } else if (a == "--json") {
                json = true;
            } else if (a == "--all") {
                opts.all = true;
            } else {
                std::fprintf(stderr, "slurm-vm inventory: unknown option '%s'\n%s", a.c_str(), kInventoryHelp);
                return 2;
            }
        } catch (int rc) {
            return rc;
        }
    }
    auto cfg = load_admin_device_config(config);
    SysfsRoot sysroot(root);
    Json inv = build_inventory(sysroot, cfg ? &*cfg : nullptr, opts);
    if (json) std::printf("%s\n", json_dump(inv.get(), true).c_str());
    else std::fputs(format_inventory_table(inv.get()).c_str(), stdout);
    return 0;
}

}  // namespace svm::admin
