#include "iommu_group.hpp"

#include <algorithm>
#include <sstream>

#include "fs.hpp"
#include "pci_device.hpp"

namespace svm {

bool is_vfio_safe_driver(const std::string& driver) { return driver == "vfio-pci" || driver == "pci-stub"; }

std::vector<PciAddress> iommu_group_members(const SysfsRoot& root, int group) {
    std::string dir = root.iommu_group_devices(group);
    if (!path_exists(dir)) SVM_THROW("IOMMU group " + std::to_string(group) + ": " + dir + " missing");
    std::vector<PciAddress> out;
    for (const auto& name : list_dir(dir)) {
        if (auto a = PciAddress::try_parse(name)) out.push_back(*a);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<GroupMember> iommu_group_details(const SysfsRoot& root, int group) {
    std::vector<GroupMember> out;
    for (const auto& a : iommu_group_members(root, group)) {
        GroupMember m;
        m.address = a;
        m.driver = pci_current_driver(root, a);
        auto cls = root.read_attr(root.pci_attr(a, "class"));
        m.bridge = cls && cls->size() >= 4 && cls->substr(0, 4) == "0x06";
        out.push_back(m);
    }
    return out;
}

const char* tristate_str(Tristate t) {
    switch (t) {
    case Tristate::yes: return "yes";
    case Tristate::no: return "no";
    default: return "unknown";
    }
}

static bool has_word(const std::string& cmdline, const std::string& prefix) {
    std::istringstream in(cmdline);
    std::string w;
    while (in >> w) {
        if (w.compare(0, prefix.size(), prefix) == 0) return true;
    }
    return false;
}

IommuState read_iommu_state(const SysfsRoot& root) {
    IommuState st;
    for (const auto& g : list_dir(root.iommu_groups_dir())) {
        (void)g;
        ++st.group_count;
    }
    st.enabled = st.group_count > 0;
    st.cmdline = root.read_attr(root.proc("cmdline")).value_or("");
    st.cmdline_requests_iommu = has_word(st.cmdline, "intel_iommu=on") || has_word(st.cmdline, "amd_iommu=on") ||
                                has_word(st.cmdline, "amd_iommu=force") || has_word(st.cmdline, "iommu=pt");
    for (const auto& n : list_dir(root.path("sys/class/iommu"))) {
        if (n.compare(0, 4, "dmar") == 0) st.vendor = "intel";
        if (n.compare(0, 4, "ivhd") == 0) st.vendor = "amd";
    }
    // Interrupt remapping: the kernel tags remapped interrupt domains "IR-"
    // in /proc/interrupts (IR-PCI-MSI, IR-IO-APIC). Cmdline switches turn it off.
    std::string interrupts;
    if (has_word(st.cmdline, "intremap=off") || has_word(st.cmdline, "nointremap") ||
        has_word(st.cmdline, "amd_iommu_intr=off")) {
        st.interrupt_remapping = Tristate::no;
    } else if (read_file_if_exists(root.proc("interrupts"), interrupts)) {
        st.interrupt_remapping = interrupts.find("IR-") != std::string::npos ? Tristate::yes : Tristate::no;
    }
    auto unsafe = root.read_attr(root.module_param("vfio_iommu_type1", "allow_unsafe_interrupts"));
    st.allow_unsafe_interrupts = unsafe && (*unsafe == "Y" || *unsafe == "1");
    st.vfio_pci_available = path_exists(root.pci_driver("vfio-pci")) || path_exists(root.path("sys/module/vfio_pci"));
    return st;
}

std::string iommu_fix_hint(const IommuState& st) {
    std::string fix = "enable VT-d/AMD-Vi in the firmware and boot with ";
    if (st.vendor == "amd") fix += "amd_iommu=on iommu=pt";
    else fix += "intel_iommu=on iommu=pt (Intel) or amd_iommu=on iommu=pt (AMD)";
    fix += " on the kernel command line";
    if (st.cmdline_requests_iommu)
        fix += " (the command line already asks for it: check the firmware setting and dmesg for DMAR/AMD-Vi errors)";
    return fix;
}

}  // namespace svm
