// What `slurm-vm inventory` reports: the PCI functions usable by VM jobs and
// the node-level facts (IOMMU, interrupt remapping, vfio-pci, NUMA).
#pragma once
#include <string>

#include "device_config.hpp"
#include "json.hpp"
#include "sysfs.hpp"

namespace svm {

struct InventoryOptions {
    bool all = false;  // every PCI function, not only GPUs, network functions and configured ones
};

// {"node": {...}, "devices": [{address, vendor, device, vendor_device, class, kind,
//   name, driver, numa_node, local_cpus, iommu_group, group_members, reset_methods,
//   resettable, sriov, physfn, configured, problems}]}
Json build_inventory(const SysfsRoot& root, const DeviceConfig* cfg, const InventoryOptions& opts = {});
std::string format_inventory_table(const json_t* inventory);

}  // namespace svm
