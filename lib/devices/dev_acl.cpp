#include "dev_acl.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm {

namespace {

// The kernel's POSIX ACL xattr: a version word, then {tag, perm, id} entries
// sorted by tag and id (include/uapi/linux/posix_acl_xattr.h).
constexpr const char* kXattr = "system.posix_acl_access";
constexpr uint32_t kVersion = 2;
enum : uint16_t { USER_OBJ = 0x01, USER = 0x02, GROUP_OBJ = 0x04, GROUP = 0x08, MASK = 0x10, OTHER = 0x20 };
constexpr uint32_t kUndefinedId = 0xffffffffu;
constexpr const char* kAclLock = "/run/slurm-vm-dev-acl.lock";

struct Entry {
    uint16_t tag;
    uint16_t perm;
    uint32_t id;
};

std::vector<Entry> minimal_acl(mode_t mode) {
    return {{USER_OBJ, static_cast<uint16_t>((mode >> 6) & 7), kUndefinedId},
            {GROUP_OBJ, static_cast<uint16_t>((mode >> 3) & 7), kUndefinedId},
            {OTHER, static_cast<uint16_t>(mode & 7), kUndefinedId}};
}

std::vector<Entry> read_acl(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) SVM_THROW_ERRNO("stat " + path);
    char buf[4096];
    ssize_t n = ::getxattr(path.c_str(), kXattr, buf, sizeof buf);
    if (n < 0) {
        if (errno == ENODATA) return minimal_acl(st.st_mode);
        SVM_THROW_ERRNO("read the ACL of " + path);
    }
    uint32_t version;
    if (n < 4 || (n - 4) % 8 != 0) SVM_THROW("the ACL of " + path + " is malformed");
    std::memcpy(&version, buf, 4);
    if (version != kVersion) SVM_THROW("the ACL of " + path + " has unknown version " + std::to_string(version));
    std::vector<Entry> out;
    for (ssize_t off = 4; off < n; off += 8) {
        Entry e;
        std::memcpy(&e.tag, buf + off, 2);
        std::memcpy(&e.perm, buf + off + 2, 2);
        std::memcpy(&e.id, buf + off + 4, 4);
        out.push_back(e);
    }
    return out;
}

bool named(const Entry& e) { return e.tag == USER || e.tag == GROUP; }

void write_acl(const std::string& path, std::vector<Entry> acl) {
    acl.erase(std::remove_if(acl.begin(), acl.end(), [](const Entry& e) { return e.tag == MASK; }), acl.end());
    if (std::none_of(acl.begin(), acl.end(), named)) {
        // Back to a minimal ACL: the mode bits say it all, the group's
        // again (while a mask existed, they showed the mask).
        if (::removexattr(path.c_str(), kXattr) != 0 && errno != ENODATA) SVM_THROW_ERRNO("remove the ACL of " + path);
        struct stat st;
        if (::stat(path.c_str(), &st) != 0) SVM_THROW_ERRNO("stat " + path);
        for (const auto& e : acl)
            if (e.tag == GROUP_OBJ &&
                ::chmod(path.c_str(), static_cast<mode_t>((st.st_mode & 07707) | (e.perm << 3))) != 0)
                SVM_THROW_ERRNO("chmod " + path);
        return;
    }
    uint16_t mask = 0;
    for (const auto& e : acl)
        if (e.tag == USER || e.tag == GROUP || e.tag == GROUP_OBJ) mask |= e.perm;
    acl.push_back({MASK, mask, kUndefinedId});
    std::sort(acl.begin(), acl.end(),
              [](const Entry& a, const Entry& b) { return a.tag != b.tag ? a.tag < b.tag : a.id < b.id; });
    std::vector<char> buf(4 + 8 * acl.size());
    std::memcpy(buf.data(), &kVersion, 4);
    for (size_t i = 0; i < acl.size(); ++i) {
        std::memcpy(buf.data() + 4 + 8 * i, &acl[i].tag, 2);
        std::memcpy(buf.data() + 6 + 8 * i, &acl[i].perm, 2);
        std::memcpy(buf.data() + 8 + 8 * i, &acl[i].id, 4);
    }
    if (::setxattr(path.c_str(), kXattr, buf.data(), buf.size(), 0) != 0)
        SVM_THROW_ERRNO("set the ACL of " + path + " (does its file system support POSIX ACLs?)");
}

// Every change reads, edits and writes the whole ACL: two jobs' prologs and
// epilogs on one host must not interleave, or one job's entry is lost (kept
// after its job, or never granted). One lock for the host: its device nodes
// are the host's, whichever slurmd's job asks.
class AclLock {
public:
    AclLock() {
        fd_ = ::open(kAclLock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd_ < 0) SVM_THROW_ERRNO(std::string("open ") + kAclLock);
        while (::flock(fd_, LOCK_EX) != 0)
            if (errno != EINTR) SVM_THROW_ERRNO(std::string("lock ") + kAclLock);
    }
    ~AclLock() { ::close(fd_); }
    AclLock(const AclLock&) = delete;
    AclLock& operator=(const AclLock&) = delete;

private:
    int fd_ = -1;
};

void set_entry(const std::string& path, uint16_t tag, uint32_t id, unsigned perm) {
    AclLock lock;
    std::vector<Entry> acl = read_acl(path);
    acl.erase(std::remove_if(acl.begin(), acl.end(), [&](const Entry& e) { return e.tag == tag && e.id == id; }),
              acl.end());
    acl.push_back({tag, static_cast<uint16_t>(perm & 7), id});
    write_acl(path, acl);
}

}  // namespace

void grant_group_rw(const std::string& path, gid_t gid) { set_entry(path, GROUP, static_cast<uint32_t>(gid), 6); }

void grant_user(const std::string& path, uid_t uid, unsigned perm) {
    set_entry(path, USER, static_cast<uint32_t>(uid), perm);
}

bool revoke_group(const std::string& path, gid_t gid) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return false;
    AclLock lock;
    std::vector<Entry> acl = read_acl(path);
    auto before = acl.size();
    acl.erase(std::remove_if(acl.begin(), acl.end(), [&](const Entry& e) { return e.tag == GROUP && e.id == gid; }),
              acl.end());
    if (acl.size() == before) return false;
    write_acl(path, acl);
    return true;
}

bool has_group_entry(const std::string& path, gid_t gid) {
    for (const auto& e : read_acl(path))
        if (e.tag == GROUP && e.id == gid) return true;
    return false;
}

std::vector<gid_t> group_entries(const std::string& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return {};
    // A file system without POSIX ACLs holds no entries.
    if (::getxattr(path.c_str(), kXattr, nullptr, 0) < 0 && errno == EOPNOTSUPP) return {};
    std::vector<gid_t> out;
    for (const auto& e : read_acl(path))
        if (e.tag == GROUP) out.push_back(static_cast<gid_t>(e.id));
    return out;
}

bool accessible_rw_as(const std::string& path, uid_t uid, gid_t gid) {
    // Supplementary groups as libvirt gives them to QEMU: the user's, by name.
    Credentials who{uid, gid, {gid}, ""};
    if (struct passwd* pw = ::getpwuid(uid)) {
        int n = 64;
        who.groups.resize(static_cast<size_t>(n));
        if (::getgrouplist(pw->pw_name, gid, who.groups.data(), &n) < 0) {
            who.groups.resize(static_cast<size_t>(n));
            ::getgrouplist(pw->pw_name, gid, who.groups.data(), &n);
        }
        who.groups.resize(static_cast<size_t>(n));
    }
    // test(1) in a child of that identity (exec'd: the keeper, which asks,
    // runs libvirt's threads, and a child of a threaded process runs no C++).
    RunOptions o;
    o.as = who;
    o.timeout_ms = 10000;
    RunResult r = run({"test", "-r", path, "-a", "-w", path}, o);
    if (r.status != 0 && r.status != 1)
        SVM_THROW("checking access to " + path + " as uid " + std::to_string(uid) + " failed: " + trim(r.err));
    return r.status == 0;
}

}  // namespace svm
