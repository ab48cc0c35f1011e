#include "domain_xml.hpp"

#include <cstdio>

#include "cpuset.hpp"
#include "error.hpp"

namespace svm {

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string domain_xml(const DomainSpec& s) {
    if (s.name.empty()) SVM_THROW("domain needs a name");
    if (s.host_cpus.empty()) SVM_THROW("domain " + s.name + " needs at least one CPU");
    if (s.base_format != "qcow2" && s.base_format != "raw")
        SVM_THROW("domain " + s.name + ": base image format must be qcow2 or raw");
    auto e = xml_escape;
    std::string x;
    x += "<domain type='" + e(s.type) + "'>\n";
    x += "  <name>" + e(s.name) + "</name>\n";
    x += "  <memory unit='MiB'>" + std::to_string(s.memory_mib) + "</memory>\n";
    x += "  <vcpu placement='static'>" + std::to_string(s.host_cpus.size()) + "</vcpu>\n";
    x += "  <cputune>\n";
    for (size_t i = 0; i < s.host_cpus.size(); ++i)
        x += "    <vcpupin vcpu='" + std::to_string(i) + "' cpuset='" + std::to_string(s.host_cpus[i]) + "'/>\n";
    x += "    <emulatorpin cpuset='" + format_cpulist(s.host_cpus) + "'/>\n";
    x += "  </cputune>\n";
    if (s.numa_node >= 0)
        x += "  <numatune>\n    <memory mode='strict' nodeset='" + std::to_string(s.numa_node) + "'/>\n  </numatune>\n";
    x += "  <os>\n    <type arch='x86_64' machine='pc'>hvm</type>\n";
    if (!s.kernel.empty()) {
        x += "    <kernel>" + e(s.kernel) + "</kernel>\n";
        if (!s.initrd.empty()) x += "    <initrd>" + e(s.initrd) + "</initrd>\n";
        x += "    <cmdline>" + e(s.cmdline) + "</cmdline>\n";
    } else {
        x += "    <boot dev='hd'/>\n";
    }
    x += "  </os>\n";
    x += "  <features><acpi/></features>\n";
    if (s.type == "kvm") x += "  <cpu mode='host-passthrough' check='none'/>\n";
    x += "  <clock offset='utc'/>\n";
    x += "  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>restart</on_reboot>\n  <on_crash>destroy</on_crash>\n";
    x += "  <devices>\n";
    x += "    <emulator>" + e(s.emulator) + "</emulator>\n";
    // The overlay's only backing is the user's image, format pinned; the
    // user's image has an explicitly empty chain: QEMU opens nothing else.
    x += "    <disk type='file' device='disk'>\n";
    x += "      <driver name='qemu' type='qcow2' discard='unmap'/>\n";
    x += "      <source file='" + e(s.overlay) + "'/>\n";
    x += "      <backingStore type='file'>\n";
    x += "        <format type='" + e(s.base_format) + "'/>\n";
    x += "        <source file='" + e(s.base) + "'/>\n";
    x += "        <backingStore/>\n";
    x += "      </backingStore>\n";
    x += "      <target dev='vda' bus='virtio'/>\n";
    x += "    </disk>\n";
    if (!s.seed.empty()) {
        x += "    <disk type='file' device='disk'>\n";
        x += "      <driver name='qemu' type='raw'/>\n";
        x += "      <source file='" + e(s.seed) + "'/>\n";
        x += "      <backingStore/>\n";
        x += "      <target dev='vdb' bus='virtio'/>\n";
        x += "      <readonly/>\n";
        x += "    </disk>\n";
    }
    for (const auto& sh : s.shares) {
        // QEMU runs as the job's user: the guest gets that user's rights on
        // these files, nothing more ("squash": no ownership changes attempted).
        x += "    <filesystem type='mount' accessmode='squash'>\n";
        x += "      <source dir='" + e(sh.source) + "'/>\n";
        x += "      <target dir='" + e(sh.tag) + "'/>\n";
        x += "    </filesystem>\n";
    }
    if (!s.bridge.empty()) {
        x += "    <interface type='bridge'>\n";
        x += "      <source bridge='" + e(s.bridge) + "'/>\n";
        if (!s.mac.empty()) x += "      <mac address='" + e(s.mac) + "'/>\n";
        if (!s.tap.empty()) x += "      <target dev='" + e(s.tap) + "'/>\n";
        x += "      <model type='virtio'/>\n";
        x += "    </interface>\n";
    }
    if (!s.console_log.empty()) {
        x += "    <serial type='file'>\n";
        x += "      <source path='" + e(s.console_log) + "' append='on'/>\n";
        x += "      <target port='0'/>\n";
        x += "    </serial>\n";
        x += "    <console type='file'>\n";
        x += "      <source path='" + e(s.console_log) + "' append='on'/>\n";
        x += "      <target type='serial' port='0'/>\n";
        x += "    </console>\n";
    }
    for (const auto& h : s.hostdevs) {
        unsigned dom, bus, slot, fn;
        if (std::sscanf(h.c_str(), "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4)
            SVM_THROW("domain " + s.name + ": bad PCI address " + h);
        char a[160];
        std::snprintf(a, sizeof a, "<address domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>", dom, bus,
                      slot, fn);
        // managed='no': our device steps bound it to vfio-pci (and give it back).
        x += "    <hostdev mode='subsystem' type='pci' managed='no'>\n      <driver name='vfio'/>\n";
        x += std::string("      <source>") + a + "</source>\n    </hostdev>\n";
    }
    x += "    <memballoon model='none'/>\n";
    x += "  </devices>\n";
    x += "</domain>\n";
    return x;
}

}  // namespace svm
