// From Slurm's allocation on this node (the GRES device files, e.g.
// /dev/nvidia1 or /dev/vfio/17) to the PCI functions a guest gets, with the
// functions that must travel with them (a GPU's audio function in the same
// IOMMU group), the refusals (each an svm::Error naming the device) and the
// NUMA placement. Reads only; changes nothing.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "device_config.hpp"
#include "iommu_group.hpp"
#include "json.hpp"
#include "pci_address.hpp"
#include "sysfs.hpp"

namespace svm {

struct PlannedDevice {
    PciAddress address;
    std::string role;       // "gpu" (allocated by Slurm) or "companion" (same slot and group)
    std::string gres_file;  // the GRES file it came from ("" for companions)
    std::string driver;     // current driver
    int iommu_group = -1;
    int numa_node = -1;
    bool needs_bind = false;  // not on vfio-pci yet
};

struct DevicePlan {
    std::vector<PlannedDevice> devices;  // sorted by address
    std::vector<int> iommu_groups;       // sorted, unique
    std::optional<int> numa_node;        // when all devices agree
    std::vector<int> numa_nodes;         // every node the devices sit on
    std::string cpus;                    // CPU list of those nodes ("" = unknown)
    std::vector<std::string> warnings;

    Json to_json() const;
};

// Maps one GRES device file to PCI functions. /dev/nvidiaN uses
// devices.gpus[].nvidia_minor, else root/proc/driver/nvidia/gpus/*/information.
std::vector<PciAddress> resolve_gres_file(const SysfsRoot& root, const DeviceConfig& cfg, const std::string& file);

DevicePlan plan_devices(const SysfsRoot& root, const DeviceConfig& cfg, const std::vector<std::string>& gres_files);
// The same from PCI addresses already resolved (doctor, tests).
DevicePlan plan_devices_for(const SysfsRoot& root, const DeviceConfig& cfg, const std::vector<PciAddress>& allocated);

// CPU lists: parse_cpulist / format_cpulist in cpuset.hpp.

}  // namespace svm
