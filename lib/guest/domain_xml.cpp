#include "domain_xml.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "cpuset.hpp"
#include "error.hpp"
#include "pci_address.hpp"

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

namespace {

// A host function from its address in the kernel's form, DDDD:BB:DD.F.
PciAddress parse_function(const std::string& domain, const std::string& a) {
    auto f = PciAddress::try_parse(a);
    if (!f) SVM_THROW("domain " + domain + ": bad PCI address " + a);
    return *f;
}

std::string pci_address(unsigned dom, unsigned bus, unsigned slot, unsigned fn, bool guest,
                        bool multifunction = false) {
    char a[200];
    std::snprintf(a, sizeof a, "<address %sdomain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'%s/>",
                  guest ? "type='pci' " : "", dom, bus, slot, fn, multifunction ? " multifunction='on'" : "");
    return a;
}

// The guest's PCIe layout for the passed-through functions: one group per
// host NUMA node, each a root port with a switch whose downstream ports hold
// one host slot each (its functions renumbered from 0 in host order, so a
// VF at function 3 is function 0 in the guest, where it is enumerated).
std::string hostdev_xml(const DomainSpec& s) {
    struct Slot {
        PciAddress key;
        std::vector<std::pair<PciAddress, const HostdevSpec*>> fns;
    };
    std::map<int, std::vector<Slot>> groups;  // host NUMA node (-1 = unknown) -> slots, in spec order
    for (const auto& h : s.hostdevs) {
        PciAddress f = parse_function(s.name, h.address);
        // A function whose node the host does not say joins the guest memory's node.
        auto& slots = groups[h.numa_node >= 0 ? h.numa_node : s.numa_node >= 0 ? s.numa_node : -1];
        Slot* into = nullptr;
        for (auto& sl : slots)
            if (sl.key.same_slot(f)) into = &sl;
        if (!into) {
            slots.push_back({f, {}});
            into = &slots.back();
        }
        for (const auto& have : into->fns)
            if (have.first.function == f.function)
                SVM_THROW("domain " + s.name + ": PCI function " + h.address + " given twice");
        auto pos = into->fns.begin();
        while (pos != into->fns.end() && pos->first.function < f.function) ++pos;
        into->fns.insert(pos, {f, &h});
    }
    std::string ctl, dev;
    unsigned next = 1;  // controller index; 0 is q35's pcie-root
    for (const auto& [node, slots] : groups) {
        (void)node;
        if (slots.size() > 32) SVM_THROW("domain " + s.name + ": more than 32 PCI slots on one host NUMA node");
        unsigned root = next++, up = next++;
        ctl += "    <controller type='pci' index='" + std::to_string(root) + "' model='pcie-root-port'/>\n";
        ctl += "    <controller type='pci' index='" + std::to_string(up) + "' model='pcie-switch-upstream-port'>\n";
        ctl += "      " + pci_address(0, root, 0, 0, true) + "\n    </controller>\n";
        for (size_t i = 0; i < slots.size(); ++i) {
            unsigned down = next++;
            ctl += "    <controller type='pci' index='" + std::to_string(down) +
                   "' model='pcie-switch-downstream-port'>\n";
            ctl += "      " + pci_address(0, up, static_cast<unsigned>(i), 0, true) + "\n    </controller>\n";
            const auto& fns = slots[i].fns;
            for (size_t k = 0; k < fns.size(); ++k) {
                const PciAddress& f = fns[k].first;
                // managed='no': our device steps bound it to vfio-pci (and give it back).
                dev += "    <hostdev mode='subsystem' type='pci' managed='no'>\n      <driver name='vfio'/>\n";
                dev += "      <source>" + pci_address(f.domain, f.bus, f.slot, f.function, false) + "</source>\n";
                dev +=
                    "      " + pci_address(0, down, 0, static_cast<unsigned>(k), true, k == 0 && fns.size() > 1) + "\n";
                dev += "    </hostdev>\n";
            }
        }
    }
    return ctl + dev;
}

void check_domain_spec(const DomainSpec& s) {
    if (s.name.empty()) SVM_THROW("domain needs a name");
    if (s.host_cpus.empty()) SVM_THROW("domain " + s.name + " needs at least one CPU");
    if (s.base_format != "qcow2" && s.base_format != "raw")
        SVM_THROW("domain " + s.name + ": base image format must be qcow2 or raw");
    if (s.hugepage_kib < 0 || (s.hugepage_kib > 0 && (s.memory_mib * 1024) % s.hugepage_kib != 0))
        SVM_THROW("domain " + s.name + ": memory of " + std::to_string(s.memory_mib) +
                  " MiB is not a whole number of " + std::to_string(s.hugepage_kib) + " KiB hugepages");
}

// The guest's memory: its size, its backing (hugepages, shared with
// virtiofsd), its vCPUs pinned to the job's CPUs, and its host NUMA nodes.
std::string memory_and_cpus_xml(const DomainSpec& s) {
    std::string x = "  <memory unit='MiB'>" + std::to_string(s.memory_mib) + "</memory>\n";
    // virtiofsd reads and writes guest memory itself: it must be shared.
    bool shared = std::any_of(s.shares.begin(), s.shares.end(), [](const ShareSpec& sh) { return !sh.socket.empty(); });
    if (s.hugepage_kib > 0) {
        // No nodeset: it names guest NUMA cells, and the guest has none; the
        // host node the pages come from is numatune's.
        x += "  <memoryBacking>\n    <hugepages>\n      <page size='" + std::to_string(s.hugepage_kib) +
             "' unit='KiB'/>\n    </hugepages>\n";
        if (shared) x += "    <access mode='shared'/>\n";
        x += "  </memoryBacking>\n";
    } else if (shared) {
        x += "  <memoryBacking>\n    <source type='memfd'/>\n    <access mode='shared'/>\n  </memoryBacking>\n";
    }
    x += "  <vcpu placement='static'>" + std::to_string(s.host_cpus.size()) + "</vcpu>\n";
    x += "  <cputune>\n";
    for (size_t i = 0; i < s.host_cpus.size(); ++i)
        x += "    <vcpupin vcpu='" + std::to_string(i) + "' cpuset='" + std::to_string(s.host_cpus[i]) + "'/>\n";
    x += "    <emulatorpin cpuset='" + format_cpulist(s.host_cpus) + "'/>\n";
    x += "  </cputune>\n";
    if (s.numa_node >= 0) {
        x += "  <numatune>\n    <memory mode='strict' nodeset='" + std::to_string(s.numa_node) + "'/>\n  </numatune>\n";
    } else if (s.numa_interleave.size() > 1) {
        std::string set;
        for (int n : s.numa_interleave) set += (set.empty() ? "" : ",") + std::to_string(n);
        x += "  <numatune>\n    <memory mode='interleave' nodeset='" + set + "'/>\n  </numatune>\n";
    }
    return x;
}

// How the guest boots and what machine it runs on, up to its devices.
std::string machine_xml(const DomainSpec& s) {
    auto e = xml_escape;
    // q35 (PCIe) only for guests with passthrough devices: their layout needs
    // PCIe root and switch ports; every other guest stays as it was.
    std::string x = std::string("  <os>\n    <type arch='x86_64' machine='") + (s.hostdevs.empty() ? "pc" : "q35") +
                    "'>hvm</type>\n";
    if (!s.kernel.empty()) {
        x += "    <kernel>" + e(s.kernel) + "</kernel>\n";
        if (!s.initrd.empty()) x += "    <initrd>" + e(s.initrd) + "</initrd>\n";
        x += "    <cmdline>" + e(s.cmdline) + "</cmdline>\n";
    } else {
        x += "    <boot dev='hd'/>\n";
    }
    x += "  </os>\n";
    // TCG (no KVM: tests): QEMU's translation cache defaults to 1 GiB, more
    // than a small job's whole memory overhead; 256 MiB is plenty.
    if (s.type == "qemu")
        x += "  <features>\n    <acpi/>\n    <tcg>\n      <tb-cache unit='MiB'>256</tb-cache>\n    </tcg>\n  "
             "</features>\n";
    else x += "  <features><acpi/></features>\n";
    if (s.type == "kvm") x += "  <cpu mode='host-passthrough' check='none'/>\n";
    x += "  <clock offset='utc'/>\n";
    x += "  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>restart</on_reboot>\n  <on_crash>destroy</on_crash>\n";
    return x;
}

// The job's disk (the overlay over the user's image) and the seed.
std::string disks_xml(const DomainSpec& s) {
    auto e = xml_escape;
    // The overlay's only backing is the user's image, format pinned; the
    // user's image has an explicitly empty chain: QEMU opens nothing else.
    std::string x = "    <disk type='file' device='disk'>\n";
    x += "      <driver name='qemu' type='qcow2' discard='unmap'/>\n";
    x += "      <source file='" + e(s.overlay) + "'/>\n";
    x += "      <backingStore type='file'>\n";
    x += "        <format type='" + e(s.base_format) + "'/>\n";
    x += "        <source file='" + e(s.base) + "'" +
         (s.base_fdgroup.empty() ? "" : " fdgroup='" + e(s.base_fdgroup) + "'") + "/>\n";
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
    return x;
}

std::string shares_xml(const DomainSpec& s) {
    auto e = xml_escape;
    std::string x;
    for (const auto& sh : s.shares) {
        if (!sh.socket.empty()) {
            // Served by a virtiofsd running as the job's user (virtiofs.hpp).
            x += "    <filesystem type='mount'>\n";
            x += "      <driver type='virtiofs' queue='1024'/>\n";
            x += "      <source socket='" + e(sh.socket) + "'/>\n";
        } else {
            // QEMU runs as the job's user: the guest gets that user's rights on
            // these files, nothing more ("squash": no ownership changes attempted).
            x += "    <filesystem type='mount' accessmode='squash'>\n";
            x += "      <source dir='" + e(sh.source) + "'/>\n";
        }
        x += "      <target dir='" + e(sh.tag) + "'/>\n";
        x += "    </filesystem>\n";
    }
    return x;
}

// The guest's network interface, its console (into the log file) and its
// agent's channels.
std::string network_and_channels_xml(const DomainSpec& s) {
    auto e = xml_escape;
    std::string x;
    if (!s.bridge.empty()) {
        x += "    <interface type='bridge'>\n";
        x += "      <source bridge='" + e(s.bridge) + "'/>\n";
        if (!s.mac.empty()) x += "      <mac address='" + e(s.mac) + "'/>\n";
        if (!s.tap.empty()) x += "      <target dev='" + e(s.tap) + "'/>\n";
        if (s.mtu > 0) x += "      <mtu size='" + std::to_string(s.mtu) + "'/>\n";
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
    for (size_t i = 0; i < s.agent_channels.size() && i < kAgentPorts; ++i) {
        x += "    <channel type='unix'>\n";
        x += "      <source mode='bind' path='" + e(s.agent_channels[i]) + "'/>\n";
        x += "      <target type='virtio' name='" + e(kAgentPortNames[i]) + "'/>\n";
        x += "    </channel>\n";
    }
    return x;
}

}  // namespace

std::string domain_xml(const DomainSpec& s) {
    check_domain_spec(s);
    std::string x;
    x += "<domain type='" + xml_escape(s.type) + "'>\n";
    x += "  <name>" + xml_escape(s.name) + "</name>\n";
    if (!s.uuid.empty()) x += "  <uuid>" + xml_escape(s.uuid) + "</uuid>\n";
    x += memory_and_cpus_xml(s);
    x += machine_xml(s);
    x += "  <devices>\n";
    x += "    <emulator>" + xml_escape(s.emulator) + "</emulator>\n";
    x += disks_xml(s);
    x += shares_xml(s);
    x += network_and_channels_xml(s);
    if (!s.hostdevs.empty()) x += hostdev_xml(s);
    // Entropy from the host (QEMU's getrandom(), no device file): without
    // it a guest's kernel seeds its random number generator only from its
    // own jitter, seconds into the boot under emulation, and sshd's first
    // getrandom() waits for that (a CPU passed through with RDRAND seeds it
    // at once; an emulated one has none).
    x += "    <rng model='virtio'>\n      <backend model='builtin'/>\n    </rng>\n";
    x += "    <memballoon model='none'/>\n";
    x += "  </devices>\n";
    x += "</domain>\n";
    return x;
}

}  // namespace svm
