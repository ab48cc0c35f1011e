#include "pci_device.hpp"

extern "C" {
#include <pci/pci.h>
}

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <sstream>

#include "fs.hpp"

namespace svm {

std::string PciDevice::vendor_device() const {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%04x:%04x", vendor, device);
    return buf;
}

std::string PciDevice::class_str() const {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%06x", class_code);
    return buf;
}

std::string PciDevice::kind() const {
    uint32_t cls = class_code >> 8;
    if ((cls >> 8) == 0x03) return "gpu";
    if (cls == 0x0207) return "infiniband";
    if (cls == 0x0200) return "ethernet";
    if ((cls >> 8) == 0x02) return "network";
    if (cls == 0x0403) return "audio";
    if ((cls >> 8) == 0x06) return "bridge";
    return "other";
}

Json PciDevice::to_json() const {
    JsonOut j;
    j("address", address);
    char hex[8];
    std::snprintf(hex, sizeof hex, "%04x", vendor);
    j("vendor", hex);
    std::snprintf(hex, sizeof hex, "%04x", device);
    j("device", hex);
    j("vendor_device", vendor_device());
    j("class", class_str());
    j("kind", kind());
    j.nullable("name", name);
    j.nullable("driver", driver);
    j.nullable("driver_override", driver_override);
    j("numa_node", numa_node);
    j("local_cpus", local_cpulist);
    j("iommu_group", iommu_group);
    j("reset_methods", reset_methods);
    j("resettable", reset_known);
    if (sriov_capable) {
        JsonOut s;
        s("totalvfs", sriov_totalvfs);
        s("numvfs", sriov_numvfs);
        std::vector<std::string> vfs;
        for (const auto& v : virtfns) vfs.push_back(v.str());
        s("vfs", vfs);
        j("sriov", s.take());
    } else {
        j("sriov", Json(json_null()));
    }
    j("physfn", physfn ? std::optional<std::string>(physfn->str()) : std::nullopt);
    return j.take();
}

namespace {

int parse_int(const std::string& text, const std::string& file, int base = 10) {
    try {
        size_t used = 0;
        long v = std::stol(text, &used, base);
        if (used != text.size()) throw std::invalid_argument("trailing");
        return static_cast<int>(v);
    } catch (const std::exception&) {
        SVM_THROW(file + ": expected a number, found '" + text + "'");
    }
}

std::string required_attr(const SysfsRoot& root, const PciAddress& a, const std::string& name) {
    std::string file = root.pci_attr(a, name);
    auto v = root.read_attr(file);
    if (!v) SVM_THROW(a.str() + ": missing " + file);
    return *v;
}

}  // namespace

bool pci_device_exists(const SysfsRoot& root, const PciAddress& a) { return path_exists(root.pci_device(a)); }

std::string pci_current_driver(const SysfsRoot& root, const PciAddress& a) {
    return root.link_name(root.pci_attr(a, "driver")).value_or("");
}

std::string pci_driver_override(const SysfsRoot& root, const PciAddress& a) {
    auto v = root.read_attr(root.pci_attr(a, "driver_override"));
    if (!v || *v == "(null)") return "";
    return *v;
}

PciDevice read_pci_device(const SysfsRoot& root, const PciAddress& a) {
    if (!pci_device_exists(root, a)) SVM_THROW(a.str() + ": no such PCI device (" + root.pci_device(a) + " missing)");
    PciDevice d;
    d.address = a;
    d.vendor = static_cast<uint16_t>(parse_int(required_attr(root, a, "vendor"), root.pci_attr(a, "vendor"), 16));
    d.device = static_cast<uint16_t>(parse_int(required_attr(root, a, "device"), root.pci_attr(a, "device"), 16));
    d.class_code = static_cast<uint32_t>(parse_int(required_attr(root, a, "class"), root.pci_attr(a, "class"), 16));
    d.driver = pci_current_driver(root, a);
    d.driver_override = pci_driver_override(root, a);
    if (auto v = root.read_attr(root.pci_attr(a, "numa_node")))
        d.numa_node = parse_int(*v, root.pci_attr(a, "numa_node"));
    d.local_cpulist = root.read_attr(root.pci_attr(a, "local_cpulist")).value_or("");
    if (auto g = root.link_name(root.pci_attr(a, "iommu_group")))
        d.iommu_group = parse_int(*g, root.pci_attr(a, "iommu_group"));
    if (auto r = root.read_attr(root.pci_attr(a, "reset_method"))) {
        std::istringstream in(*r);
        std::string m;
        while (in >> m) d.reset_methods.push_back(m);
        d.reset_known = !d.reset_methods.empty();
    } else if (path_exists(root.pci_attr(a, "reset"))) {
        d.reset_known = true;  // kernels before 5.15: reset exists, methods unnamed
    }
    if (auto t = root.read_attr(root.pci_attr(a, "sriov_totalvfs"))) {
        d.sriov_capable = true;
        d.sriov_totalvfs = parse_int(*t, root.pci_attr(a, "sriov_totalvfs"));
        if (auto n = root.read_attr(root.pci_attr(a, "sriov_numvfs")))
            d.sriov_numvfs = parse_int(*n, root.pci_attr(a, "sriov_numvfs"));
        for (int i = 0;; ++i) {
            auto vf = root.link_name(root.pci_attr(a, "virtfn" + std::to_string(i)));
            if (!vf) break;
            d.virtfns.push_back(PciAddress::parse(*vf));
        }
    }
    if (auto pf = root.link_name(root.pci_attr(a, "physfn"))) d.physfn = PciAddress::parse(*pf);
    return d;
}

namespace {

// libpci reports fatal problems through a callback that must not return.
// We turn them into svm::Error (libpci is C built with unwind tables). The
// GNU attribute, as in libpci's pointer type: clang refuses [[noreturn]] there.
__attribute__((noreturn)) void pci_error_cb(char* msg, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, msg);
    std::vsnprintf(buf, sizeof buf, msg, ap);
    va_end(ap);
    SVM_THROW(std::string("libpci: ") + buf);
}

void pci_quiet_cb(char*, ...) {}

struct PciAccessDeleter {
    void operator()(pci_access* a) const { pci_cleanup(a); }
};
using PciAccess = std::unique_ptr<pci_access, PciAccessDeleter>;

PciAccess open_pci(const SysfsRoot& root) {
    PciAccess acc(pci_alloc());
    if (!acc) SVM_THROW("libpci: pci_alloc failed");
    acc->error = pci_error_cb;
    acc->warning = pci_quiet_cb;
    acc->debug = pci_quiet_cb;
    acc->method = PCI_ACCESS_SYS_BUS_PCI;
    std::string sysfs = root.pci_bus();
    // pciutils >= 3.x names the parameter "sysfs.path" (default /sys/bus/pci).
    if (pci_set_param(acc.get(), const_cast<char*>("sysfs.path"), const_cast<char*>(sysfs.c_str())) != 0)
        SVM_THROW("libpci: cannot set sysfs.path to " + sysfs);
    pci_init(acc.get());
    return acc;
}

}  // namespace

std::vector<PciAddress> list_pci_addresses(const SysfsRoot& root) {
    std::vector<PciAddress> out;
    if (!path_exists(root.pci_devices_dir())) SVM_THROW("no PCI bus in sysfs: " + root.pci_devices_dir() + " missing");
    PciAccess acc = open_pci(root);
    pci_scan_bus(acc.get());
    for (pci_dev* d = acc->devices; d; d = d->next) {
        // Identity and class through libpci too: a device whose sysfs entry is
        // broken is reported here rather than half-listed.
        pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS);
        PciAddress a;
        a.domain = static_cast<uint32_t>(d->domain);
        a.bus = d->bus;
        a.slot = d->dev;
        a.function = d->func;
        out.push_back(a);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<PciDevice> scan_pci_devices(const SysfsRoot& root) {
    std::vector<PciDevice> out;
    for (const auto& a : list_pci_addresses(root)) out.push_back(read_pci_device(root, a));
    // Names from the system's pci.ids (not from the root: the database is data, not state).
    PciAccess acc(pci_alloc());
    if (acc) {
        acc->error = pci_error_cb;
        acc->warning = pci_quiet_cb;
        acc->debug = pci_quiet_cb;
        for (auto& d : out) {
            char buf[256];
            const char* n =
                pci_lookup_name(acc.get(), buf, sizeof buf,
                                PCI_LOOKUP_VENDOR | PCI_LOOKUP_DEVICE | PCI_LOOKUP_NO_NUMBERS, d.vendor, d.device);
            // Unknown IDs come back as "Device 2335": not a name.
            if (n && std::string(n).compare(0, 7, "Device ") != 0 && std::string(n) != "<unknown>") d.name = n;
        }
    }
    return out;
}

}  // namespace svm
