// Binding PCI functions to vfio-pci and giving them back, the way libvirt's
// virpci.c does it: driver_override, unbind, drivers_probe; verify the driver
// link and /dev/vfio/<group>. Every change is a BindRecord that the caller
// stores in the ledger BEFORE calling bind(); undo() restores what the record
// says and is idempotent (safe when bind never ran, half ran, or ran twice).
#pragma once
#include <string>
#include <vector>

#include "json.hpp"
#include "pci_address.hpp"
#include "sysfs.hpp"

namespace svm {

struct BindRecord {
    static constexpr const char* kKind = "vfio_bind";
    PciAddress device;
    std::string original_driver;    // "" = was unbound
    std::string original_override;  // "" = none
    std::string target_driver = "vfio-pci";
    int iommu_group = -1;  // -1 = unknown

    Json to_json() const;  // {"device","original_driver","original_override","target_driver","iommu_group"}
    static BindRecord from_json(const json_t* j);
};

struct BindOptions {
    int busy_timeout_ms = 10000;  // how long an unbind may keep failing with EBUSY
    int poll_interval_ms = 100;
};

class VfioBinder {
public:
    VfioBinder(const SysfsRoot& root, SysfsWriter& writer, BindOptions opts = {});

    // Reads the device's current state into a record; changes nothing.
    // already_bound(): true when the device is on vfio-pci (nothing to do).
    BindRecord prepare(const PciAddress& device) const;
    bool already_bound(const PciAddress& device) const;

    // Moves the device to record.target_driver; no-op when it is already there.
    // Throws svm::Error naming the device and the file.
    void bind(const BindRecord& record);
    // Gives the device back to record.original_driver and original_override.
    void undo(const BindRecord& record);

    // /dev/vfio/<group> must exist once all of a group's devices are bound.
    void verify_group_ready(int group) const;

private:
    void unbind_with_retry(const PciAddress& a, const std::string& driver);
    void write(const std::string& file, const std::string& value);
    const SysfsRoot& root_;
    SysfsWriter& writer_;
    BindOptions opts_;
};

}  // namespace svm
