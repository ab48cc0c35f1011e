// A fake sysfs/dev/proc tree in a temporary directory, and a FakeKernel that
// reacts to writes the way Linux does (in the manner of libvirt's
// tests/virpcimock.c): driver_override, drivers/X/bind and unbind,
// drivers_probe, sriov_numvfs creating and removing VFs, mlx5 sriov/N/*
// attributes, /dev/vfio/N appearing when a group is entirely on vfio-pci.
// Writes a real kernel would refuse are refused here too: they throw
// svm::SysfsWriteError and are recorded in refusals(), which tests check is
// empty. Failures can be injected: the N-th write, or a device whose driver
// stays busy (unbind fails with EBUSY) for a number of attempts.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pci_address.hpp"
#include "support.hpp"
#include "sysfs.hpp"

namespace svm::test {

struct FakeDevice {
    std::string address;  // "0000:3b:00.0"
    uint16_t vendor = 0x10de;
    uint16_t device = 0x20b0;
    uint32_t klass = 0x030200;
    std::string driver;                        // bound now; "" = none
    std::optional<std::string> native_driver;  // what a probe binds without override (default: driver)
    int numa_node = -1;
    std::string local_cpulist;  // default: the node's CPUs, else "0-15"
    std::optional<int> iommu_group;
    std::optional<std::vector<std::string>> reset_methods = std::vector<std::string>{"flr", "bus"};
    std::string parent;  // upstream bridge address; "" = root bus
    // SR-IOV physical function.
    int sriov_totalvfs = 0;
    int sriov_numvfs = 0;  // VFs created at build time (through the kernel logic)
    uint16_t vf_device = 0x101c;
    std::string vf_driver = "mlx5_core";
    int sriov_offset = 1;
    int sriov_stride = 1;
    bool mlx5_sriov_attrs = true;  // sriov/N/{node,port,policy,mac} appear for each VF
};

class FakeSysfs {
public:
    FakeSysfs();
    // Adopts a tree built earlier (by another process): the kernel's state
    // that is not in the files (which driver a probe binds, busy devices) is
    // read from ROOT/.emulated-kernel/, and the tree is not removed on exit.
    struct Adopt {};
    FakeSysfs(const std::string& existing_root, Adopt);
    ~FakeSysfs();
    // Writes that state to ROOT/.emulated-kernel/ (see Adopt).
    void save_state() const;
    // Busy devices of an adopted tree (unbind fails with EBUSY N more times; -1 = always).
    std::map<std::string, int>& busy() { return busy_; }
    FakeSysfs(const FakeSysfs&) = delete;
    FakeSysfs& operator=(const FakeSysfs&) = delete;

    const std::string& root() const { return root_; }
    std::string path(const std::string& rel) const;
    SysfsRoot sysfs_root() const { return SysfsRoot(root_); }

    // Node-level facts.
    FakeSysfs& iommu(bool on, const std::string& vendor = "intel");
    FakeSysfs& interrupt_remapping(bool on);
    FakeSysfs& allow_unsafe_interrupts(bool yes);
    FakeSysfs& numa_node(int node, const std::string& cpulist);
    FakeSysfs& driver(const std::string& name);  // registers sys/bus/pci/drivers/<name>
    FakeSysfs& vfio_pci();                       // driver + module + /dev/vfio/vfio
    FakeSysfs& hugepages(int size_kb, int count);
    FakeSysfs& cmdline(const std::string& text);
    FakeSysfs& nvidia_minor(const std::string& address, int minor);  // proc/driver/nvidia/gpus/*/information
    FakeSysfs& add(const FakeDevice& d);
    // Replays a manifest written by tests/fixtures/sysfs/capture.sh.
    FakeSysfs& load_manifest(const std::string& file);

    // Every path under the root: "D", "L:<target>" or "F:<content>".
    std::map<std::string, std::string> snapshot() const;
    // The differences between two snapshots, one line each; "" when equal.
    static std::string diff(const std::map<std::string, std::string>& before,
                            const std::map<std::string, std::string>& after);
    // diff(before, snapshot()).
    std::string changes_since(const std::map<std::string, std::string>& before) const;

    // Kernel model (used by FakeKernel and by the builder).
    std::string device_dir_rel(const std::string& address) const;  // sys/devices/pci0000:00/...
    std::string driver_of(const std::string& address) const;
    std::string override_of(const std::string& address) const;
    std::optional<int> group_of(const std::string& address) const;
    bool device_exists(const std::string& address) const;
    void attach(const std::string& address, const std::string& driver);
    void detach(const std::string& address);
    void update_vfio(int group);
    void set_sriov_numvfs(const std::string& pf, int n);
    std::string native_driver(const std::string& address) const;

private:
    void write_rel(const std::string& rel, const std::string& content);
    void link_rel(const std::string& rel, const std::string& target_rel);  // relative link to target
    int next_free_group() const;
    std::string root_;
    bool owned_ = true;
    std::map<std::string, int> busy_;
    std::map<std::string, std::string> native_;       // address -> driver a probe binds
    std::map<std::string, FakeDevice> pf_templates_;  // PF address -> its build description
};

class FakeKernel : public SysfsWriter {
public:
    explicit FakeKernel(FakeSysfs& fs) : fs_(fs) {}
    void write(const std::string& path, const std::string& value) override;

    // Failure injection.
    void fail_write(int n, int err = EIO) { fail_at_ = n, fail_err_ = err; }  // 1-based; 0 = never
    void busy(const std::string& address, int attempts) {
        busy_[address] = attempts;
    }  // -1 = forever; "ADDR@DRIVER": only when bound to DRIVER

    const std::map<std::string, int>& busy_left() const { return busy_; }
    int writes() const { return writes_; }
    const std::vector<std::string>& log() const { return log_; }  // "rel <- value"
    const std::vector<std::string>& refusals() const { return refusals_; }

private:
    [[noreturn]] void refuse(const std::string& path, const std::string& value, int err, const std::string& why);
    FakeSysfs& fs_;
    int writes_ = 0;
    int fail_at_ = 0;
    int fail_err_ = 5;
    std::map<std::string, int> busy_;
    std::vector<std::string> log_;
    std::vector<std::string> refusals_;
};

}  // namespace svm::test
