#include "device_plan.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "cpuset.hpp"
#include "fs.hpp"
#include "pci_device.hpp"

namespace svm {

Json DevicePlan::to_json() const {
    JsonOut j;
    j.objects("devices", devices, [](JsonOut& o, const PlannedDevice& d) {
        o("address", d.address);
        o("role", d.role);
        o("gres_file", d.gres_file);
        o("driver", d.driver);
        o("iommu_group", d.iommu_group);
        o("numa_node", d.numa_node);
        o("needs_bind", d.needs_bind);
    });
    j("numa_node", numa_node);
    j("cpus", cpus);
    return j.take();
}

namespace {

std::optional<int> number_after(const std::string& s, const std::string& prefix) {
    if (s.compare(0, prefix.size(), prefix) != 0 || s.size() == prefix.size()) return std::nullopt;
    std::string rest = s.substr(prefix.size());
    if (!std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) || rest.size() > 9)
        return std::nullopt;
    return std::stoi(rest);
}

std::optional<PciAddress> nvidia_minor_from_proc(const SysfsRoot& root, int minor) {
    std::string dir = root.proc("driver/nvidia/gpus");
    for (const auto& name : list_dir(dir)) {
        auto a = PciAddress::try_parse(name);
        if (!a) continue;
        std::string info;
        if (!read_file_if_exists(dir + "/" + name + "/information", info)) continue;
        std::istringstream in(info);
        std::string line;
        while (std::getline(in, line)) {
            if (line.compare(0, 13, "Device Minor:") == 0 && trim(line.substr(13)) == std::to_string(minor)) return a;
        }
    }
    return std::nullopt;
}

}  // namespace

std::vector<PciAddress> resolve_gres_file(const SysfsRoot& root, const DeviceConfig& cfg, const std::string& file) {
    if (auto minor = number_after(file, "/dev/nvidia")) {
        if (const GpuConfig* g = cfg.gpu_by_minor(*minor)) return {g->pci};
        if (auto a = nvidia_minor_from_proc(root, *minor)) return {*a};
        SVM_THROW(file + ": no GPU known for NVIDIA minor " + std::to_string(*minor) +
                  " (set devices.gpus[].nvidia_minor, or load the nvidia driver so that " +
                  root.proc("driver/nvidia/gpus") + "/*/information lists it)");
    }
    if (auto group = number_after(file, "/dev/vfio/")) {
        std::string dir = root.iommu_group_devices(*group);
        if (!path_exists(dir))
            SVM_THROW(file + ": IOMMU group " + std::to_string(*group) + " does not exist (" + dir + " missing)");
        std::vector<PciAddress> configured, endpoints;
        for (const auto& m : iommu_group_details(root, *group)) {
            if (cfg.gpu_by_pci(m.address)) configured.push_back(m.address);
            if (!m.bridge) endpoints.push_back(m.address);
        }
        // With configured GPUs in the group, those are the allocation; other
        // functions (audio) are added as companions by the planner.
        std::vector<PciAddress> out = configured.empty() ? endpoints : configured;
        if (out.empty()) SVM_THROW(file + ": IOMMU group " + std::to_string(*group) + " holds no endpoint device");
        return out;
    }
    SVM_THROW(file + ": not a GPU device file this node can pass through (expected /dev/nvidiaN or /dev/vfio/N)");
}

static DevicePlan plan(const SysfsRoot& root, const DeviceConfig& cfg, std::vector<PlannedDevice> allocated);

DevicePlan plan_devices_for(const SysfsRoot& root, const DeviceConfig& cfg, const std::vector<PciAddress>& addresses) {
    std::vector<PlannedDevice> allocated;
    for (const auto& a : addresses) {
        PlannedDevice d;
        d.address = a;
        d.role = "gpu";
        allocated.push_back(d);
    }
    return plan(root, cfg, allocated);
}

DevicePlan plan_devices(const SysfsRoot& root, const DeviceConfig& cfg, const std::vector<std::string>& gres_files) {
    // 1. The allocated functions.
    std::vector<PlannedDevice> allocated;
    for (const auto& f : gres_files) {
        // Control nodes of the NVIDIA driver (nvidiactl, nvidia-uvm, nvidia-caps) are not devices.
        if (f.compare(0, 11, "/dev/nvidia") == 0 && !number_after(f, "/dev/nvidia")) continue;
        for (const auto& a : resolve_gres_file(root, cfg, f)) {
            bool dup =
                std::any_of(allocated.begin(), allocated.end(), [&](const PlannedDevice& d) { return d.address == a; });
            if (dup) continue;
            PlannedDevice d;
            d.address = a;
            d.role = "gpu";
            d.gres_file = f;
            allocated.push_back(d);
        }
    }
    return plan(root, cfg, allocated);
}

namespace {

// 2. One allocated function: present, in a group, resettable, its group's
// interrupts safe; its driver, group and node filled in.
void check_allocated(const SysfsRoot& root, const DeviceConfig& cfg, const IommuState& iommu, PlannedDevice& d) {
    const std::string a = d.address.str();
    if (!pci_device_exists(root, d.address))
        SVM_THROW(a + (d.gres_file.empty() ? "" : " (" + d.gres_file + ")") + ": no such PCI device (" +
                  root.pci_device(d.address) + " missing)");
    PciDevice dev = read_pci_device(root, d.address);
    if (!dev.iommu_group) {
        if (!iommu.enabled)
            SVM_THROW(a + ": no IOMMU group (" + root.pci_attr(d.address, "iommu_group") +
                      " missing): the IOMMU is off on this node; " + iommu_fix_hint(iommu));
        SVM_THROW(a + ": no IOMMU group (" + root.pci_attr(d.address, "iommu_group") +
                  " missing) although the IOMMU is on; the device cannot be isolated for a guest");
    }
    if (const GpuConfig* g = cfg.gpu_by_pci(d.address); g && g->vfio_group && *g->vfio_group != *dev.iommu_group)
        SVM_THROW(a + ": configured with vfio_group " + std::to_string(*g->vfio_group) +
                  " but sysfs puts it in IOMMU group " + std::to_string(*dev.iommu_group));
    if (!dev.can_reset() && !cfg.policy.allow_no_reset)
        SVM_THROW(a + ": no usable reset method (" + root.pci_attr(d.address, "reset_method") +
                  " absent or empty): its state could leak from one job to the next; "
                  "set devices.policy.allow_no_reset to accept this device anyway");
    if (iommu.interrupt_remapping == Tristate::no && !cfg.policy.allow_unsafe_interrupts)
        SVM_THROW(a + ": interrupt remapping is off on this node (no IR- interrupt domains in " +
                  root.proc("interrupts") +
                  "), so a guest could forge interrupts; enable it (remove intremap=off/nointremap, enable x2APIC/"
                  "interrupt remapping in the firmware) or set devices.policy.allow_unsafe_interrupts");
    if (iommu.allow_unsafe_interrupts && !cfg.policy.allow_unsafe_interrupts)
        SVM_THROW(a + ": vfio_iommu_type1 allow_unsafe_interrupts is Y (" +
                  root.module_param("vfio_iommu_type1", "allow_unsafe_interrupts") +
                  "); the site policy does not accept unsafe interrupts: remove the module option, or set "
                  "devices.policy.allow_unsafe_interrupts");
    d.driver = dev.driver;
    d.iommu_group = *dev.iommu_group;
    d.numa_node = dev.numa_node;
    d.needs_bind = dev.driver != "vfio-pci";
}

// Companions of d: the other functions of its slot in its group (not
// another GPU: check_groups reports that as a conflict), added to `all`.
void add_companions(const SysfsRoot& root, const DeviceConfig& cfg, const PlannedDevice& d,
                    std::vector<PlannedDevice>& all) {
    for (const auto& m : iommu_group_details(root, d.iommu_group)) {
        if (m.bridge || !m.address.same_slot(d.address)) continue;
        if (std::any_of(all.begin(), all.end(), [&](const PlannedDevice& x) { return x.address == m.address; }))
            continue;
        if (cfg.gpu_by_pci(m.address)) continue;
        PciDevice cd = read_pci_device(root, m.address);
        PlannedDevice c;
        c.address = m.address;
        c.role = "companion";
        c.driver = cd.driver;
        c.iommu_group = d.iommu_group;
        c.numa_node = cd.numa_node;
        c.needs_bind = cd.driver != "vfio-pci";
        all.push_back(c);
    }
}

// 3. Group viability, with the companions included: every other endpoint
// of an allocated function's group is on a driver that is safe beside a
// guest, and no other GPU. Returns the groups.
std::set<int> check_groups(const SysfsRoot& root, const DeviceConfig& cfg, const std::vector<PlannedDevice>& allocated,
                           const std::vector<PlannedDevice>& all) {
    std::vector<PciAddress> job;
    for (const auto& d : all) job.push_back(d.address);
    std::set<int> groups;
    for (const auto& d : allocated) {
        if (!groups.insert(d.iommu_group).second) continue;
        for (const auto& m : iommu_group_details(root, d.iommu_group)) {
            if (std::find(job.begin(), job.end(), m.address) != job.end() || m.bridge) continue;
            if (cfg.gpu_by_pci(m.address))
                SVM_THROW(d.address.str() + ": IOMMU group " + std::to_string(d.iommu_group) + " also holds " +
                          m.address.str() +
                          ", another GPU of this node that is not allocated to this job (gres.conf must give the whole "
                          "group)");
            if (is_vfio_safe_driver(m.driver)) continue;
            SVM_THROW(d.address.str() + ": IOMMU group " + std::to_string(d.iommu_group) + " also holds " +
                      m.address.str() + " (" + (m.driver.empty() ? std::string("no driver") : "driver " + m.driver) +
                      "), which is not part of this job; bind it to vfio-pci or pci-stub permanently, or move the GPU "
                      "to a slot with its own group (ACS)");
        }
    }
    return groups;
}

// 4. NUMA placement of plan.devices: their nodes and those nodes' CPUs.
void place_numa(const SysfsRoot& root, DevicePlan& plan) {
    std::set<int> nodes;
    for (const auto& d : plan.devices)
        if (d.numa_node >= 0) nodes.insert(d.numa_node);
    plan.numa_nodes.assign(nodes.begin(), nodes.end());
    if (nodes.size() == 1) plan.numa_node = *nodes.begin();
    if (nodes.size() > 1) plan.warnings.push_back("the job's devices sit on several NUMA nodes; the guest spans them");
    std::vector<int> cpus;
    for (int n : nodes) {
        auto list = root.read_attr(root.node_cpulist(n));
        if (!list) {
            plan.warnings.push_back(root.node_cpulist(n) + " missing");
            continue;
        }
        auto c = parse_cpulist(*list);
        cpus.insert(cpus.end(), c.begin(), c.end());
    }
    if (cpus.empty() && !plan.devices.empty()) {
        // No NUMA information: the kernel's local_cpulist of the first device.
        if (auto l = root.read_attr(root.pci_attr(plan.devices.front().address, "local_cpulist")))
            cpus = parse_cpulist(*l);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    plan.cpus = format_cpulist(cpus);
}

}  // namespace

static DevicePlan plan(const SysfsRoot& root, const DeviceConfig& cfg, std::vector<PlannedDevice> allocated) {
    DevicePlan plan;
    IommuState iommu = read_iommu_state(root);
    std::vector<PlannedDevice> all = allocated;
    for (auto& d : allocated) {
        check_allocated(root, cfg, iommu, d);
        for (auto& x : all)
            if (x.address == d.address) x = d;
        add_companions(root, cfg, d, all);
    }
    std::set<int> groups = check_groups(root, cfg, allocated, all);
    std::sort(all.begin(), all.end(),
              [](const PlannedDevice& x, const PlannedDevice& y) { return x.address < y.address; });
    plan.devices = all;
    plan.iommu_groups.assign(groups.begin(), groups.end());
    place_numa(root, plan);
    if (iommu.interrupt_remapping == Tristate::unknown)
        plan.warnings.push_back("interrupt remapping state unknown (" + root.proc("interrupts") + " unreadable)");
    return plan;
}

}  // namespace svm
