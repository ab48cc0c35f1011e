#include "fake_sysfs.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "error.hpp"
#include "fs.hpp"

namespace svm::test {

namespace {

std::string make_temp(const char* prefix) {
    std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) SVM_THROW_ERRNO("mkdtemp " + tmpl);
    return buf.data();
}

std::string dirname_of(const std::string& p) {
    auto s = p.rfind('/');
    return s == std::string::npos ? "" : p.substr(0, s);
}

std::string basename_of(const std::string& p) {
    auto s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

// Normalises "a/b/../c" to "a/c" (relative paths only).
std::string normalise(const std::string& p) {
    std::vector<std::string> parts;
    std::stringstream in(p);
    std::string x;
    while (std::getline(in, x, '/')) {
        if (x.empty() || x == ".") continue;
        if (x == "..") {
            if (!parts.empty()) parts.pop_back();
            continue;
        }
        parts.push_back(x);
    }
    std::string out;
    for (const auto& s : parts) out += (out.empty() ? "" : "/") + s;
    return out;
}

// The relative target from link `rel` to `target_rel` (both relative to root).
std::string relative_link(const std::string& rel, const std::string& target_rel) {
    size_t depth = std::count(rel.begin(), rel.end(), '/');
    std::string up;
    for (size_t i = 0; i < depth; ++i) up += "../";
    return up + target_rel;
}

std::string hex(unsigned v, int width) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%0*x", width, v);
    return buf;
}

bool valid_hex_bytes(const std::string& s, size_t n) {
    if (s.size() != n * 3 - 1) return false;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i % 3 == 2 ? s[i] != ':' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    }
    return true;
}

}  // namespace

FakeSysfs::FakeSysfs() : root_(make_temp("svm-sysfs")) {
    for (const char* d : {"sys/bus/pci/devices", "sys/bus/pci/drivers", "sys/devices/system/node", "sys/module",
                          "sys/kernel/mm/hugepages", "sys/class", "dev", "proc"})
        mkdir_p(path(d));
    write_rel("sys/bus/pci/drivers_probe", "");
    write_rel("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n");
}

FakeSysfs::FakeSysfs(const std::string& existing_root, Adopt) : root_(existing_root), owned_(false) {
    std::string state = path(".emulated-kernel");
    if (!path_exists(state)) SVM_THROW(root_ + " was not built as a fake tree (no .emulated-kernel)");
    for (const char* which : {"native", "busy"}) {
        std::ifstream in(path_join(state, which));
        std::string addr, v;
        while (in >> addr >> v) {
            if (std::string(which) == "native") native_[addr] = v == "-" ? "" : v;
            else busy_[addr] = std::stoi(v);
        }
    }
}

void FakeSysfs::save_state() const {
    std::string state = path(".emulated-kernel");
    mkdir_p(state);
    std::string n, b;
    for (const auto& [a, d] : native_) n += a + " " + (d.empty() ? "-" : d) + "\n";
    for (const auto& [a, c] : busy_) b += a + " " + std::to_string(c) + "\n";
    write_file_atomic(path_join(state, "native"), n, 0644);
    write_file_atomic(path_join(state, "busy"), b, 0644);
}

FakeSysfs::~FakeSysfs() {
    if (!owned_) return;
    try {
        remove_tree(root_);
    } catch (...) {
    }
}

std::string FakeSysfs::path(const std::string& rel) const { return path_join(root_, rel); }

void FakeSysfs::write_rel(const std::string& rel, const std::string& content) {
    mkdir_p(path(dirname_of(rel)));
    std::ofstream out(path(rel), std::ios::trunc | std::ios::binary);
    out << content;
    if (!out) SVM_THROW("fake sysfs: cannot write " + path(rel));
}

void FakeSysfs::link_rel(const std::string& rel, const std::string& target_rel) {
    mkdir_p(path(dirname_of(rel)));
    ::unlink(path(rel).c_str());
    if (::symlink(relative_link(rel, target_rel).c_str(), path(rel).c_str()) != 0)
        SVM_THROW_ERRNO("fake sysfs: symlink " + path(rel));
}

FakeSysfs& FakeSysfs::iommu(bool on, const std::string& vendor) {
    if (on) {
        mkdir_p(path("sys/kernel/iommu_groups"));
        mkdir_p(path("sys/class/iommu/" + std::string(vendor == "amd" ? "ivhd0" : "dmar0")));
        cmdline(std::string("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet ") +
                (vendor == "amd" ? "amd_iommu=on" : "intel_iommu=on") + " iommu=pt");
        interrupt_remapping(true);
    } else {
        remove_tree(path("sys/kernel/iommu_groups"));
        remove_tree(path("sys/class/iommu"));
        cmdline("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet");
    }
    return *this;
}

FakeSysfs& FakeSysfs::interrupt_remapping(bool on) {
    std::string type = on ? "IR-PCI-MSIX" : "PCI-MSIX";
    write_rel("proc/interrupts",
              "            CPU0       CPU1\n"
              "  0:         35          0   " +
                  std::string(on ? "IR-IO-APIC" : "IO-APIC") +
                  "    2-edge      timer\n"
                  " 64:          0          0   " +
                  type + "-0000:00:1f.6    0-edge      eno1\n");
    return *this;
}

FakeSysfs& FakeSysfs::allow_unsafe_interrupts(bool yes) {
    write_rel("sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts", yes ? "Y\n" : "N\n");
    return *this;
}

FakeSysfs& FakeSysfs::numa_node(int node, const std::string& cpulist) {
    write_rel("sys/devices/system/node/node" + std::to_string(node) + "/cpulist", cpulist + "\n");
    return *this;
}

FakeSysfs& FakeSysfs::driver(const std::string& name) {
    std::string d = "sys/bus/pci/drivers/" + name;
    if (!path_exists(path(d))) {
        write_rel(d + "/bind", "");
        write_rel(d + "/unbind", "");
        write_rel(d + "/new_id", "");
        write_rel(d + "/remove_id", "");
    }
    return *this;
}

FakeSysfs& FakeSysfs::vfio_pci() {
    driver("vfio-pci");
    mkdir_p(path("sys/module/vfio_pci"));
    if (!path_exists(path("sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts")))
        allow_unsafe_interrupts(false);
    write_rel("dev/vfio/vfio", "");
    return *this;
}

FakeSysfs& FakeSysfs::hugepages(int size_kb, int count) {
    write_rel("sys/kernel/mm/hugepages/hugepages-" + std::to_string(size_kb) + "kB/nr_hugepages",
              std::to_string(count) + "\n");
    return *this;
}

FakeSysfs& FakeSysfs::cmdline(const std::string& text) {
    write_rel("proc/cmdline", text + "\n");
    return *this;
}

FakeSysfs& FakeSysfs::nvidia_minor(const std::string& address, int minor) {
    write_rel("proc/driver/nvidia/gpus/" + address + "/information",
              "Model: \t\t NVIDIA Fake\nIRQ:   \t\t 100\nGPU UUID: \t GPU-0000\nDevice Minor: \t " +
                  std::to_string(minor) + "\nBus Location: \t " + address + "\n");
    return *this;
}

std::string FakeSysfs::device_dir_rel(const std::string& address) const {
    // Resolve through the bus link, which add() creates first.
    std::string link = "sys/bus/pci/devices/" + address;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(path(link).c_str(), buf, sizeof buf - 1);
    if (n < 0) SVM_THROW("fake sysfs: no device " + address);
    return normalise(dirname_of(link) + "/" + std::string(buf, static_cast<size_t>(n)));
}

bool FakeSysfs::device_exists(const std::string& address) const {
    return path_exists(path("sys/bus/pci/devices/" + address));
}

std::string FakeSysfs::driver_of(const std::string& address) const {
    return SysfsRoot(root_).link_name(path("sys/bus/pci/devices/" + address + "/driver")).value_or("");
}

std::string FakeSysfs::override_of(const std::string& address) const {
    auto v = SysfsRoot(root_).read_attr(path("sys/bus/pci/devices/" + address + "/driver_override"));
    return !v || *v == "(null)" ? "" : *v;
}

std::optional<int> FakeSysfs::group_of(const std::string& address) const {
    auto g = SysfsRoot(root_).link_name(path("sys/bus/pci/devices/" + address + "/iommu_group"));
    if (!g) return std::nullopt;
    return std::stoi(*g);
}

std::string FakeSysfs::native_driver(const std::string& address) const {
    auto it = native_.find(address);
    return it == native_.end() ? "" : it->second;
}

void FakeSysfs::attach(const std::string& address, const std::string& drv) {
    std::string dev = device_dir_rel(address);
    driver(drv);
    link_rel(dev + "/driver", "sys/bus/pci/drivers/" + drv);
    link_rel("sys/bus/pci/drivers/" + drv + "/" + address, dev);
    if (auto g = group_of(address)) update_vfio(*g);
}

void FakeSysfs::detach(const std::string& address) {
    std::string drv = driver_of(address);
    if (drv.empty()) return;
    ::unlink(path(device_dir_rel(address) + "/driver").c_str());
    ::unlink(path("sys/bus/pci/drivers/" + drv + "/" + address).c_str());
    if (auto g = group_of(address)) update_vfio(*g);
}

void FakeSysfs::update_vfio(int group) {
    std::string devs = "sys/kernel/iommu_groups/" + std::to_string(group) + "/devices";
    bool any_vfio = false, all_safe = true;
    for (const auto& m : list_dir(path(devs))) {
        std::string drv = driver_of(m);
        auto cls = SysfsRoot(root_).read_attr(path("sys/bus/pci/devices/" + m + "/class")).value_or("");
        bool bridge = cls.compare(0, 4, "0x06") == 0;
        if (drv == "vfio-pci") any_vfio = true;
        else if (drv != "pci-stub" && !bridge) all_safe = false;
    }
    std::string node = "dev/vfio/" + std::to_string(group);
    if (any_vfio && all_safe) {
        if (!path_exists(path(node))) write_rel(node, "");
    } else {
        ::unlink(path(node).c_str());
    }
}

int FakeSysfs::next_free_group() const {
    int max = -1;
    for (const auto& g : list_dir(path("sys/kernel/iommu_groups"))) max = std::max(max, std::atoi(g.c_str()));
    return max + 1;
}

FakeSysfs& FakeSysfs::add(const FakeDevice& d) {
    PciAddress a = PciAddress::parse(d.address);
    std::string parent_dir;
    if (d.parent.empty()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "pci%04x:00", a.domain);
        parent_dir = std::string("sys/devices/") + buf;
    } else {
        parent_dir = device_dir_rel(d.parent);
    }
    std::string dev = parent_dir + "/" + a.str();
    mkdir_p(path(dev));
    link_rel("sys/bus/pci/devices/" + a.str(), dev);
    write_rel(dev + "/vendor", hex(d.vendor, 4) + "\n");
    write_rel(dev + "/device", hex(d.device, 4) + "\n");
    write_rel(dev + "/class", hex(d.klass, 6) + "\n");
    write_rel(dev + "/subsystem_vendor", hex(d.vendor, 4) + "\n");
    write_rel(dev + "/subsystem_device", "0x0000\n");
    write_rel(dev + "/numa_node", std::to_string(d.numa_node) + "\n");
    std::string cpus = d.local_cpulist;
    if (cpus.empty() && d.numa_node >= 0)
        cpus = SysfsRoot(root_)
                   .read_attr(path("sys/devices/system/node/node" + std::to_string(d.numa_node) + "/cpulist"))
                   .value_or("");
    write_rel(dev + "/local_cpulist", (cpus.empty() ? "0-15" : cpus) + "\n");
    write_rel(dev + "/driver_override", "(null)\n");
    write_rel(dev + "/enable", "1\n");
    write_rel(dev + "/irq", "0\n");
    write_rel(dev + "/resource", "");  // libpci reads it
    // The first 64 bytes of config space: enough for lspci -A linux-sysfs.
    std::string config(64, '\0');
    config[0] = static_cast<char>(d.vendor & 0xff);
    config[1] = static_cast<char>(d.vendor >> 8);
    config[2] = static_cast<char>(d.device & 0xff);
    config[3] = static_cast<char>(d.device >> 8);
    config[9] = static_cast<char>(d.klass & 0xff);
    config[10] = static_cast<char>((d.klass >> 8) & 0xff);
    config[11] = static_cast<char>((d.klass >> 16) & 0xff);
    config[14] = (d.klass >> 16) == 0x06 ? 1 : 0;
    write_rel(dev + "/config", config);
    if (d.reset_methods) {
        std::string m;
        for (const auto& x : *d.reset_methods) m += (m.empty() ? "" : " ") + x;
        write_rel(dev + "/reset_method", m + "\n");
        write_rel(dev + "/reset", "");
    }
    if (d.iommu_group) {
        std::string g = "sys/kernel/iommu_groups/" + std::to_string(*d.iommu_group);
        mkdir_p(path(g + "/devices"));
        write_rel(g + "/type", "DMA\n");
        link_rel(dev + "/iommu_group", g);
        link_rel(g + "/devices/" + a.str(), dev);
    }
    native_[a.str()] = d.native_driver.value_or(d.driver);
    if (!d.driver.empty()) attach(a.str(), d.driver);
    else if (d.iommu_group) update_vfio(*d.iommu_group);
    if (d.sriov_totalvfs > 0) {
        pf_templates_[a.str()] = d;
        write_rel(dev + "/sriov_totalvfs", std::to_string(d.sriov_totalvfs) + "\n");
        write_rel(dev + "/sriov_numvfs", "0\n");
        write_rel(dev + "/sriov_offset", std::to_string(d.sriov_offset) + "\n");
        write_rel(dev + "/sriov_stride", std::to_string(d.sriov_stride) + "\n");
        write_rel(dev + "/sriov_vf_device", hex(d.vf_device, 4).substr(2) + "\n");
        if (d.sriov_numvfs > 0) set_sriov_numvfs(a.str(), d.sriov_numvfs);
    }
    return *this;
}

void FakeSysfs::set_sriov_numvfs(const std::string& pf, int n) {
    const FakeDevice& t = pf_templates_.at(pf);
    std::string pfdir = device_dir_rel(pf);
    int cur = std::stoi(SysfsRoot(root_).read_attr(path(pfdir + "/sriov_numvfs")).value_or("0"));
    if (n == 0) {
        for (int i = cur - 1; i >= 0; --i) {
            std::string link = pfdir + "/virtfn" + std::to_string(i);
            auto vf = SysfsRoot(root_).link_name(path(link));
            if (!vf) continue;
            std::optional<int> g = group_of(*vf);
            detach(*vf);
            std::string vfdir = device_dir_rel(*vf);
            ::unlink(path("sys/bus/pci/devices/" + *vf).c_str());
            remove_tree(path(vfdir));
            if (g) remove_tree(path("sys/kernel/iommu_groups/" + std::to_string(*g)));
            if (g) ::unlink(path("dev/vfio/" + std::to_string(*g)).c_str());
            ::unlink(path(link).c_str());
            remove_tree(path(pfdir + "/sriov/" + std::to_string(i)));
            native_.erase(*vf);
        }
        remove_tree(path(pfdir + "/sriov"));
        write_rel(pfdir + "/sriov_numvfs", "0\n");
        return;
    }
    PciAddress pa = PciAddress::parse(pf);
    write_rel(pfdir + "/sriov_numvfs", std::to_string(n) + "\n");
    for (int i = 0; i < n; ++i) {
        PciAddress va = PciAddress::from_devfn(pa.domain, pa.bus,
                                               pa.devfn() + static_cast<uint32_t>(t.sriov_offset + t.sriov_stride * i));
        FakeDevice v;
        v.address = va.str();
        v.vendor = t.vendor;
        v.device = t.vf_device;
        v.klass = t.klass;
        v.driver = t.vf_driver;
        v.numa_node = t.numa_node;
        v.local_cpulist = t.local_cpulist;
        v.parent = t.parent;
        v.reset_methods = std::vector<std::string>{"flr"};
        if (group_of(pf)) v.iommu_group = next_free_group();
        add(v);
        std::string vfdir = device_dir_rel(v.address);
        link_rel(vfdir + "/physfn", pfdir);
        link_rel(pfdir + "/virtfn" + std::to_string(i), vfdir);
        if (t.mlx5_sriov_attrs) {
            std::string s = pfdir + "/sriov/" + std::to_string(i);
            write_rel(s + "/node", "00:00:00:00:00:00:00:00\n");
            write_rel(s + "/port", "00:00:00:00:00:00:00:00\n");
            write_rel(s + "/policy", "Down\n");
            write_rel(s + "/mac", "00:00:00:00:00:00\n");
        }
    }
}

std::map<std::string, std::string> FakeSysfs::snapshot() const {
    std::map<std::string, std::string> out;
    std::vector<std::string> todo{""};
    while (!todo.empty()) {
        std::string rel = todo.back();
        todo.pop_back();
        for (const auto& name : list_dir(rel.empty() ? root_ : path(rel))) {
            std::string r = rel.empty() ? name : rel + "/" + name;
            struct stat st;
            if (::lstat(path(r).c_str(), &st) != 0) continue;
            if (S_ISLNK(st.st_mode)) {
                char buf[PATH_MAX];
                ssize_t n = ::readlink(path(r).c_str(), buf, sizeof buf - 1);
                out[r] = "L:" + std::string(buf, n < 0 ? 0 : static_cast<size_t>(n));
            } else if (S_ISDIR(st.st_mode)) {
                out[r] = "D";
                todo.push_back(r);
            } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
                out[r] = (S_ISCHR(st.st_mode) ? "C:" : "B:") + std::to_string(major(st.st_rdev)) + ":" +
                         std::to_string(minor(st.st_rdev));
            } else {
                out[r] = "F:" + read_file(path(r));
            }
        }
    }
    return out;
}

std::string FakeSysfs::diff(const std::map<std::string, std::string>& before,
                            const std::map<std::string, std::string>& after) {
    std::string out;
    auto show = [](const std::string& v) { return v.size() > 60 ? v.substr(0, 60) + "..." : v; };
    for (const auto& [k, v] : before) {
        auto it = after.find(k);
        if (it == after.end()) out += "- " + k + " (" + show(v) + ")\n";
        else if (it->second != v) out += "~ " + k + ": " + show(v) + " -> " + show(it->second) + "\n";
    }
    for (const auto& [k, v] : after)
        if (!before.count(k)) out += "+ " + k + " (" + show(v) + ")\n";
    return out;
}

std::string FakeSysfs::changes_since(const std::map<std::string, std::string>& before) const {
    return diff(before, snapshot());
}

FakeSysfs& FakeSysfs::load_manifest(const std::string& file) {
    std::ifstream in(file);
    if (!in) SVM_THROW("cannot open manifest " + file);
    std::string line;
    auto unescape = [](const std::string& s) {
        std::string out;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't')) {
                out += s[i + 1] == 'n' ? '\n' : '\t';
                ++i;
            } else {
                out += s[i];
            }
        }
        return out;
    };
    while (std::getline(in, line)) {
        std::vector<std::string> f;
        std::stringstream ls(line);
        std::string x;
        while (std::getline(ls, x, '\t')) f.push_back(x);
        if (f.size() < 2) continue;
        std::string rel = normalise(f[1]);
        if (f[0] == "L" && f.size() >= 3) {
            std::string target = normalise(dirname_of(rel) + "/" + f[2]);
            mkdir_p(path(target));
            mkdir_p(path(dirname_of(rel)));
            ::unlink(path(rel).c_str());
            if (::symlink(f[2].c_str(), path(rel).c_str()) != 0) SVM_THROW_ERRNO("symlink " + path(rel));
            if (rel.compare(0, 12, "sys/devices/") == 0 && basename_of(rel) == "driver") {
                // The kernel's ID table: the driver that holds it now.
                native_[basename_of(dirname_of(rel))] = basename_of(target);
            }
        } else if (f[0] == "F") {
            std::string content = f.size() >= 3 ? unescape(f[2]) + "\n" : "\n";
            mkdir_p(path(dirname_of(rel)));
            std::ofstream out(path(rel), std::ios::trunc);
            out << content;
        } else if (f[0] == "I") {
            mkdir_p(path("sys/class/iommu/" + f[1]));
        }
    }
    // What libpci and the fake kernel need beyond the captured files.
    for (const auto& a : list_dir(path("sys/bus/pci/devices"))) {
        std::string dev = device_dir_rel(a);
        if (!path_exists(path(dev + "/resource"))) write_rel(dev + "/resource", "");
        if (!path_exists(path(dev + "/irq"))) write_rel(dev + "/irq", "0\n");
        std::string drv = SysfsRoot(root_).link_name(path(dev + "/driver")).value_or("");
        native_[a] = drv;
        if (!drv.empty()) {
            driver(drv);
            link_rel("sys/bus/pci/drivers/" + drv + "/" + a, dev);
        }
    }
    return *this;
}

// ---------------------------------------------------------------- FakeKernel

void FakeKernel::refuse(const std::string& path, const std::string& value, int err, const std::string& why) {
    refusals_.push_back(path + " <- '" + trim(value) + "': " + why);
    throw SysfsWriteError(path, value, err, __FILE__, __LINE__, __func__);
}

void FakeKernel::write(const std::string& path, const std::string& value) {
    ++writes_;
    const std::string& root = fs_.root();
    if (path.compare(0, root.size() + 1, root + "/") != 0) refuse(path, value, EACCES, "write outside the fake tree");
    std::string rel = normalise(path.substr(root.size() + 1));
    log_.push_back(rel + " <- " + trim(value));
    if (fail_at_ == writes_) throw SysfsWriteError(path, value, fail_err_, __FILE__, __LINE__, __func__);
    if (!path_exists(path)) refuse(path, value, ENOENT, "no such file");
    std::string v = trim(value);

    std::vector<std::string> p;
    {
        std::stringstream in(rel);
        std::string x;
        while (std::getline(in, x, '/')) p.push_back(x);
    }
    auto is = [&](std::initializer_list<const char*> pre) {
        if (p.size() < pre.size()) return false;
        size_t i = 0;
        for (const char* s : pre) {
            if (*s && p[i] != s) return false;
            ++i;
        }
        return true;
    };

    if (rel == "sys/bus/pci/drivers_probe") {
        if (!fs_.device_exists(v)) refuse(path, value, ENODEV, "no such device");
        if (!fs_.driver_of(v).empty()) return;  // bound: nothing to probe
        std::string ovr = fs_.override_of(v);
        std::string want = ovr.empty() ? fs_.native_driver(v) : ovr;
        if (!want.empty() && path_exists(fs_.path("sys/bus/pci/drivers/" + want))) fs_.attach(v, want);
        return;
    }
    if (p.size() == 6 && is({"sys", "bus", "pci", "drivers", ""}) && (p[5] == "bind" || p[5] == "unbind")) {
        const std::string& drv = p[4];
        if (!fs_.device_exists(v)) refuse(path, value, ENODEV, "no such device " + v);
        if (p[5] == "unbind") {
            if (fs_.driver_of(v) != drv)
                refuse(path, value, ENODEV, v + " is not bound to " + drv + " (driver: '" + fs_.driver_of(v) + "')");
            auto b = busy_.find(v + "@" + drv);  // busy only while bound to drv
            if (b == busy_.end()) b = busy_.find(v);
            if (b != busy_.end() && b->second != 0) {
                if (b->second > 0) --b->second;
                throw SysfsWriteError(path, value, EBUSY, __FILE__, __LINE__, __func__);
            }
            fs_.detach(v);
            return;
        }
        if (!fs_.driver_of(v).empty()) refuse(path, value, EBUSY, v + " is already bound to " + fs_.driver_of(v));
        std::string ovr = fs_.override_of(v);
        if (!ovr.empty() && ovr != drv) refuse(path, value, ENODEV, v + " has driver_override " + ovr);
        if (ovr.empty() && fs_.native_driver(v) != drv) refuse(path, value, ENODEV, drv + " does not match " + v);
        fs_.attach(v, drv);
        return;
    }
    if (p.size() == 6 && is({"sys", "bus", "pci", "devices"})) {
        const std::string& dev = p[4];
        if (p[5] == "driver_override") {
            if (v.size() > 255) refuse(path, value, EINVAL, "override too long");
            std::ofstream(path, std::ios::trunc) << (v.empty() ? "(null)" : v) << "\n";
            return;
        }
        if (p[5] == "sriov_numvfs") {
            int n;
            try {
                n = std::stoi(v);
            } catch (...) {
                refuse(path, value, EINVAL, "not a number");
            }
            auto cur = SysfsRoot(root).read_attr(path).value_or("0");
            auto total =
                SysfsRoot(root).read_attr(fs_.path("sys/bus/pci/devices/" + dev + "/sriov_totalvfs")).value_or("0");
            if (n < 0 || n > std::stoi(total)) refuse(path, value, ERANGE, "beyond sriov_totalvfs " + total);
            if (n != 0 && std::stoi(cur) != 0) refuse(path, value, EBUSY, "VFs already enabled (" + cur + ")");
            if (n == std::stoi(cur)) return;
            fs_.set_sriov_numvfs(dev, n);
            return;
        }
    }
    if (p.size() == 8 && is({"sys", "bus", "pci", "devices", "", "sriov"})) {
        const std::string& attr = p[7];
        bool ok = (attr == "node" || attr == "port") ? valid_hex_bytes(v, 8)
                  : attr == "mac"                    ? valid_hex_bytes(v, 6)
                  : attr == "policy"                 ? (v == "Down" || v == "Up" || v == "Follow")
                                                     : false;
        if (!ok) refuse(path, value, EINVAL, "invalid value for sriov " + attr);
        std::ofstream(path, std::ios::trunc) << v << "\n";
        return;
    }
    refuse(path, value, EACCES, "unexpected write");
}

}  // namespace svm::test
