#include "guest_net.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "error.hpp"
#include "fs.hpp"

namespace svm {

GuestAddress guest_address(const std::string& prefix, uint32_t job_id, int node_index) {
    unsigned a, b, c, d, len;
    if (std::sscanf(prefix.c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &len) != 5 || a > 255 || b > 255 || len != 16)
        SVM_THROW("network prefix \"" + prefix + "\" must be an IPv4 /16 such as 10.213.0.0/16");
    if (node_index < 0 || node_index > 240) SVM_THROW("a VM job may span at most 241 nodes");
    unsigned third = job_id % 254 + 1, fourth = static_cast<unsigned>(node_index) + 10;
    GuestAddress g;
    g.ip = std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(third) + "." + std::to_string(fourth);
    char mac[32];
    std::snprintf(mac, sizeof mac, "52:54:%02x:%02x:%02x:%02x", a, b, third, fourth);
    g.mac = mac;
    g.prefix_len = 16;
    return g;
}

std::string take_lease(const std::string& dir, const std::string& ip, const std::string& owner) {
    mkdir_p(dir, 0755);
    std::string f = path_join(dir, ip);
    int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == EEXIST) {
            std::string holder;
            read_file_if_exists(f, holder);
            if (trim(holder) == owner) return f;  // ours already (prolog re-run)
            SVM_THROW("guest address " + ip + " is still held by " + trim(holder));
        }
        SVM_THROW_ERRNO("create lease " + f);
    }
    UniqueFd g(fd);
    std::string s = owner + "\n";
    if (::write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size())) SVM_THROW_ERRNO("write lease " + f);
    ::fsync(fd);
    return f;
}

void release_lease(const std::string& lease_file, const std::string& owner) {
    std::string holder;
    if (!read_file_if_exists(lease_file, holder)) return;
    if (trim(holder) != owner) return;  // someone else's now: leave it
    remove_tree(lease_file);
}

void enter_netns(const std::string& name) {
    std::string p = "/run/netns/" + name;
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open network namespace " + p);
    if (::setns(fd.get(), CLONE_NEWNET) != 0) SVM_THROW_ERRNO("enter network namespace " + name);
}

}  // namespace svm
