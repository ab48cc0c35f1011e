// What sysfs says about one PCI function, and the list of functions (through
// libpci, pointed at the same root).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "json.hpp"
#include "pci_address.hpp"
#include "sysfs.hpp"

namespace svm {

struct PciDevice {
    PciAddress address;
    uint16_t vendor = 0;
    uint16_t device = 0;
    uint32_t class_code = 0;         // 24 bits: class, subclass, prog-if (0x030200)
    std::string driver;              // bound driver; empty = none
    std::string driver_override;     // empty = none ("(null)" in sysfs)
    int numa_node = -1;              // -1 = unknown / single node
    std::string local_cpulist;       // "0-15,32-47"; empty when unknown
    std::optional<int> iommu_group;  // absent when the IOMMU is off
    // Reset methods the kernel offers ("flr", "pm", "bus", ...). reset_known is
    // false when neither reset_method nor reset exists: the kernel cannot reset it.
    std::vector<std::string> reset_methods;
    bool reset_known = false;
    bool sriov_capable = false;  // has sriov_totalvfs
    int sriov_totalvfs = 0;
    int sriov_numvfs = 0;
    std::optional<PciAddress> physfn;  // set on a virtual function
    std::vector<PciAddress> virtfns;   // index = VF number, on a physical function
    std::string name;                  // from pci.ids when available

    std::string vendor_device() const;  // "10de:2335"
    std::string class_str() const;      // "0x030200"
    bool can_reset() const { return reset_known; }
    // "gpu", "infiniband", "ethernet", "network", "audio", "bridge", "other".
    std::string kind() const;
    Json to_json() const;
};

bool pci_device_exists(const SysfsRoot& root, const PciAddress& a);
// Reads everything above from sysfs; throws svm::Error naming the device and
// the file when the device is missing or an attribute is unreadable.
PciDevice read_pci_device(const SysfsRoot& root, const PciAddress& a);
// The current driver only (cheap).
std::string pci_current_driver(const SysfsRoot& root, const PciAddress& a);
std::string pci_driver_override(const SysfsRoot& root, const PciAddress& a);

// Every PCI function under root, sorted, enumerated by libpci (sysfs.path set
// to root/sys/bus/pci); libpci's fatal errors become svm::Error.
std::vector<PciAddress> list_pci_addresses(const SysfsRoot& root);
// list_pci_addresses + read_pci_device, with names from pci.ids when found.
std::vector<PciDevice> scan_pci_devices(const SysfsRoot& root);

}  // namespace svm
