#include "vfio_binding.hpp"

#include <cerrno>
#include <chrono>
#include <thread>

#include "fs.hpp"
#include "ledger.hpp"
#include "pci_device.hpp"

namespace svm {

Json BindRecord::to_json() const { return json_of(*this); }
BindRecord BindRecord::from_json(const json_t* j) { return read_record<BindRecord>(j); }

VfioBinder::VfioBinder(const SysfsRoot& root, SysfsWriter& writer, BindOptions opts)
    : root_(root), writer_(writer), opts_(opts) {}

void VfioBinder::write(const std::string& file, const std::string& value) { writer_.write(file, value); }

BindRecord VfioBinder::prepare(const PciAddress& device) const {
    if (!pci_device_exists(root_, device))
        SVM_THROW(device.str() + ": no such PCI device (" + root_.pci_device(device) + " missing)");
    BindRecord r;
    r.device = device;
    r.original_driver = pci_current_driver(root_, device);
    r.original_override = pci_driver_override(root_, device);
    if (auto g = root_.link_name(root_.pci_attr(device, "iommu_group"))) r.iommu_group = std::stoi(*g);
    return r;
}

bool VfioBinder::already_bound(const PciAddress& device) const {
    return pci_current_driver(root_, device) == "vfio-pci";
}

void VfioBinder::unbind_with_retry(const PciAddress& a, const std::string& driver) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.busy_timeout_ms);
    std::string file = root_.pci_driver_file(driver, "unbind");
    for (;;) {
        try {
            write(file, a.str());
            return;
        } catch (const SysfsWriteError& e) {
            if (e.err() != EBUSY && e.err() != EAGAIN) throw;
            // Some drivers refuse while the device is in use; a driver that
            // blocks in remove() keeps the write from returning instead.
            if (std::chrono::steady_clock::now() >= deadline) {
                SVM_THROW(a.str() + ": driver " + driver + " did not release the device within " +
                          std::to_string(opts_.busy_timeout_ms / 1000.0).substr(0, 4) + " s (" + e.reason() +
                          "); is a process still using it? (fuser -v /dev/nvidia* /dev/vfio/*)");
            }
            if (pci_current_driver(root_, a) != driver) return;  // released meanwhile
            std::this_thread::sleep_for(std::chrono::milliseconds(opts_.poll_interval_ms));
        }
    }
}

void VfioBinder::bind(const BindRecord& r) {
    const PciAddress& a = r.device;
    const std::string& target = r.target_driver;
    try {
        if (!pci_device_exists(root_, a)) SVM_THROW("no such PCI device (" + root_.pci_device(a) + " missing)");
        std::string cur = pci_current_driver(root_, a);
        if (cur == target) return;  // skip, like virPCIDeviceBindToStub
        if (!path_exists(root_.pci_driver(target)))
            SVM_THROW("driver " + target + " is not loaded (" + root_.pci_driver(target) + " missing; modprobe " +
                      target + ")");
        if (pci_driver_override(root_, a) != target) write(root_.pci_attr(a, "driver_override"), target);
        if (!cur.empty()) unbind_with_retry(a, cur);
        if (pci_current_driver(root_, a).empty()) write(root_.drivers_probe(), a.str());
        std::string now = pci_current_driver(root_, a);
        if (now != target)
            SVM_THROW("still " + (now.empty() ? std::string("unbound") : "on " + now) + " after writing " +
                      root_.drivers_probe() + " (driver_override is '" + pci_driver_override(root_, a) + "')");
    } catch (Error& e) {
        SVM_CONTEXT(e, "bind " + a.str() + " to " + target);
        throw;
    }
}

void VfioBinder::undo(const BindRecord& r) {
    const PciAddress& a = r.device;
    try {
        if (!pci_device_exists(root_, a)) return;  // gone (e.g. VFs removed): nothing to give back
        std::string cur = pci_current_driver(root_, a);
        std::string ovr = pci_driver_override(root_, a);
        if (ovr != r.original_override) {
            // An empty line clears driver_override.
            write(root_.pci_attr(a, "driver_override"), r.original_override.empty() ? "\n" : r.original_override);
        }
        if (cur == r.original_driver) return;
        if (!cur.empty()) unbind_with_retry(a, cur);
        if (!r.original_driver.empty()) {
            if (path_exists(root_.pci_driver(r.original_driver))) {
                write(root_.pci_driver_file(r.original_driver, "bind"), a.str());
            } else {
                write(root_.drivers_probe(), a.str());
            }
            std::string now = pci_current_driver(root_, a);
            if (now != r.original_driver)
                SVM_THROW("driver " + r.original_driver + " did not take the device back (now " +
                          (now.empty() ? std::string("unbound") : now) + ")");
        }
    } catch (Error& e) {
        SVM_CONTEXT(e, "give " + a.str() + " back to " +
                           (r.original_driver.empty() ? std::string("no driver") : r.original_driver));
        throw;
    }
}

void VfioBinder::verify_group_ready(int group) const {
    std::string dev = root_.dev_vfio(group);
    if (!path_exists(dev))
        SVM_THROW("IOMMU group " + std::to_string(group) + ": " + dev +
                  " did not appear after binding its devices to vfio-pci (is every device of the group on vfio-pci?)");
}

}  // namespace svm
