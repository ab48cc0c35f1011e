#include "sysfs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "fs.hpp"
#include "proc.hpp"

namespace svm {

SysfsRoot::SysfsRoot(std::string root) : root_(root.empty() ? "/" : std::move(root)) {}

std::string SysfsRoot::path(const std::string& rel) const { return path_join(root_, rel); }

std::string SysfsRoot::pci_device(const PciAddress& a) const { return path("sys/bus/pci/devices/" + a.str()); }

std::string SysfsRoot::pci_attr(const PciAddress& a, const std::string& name) const {
    return pci_device(a) + "/" + name;
}

std::string SysfsRoot::pci_driver(const std::string& driver) const { return path("sys/bus/pci/drivers/" + driver); }

std::string SysfsRoot::pci_driver_file(const std::string& driver, const std::string& file) const {
    return pci_driver(driver) + "/" + file;
}

std::string SysfsRoot::iommu_group_devices(int group) const {
    return path("sys/kernel/iommu_groups/" + std::to_string(group) + "/devices");
}

std::string SysfsRoot::dev_vfio(int group) const { return path("dev/vfio/" + std::to_string(group)); }

std::string SysfsRoot::node_cpulist(int node) const {
    return path("sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
}

std::string SysfsRoot::module_param(const std::string& module, const std::string& param) const {
    return path("sys/module/" + module + "/parameters/" + param);
}

std::optional<std::string> SysfsRoot::read_attr(const std::string& file) const {
    std::string out;
    if (!read_file_if_exists(file, out)) return std::nullopt;
    return trim(out);
}

std::optional<std::string> SysfsRoot::link_name(const std::string& link) const {
    char buf[PATH_MAX];
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n < 0) {
        if (errno == ENOENT || errno == EINVAL) return std::nullopt;  // absent, or not a link
        SVM_THROW_ERRNO("readlink " + link);
    }
    std::string target(buf, static_cast<size_t>(n));
    while (target.size() > 1 && target.back() == '/') target.pop_back();
    auto slash = target.rfind('/');
    return slash == std::string::npos ? target : target.substr(slash + 1);
}

SysfsWriteError::SysfsWriteError(const std::string& file, const std::string& value, int err, const char* src, int line,
                                 const char* fn)
    : Error(errno_message("write '" + trim(value) + "' to " + file, err), src, line, fn), err_(err), file_(file) {}

void RealSysfsWriter::write(const std::string& path, const std::string& value) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) throw SysfsWriteError(path, value, errno, __FILE__, __LINE__, __func__);
    ssize_t n = ::write(fd.get(), value.data(), value.size());
    if (n < 0) throw SysfsWriteError(path, value, errno, __FILE__, __LINE__, __func__);
    if (static_cast<size_t>(n) != value.size()) throw SysfsWriteError(path, value, EIO, __FILE__, __LINE__, __func__);
}

EmulatedKernelWriter::EmulatedKernelWriter(std::string program, const SysfsRoot& root)
    : program_(std::move(program)), root_(root.root()) {
    if (root_ == "/" || root_.empty())
        SVM_THROW(
            "devices.emulated_kernel is for tests with a fake sysfs_root; it cannot stand in for the real kernel");
}

void EmulatedKernelWriter::write(const std::string& path, const std::string& value) {
    RunOptions o;
    o.timeout_ms = 10000;
    RunResult r = run({program_, root_, path, value}, o);
    if (r.ok()) return;
    int err = r.status > 0 && r.status < 128 ? r.status : EIO;
    throw SysfsWriteError(path, value, err, __FILE__, __LINE__, __func__);
}

}  // namespace svm
