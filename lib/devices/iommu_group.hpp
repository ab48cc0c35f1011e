// IOMMU groups (members, viability for a job) and the node's IOMMU facts.
#pragma once
#include <string>
#include <vector>

#include "pci_address.hpp"
#include "sysfs.hpp"

namespace svm {

// Drivers that leave a device harmless to a guest sharing its group.
bool is_vfio_safe_driver(const std::string& driver);  // vfio-pci, pci-stub

std::vector<PciAddress> iommu_group_members(const SysfsRoot& root, int group);

struct GroupMember {
    PciAddress address;
    std::string driver;  // empty = none
    bool bridge = false;
};
std::vector<GroupMember> iommu_group_details(const SysfsRoot& root, int group);

enum class Tristate { yes, no, unknown };
const char* tristate_str(Tristate t);  // "yes", "no", "unknown"

struct IommuState {
    bool enabled = false;  // sys/kernel/iommu_groups has groups
    int group_count = 0;
    std::string cmdline;                               // proc/cmdline
    bool cmdline_requests_iommu = false;               // intel_iommu=on or amd_iommu=on/force_isolation...
    Tristate interrupt_remapping = Tristate::unknown;  // from proc/interrupts ("IR-") and cmdline
    bool allow_unsafe_interrupts = false;              // vfio_iommu_type1 parameter is Y
    bool vfio_pci_available = false;                   // driver registered or module present
    std::string vendor;                                // "intel", "amd" or "" (sys/class/iommu names)
};
IommuState read_iommu_state(const SysfsRoot& root);

// The sentence an admin needs when the IOMMU is off.
std::string iommu_fix_hint(const IommuState& st);

}  // namespace svm
