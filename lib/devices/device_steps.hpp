// The prolog's device work as undoable steps (libvirt virhostdev.c style):
// each step is recorded through `record` (the ledger append, which must be
// durable when it returns) BEFORE it is taken. On failure the caller undoes
// the recorded steps in reverse order with undo_device_step(); the epilog does
// the same. Kinds: "vfio_bind" (BindRecord), "vf_reservation"
// (VfReservationRecord), "vf_config" (VfConfigRecord).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "device_config.hpp"
#include "device_plan.hpp"
#include "json.hpp"
#include "sysfs.hpp"
#include "vf_pool.hpp"
#include "vfio_binding.hpp"

namespace svm {

// The writer for the node's device changes: the kernel itself, or the
// emulated one a test configured (devices.emulated_kernel).
std::unique_ptr<SysfsWriter> device_writer(const SysfsRoot& root, const DeviceConfig& cfg);

using DeviceRecordFn = std::function<void(const std::string& kind, const json_t* data)>;

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
                                const DevicePlan& plan, const DeviceStepOptions& opts, const DeviceRecordFn& record);

// Undoes one recorded step; idempotent. Throws svm::Error naming the device.
void undo_device_step(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, const std::string& kind,
                      const json_t* data);

}  // namespace svm
