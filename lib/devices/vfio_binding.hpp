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

// The ledger record "vfio_bind": one function's driver before the job.
struct BindRecord {
    static constexpr const char* kind = "vfio_bind";
    PciAddress device;
    std::string original_driver;    // "" = was unbound
    std::string original_override;  // "" = none
    std::string target_driver = "vfio-pci";
    int iommu_group = -1;  // -1 = unknown

    template <class V, class T>
    static void fields(V& v, T& t) {
        v("device", t.device);
        v("original_driver", t.original_driver);
        v("original_override", t.original_override);
        v("target_driver", t.target_driver);
        v("iommu_group", t.iommu_group);
    }
    Json to_json() const;
    static BindRecord from_json(const json_t* j);  // strict (read_record); throws svm::Error
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
