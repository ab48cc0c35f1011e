// Every sysfs, /proc and /dev path the device layer touches is built here from
// one root: "/" in production, a fake tree in a temporary directory in tests.
// Host changes go through SysfsWriter so that tests can put an emulated kernel
// (tests/unit/fake_sysfs.hpp) behind the very same code.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "error.hpp"
#include "pci_address.hpp"

namespace svm {

class SysfsRoot {
public:
    explicit SysfsRoot(std::string root = "/");

    const std::string& root() const { return root_; }
    // root + rel ("sys/bus/pci" -> "/sys/bus/pci" or "/tmp/x/sys/bus/pci").
    std::string path(const std::string& rel) const;

    std::string pci_bus() const { return path("sys/bus/pci"); }
    std::string pci_devices_dir() const { return path("sys/bus/pci/devices"); }
    std::string pci_device(const PciAddress& a) const;
    std::string pci_attr(const PciAddress& a, const std::string& name) const;
    std::string pci_driver(const std::string& driver) const;
    std::string pci_driver_file(const std::string& driver, const std::string& file) const;
    std::string drivers_probe() const { return path("sys/bus/pci/drivers_probe"); }
    std::string iommu_groups_dir() const { return path("sys/kernel/iommu_groups"); }
    std::string iommu_group_devices(int group) const;
    std::string dev_vfio(int group) const;
    std::string node_cpulist(int node) const;
    std::string module_param(const std::string& module, const std::string& param) const;
    std::string proc(const std::string& rel) const { return path("proc/" + rel); }

    // Reads a small attribute, trimmed; nullopt when the file does not exist.
    // Other errors throw svm::Error naming the file.
    std::optional<std::string> read_attr(const std::string& file) const;
    // The last component of a symbolic link's target ("../../bus/pci/drivers/nvidia"
    // -> "nvidia"); nullopt when there is no link.
    std::optional<std::string> link_name(const std::string& link) const;

private:
    std::string root_;
};

// A write to a sysfs attribute failed; err is the errno the kernel returned.
class SysfsWriteError : public Error {
public:
    SysfsWriteError(const std::string& file, const std::string& value, int err, const char* src, int line,
                    const char* fn);
    int err() const { return err_; }
    const std::string& file() const { return file_; }

private:
    int err_;
    std::string file_;
};

// Where the device layer's writes go. Implementations throw SysfsWriteError.
class SysfsWriter {
public:
    virtual ~SysfsWriter() = default;
    virtual void write(const std::string& path, const std::string& value) = 0;
};

// Writes the attribute file for real (open, one write(2), close).
class RealSysfsWriter : public SysfsWriter {
public:
    void write(const std::string& path, const std::string& value) override;
};

// Hands each write to a program that emulates the kernel over a fake tree
// (`PROGRAM ROOT FILE VALUE`; its exit status is the errno to report). Only
// for a root other than "/": the constructor refuses the real one.
class EmulatedKernelWriter : public SysfsWriter {
public:
    EmulatedKernelWriter(std::string program, const SysfsRoot& root);
    void write(const std::string& path, const std::string& value) override;

private:
    std::string program_;
    std::string root_;
};

}  // namespace svm
