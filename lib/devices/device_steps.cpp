#include "device_steps.hpp"

#include <set>

#include "error.hpp"

namespace svm {

std::unique_ptr<SysfsWriter> device_writer(const SysfsRoot& root, const DeviceConfig& cfg) {
    if (!cfg.emulated_kernel.empty()) return std::make_unique<EmulatedKernelWriter>(cfg.emulated_kernel, root);
    return std::make_unique<RealSysfsWriter>();
}

static BindOptions bind_options(const DeviceConfig& cfg) {
    BindOptions o;
    o.busy_timeout_ms = cfg.unbind_timeout_s * 1000;
    return o;
}

PreparedDevices prepare_devices(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg,
                                const DevicePlan& plan, const DeviceStepOptions& opts, Ledger& ledger) {
    PreparedDevices out;
    out.numa_node = plan.numa_node;
    out.cpus = plan.cpus;
    VfioBinder binder(root, writer, bind_options(cfg));

    // 1. Detach: every function of the plan to vfio-pci (skipped when already there).
    for (const auto& d : plan.devices) {
        out.hostdevs.push_back(d.address);
        if (binder.already_bound(d.address)) continue;
        BindRecord r = binder.prepare(d.address);
        ledger.record(r);
        binder.bind(r);
    }
    // 2. Verify: each group usable by QEMU.
    for (int g : plan.iommu_groups) binder.verify_group_ready(g);

    // 3. The VF: reserve, give it its identity, detach it.
    if (opts.want_vf && !cfg.vf_providers.empty()) {
        VfPool pool(root, writer, cfg, opts.hostname);
        VfReservationRecord res{opts.job};
        ledger.record(res);
        VfAssignment vf = pool.reserve(res, plan.numa_node);
        VfConfigRecord cr = pool.prepare_config(vf);
        ledger.record(cr);
        pool.apply_config(cr);
        if (!binder.already_bound(vf.vf)) {
            BindRecord br = binder.prepare(vf.vf);
            ledger.record(br);
            binder.bind(br);
            if (br.iommu_group >= 0) binder.verify_group_ready(br.iommu_group);
        }
        out.hostdevs.push_back(vf.vf);
        out.vf = vf;
    }
    return out;
}

void undo_device_step(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, const BindRecord& r) {
    VfioBinder(root, writer, bind_options(cfg)).undo(r);
}

void undo_device_step(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg,
                      const VfReservationRecord& r) {
    VfPool(root, writer, cfg, "-").release(r);
}

void undo_device_step(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, const VfConfigRecord& r) {
    VfPool(root, writer, cfg, "-").undo_config(r);
}

void undo_device_entry(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, const LedgerEntry& e) {
    const json_t* d = e.data.get();
    if (e.kind == BindRecord::kind) return undo_device_step(root, writer, cfg, BindRecord::from_json(d));
    if (e.kind == VfReservationRecord::kind)
        return undo_device_step(root, writer, cfg, VfReservationRecord::from_json(d));
    if (e.kind == VfConfigRecord::kind) return undo_device_step(root, writer, cfg, VfConfigRecord::from_json(d));
    SVM_THROW("not a device step: \"" + e.kind + "\"");
}

}  // namespace svm
