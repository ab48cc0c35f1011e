// The prolog's device work as undoable steps (libvirt virhostdev.c style):
// each step is recorded in the job's ledger (durable when record() returns)
// BEFORE it is taken, as a typed record like every other host change:
// "vfio_bind" (BindRecord), "vf_reservation" (VfReservationRecord),
// "vf_config" (VfConfigRecord). On failure the caller undoes the ledger in
// reverse order (lib/job/host_changes.hpp, undo_change, which calls
// undo_device_step); the epilog does the same.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "device_config.hpp"
#include "device_plan.hpp"
#include "json.hpp"
#include "ledger.hpp"
#include "sysfs.hpp"
#include "vf_pool.hpp"
#include "vfio_binding.hpp"

namespace svm {

// The writer for the node's device changes: the kernel itself, or the
// emulated one a test configured (devices.emulated_kernel).
std::unique_ptr<SysfsWriter> device_writer(const SysfsRoot& root, const DeviceConfig& cfg);

struct PreparedDevices {
    std::vector<PciAddress> hostdevs;  // every function to give the guest (GPUs, companions, VF)
    std::optional<VfAssignment> vf;
    std::optional<int> numa_node;
    std::string cpus;
};

struct DeviceStepOptions {
    std::string job;       // job id, the VF pool's key
    bool want_vf = true;   // take a VF when devices.vf_providers is set
    std::string hostname;  // for GUIDs when devices.node_id is unset; "" = gethostname
};

// Binds the plan's devices to vfio-pci and claims/configures/binds a VF.
PreparedDevices prepare_devices(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg,
                                const DevicePlan& plan, const DeviceStepOptions& opts, Ledger& ledger);

// Undoes one recorded step; idempotent. Throws svm::Error naming the device.
void undo_device_step(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, const BindRecord& r);
void undo_device_step(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg,
                      const VfReservationRecord& r);
void undo_device_step(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, const VfConfigRecord& r);
// One of the three from a ledger entry (its kind); any other kind is refused.
void undo_device_entry(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, const LedgerEntry& e);

}  // namespace svm
