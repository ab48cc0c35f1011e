#include "fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "error.hpp"
#include "sha256.hpp"

namespace svm {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.release();
    }
    return *this;
}

UniqueFd::~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
}

static std::string read_fd(int fd, const std::string& path) {
    std::string out;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            SVM_THROW_ERRNO("read " + path);
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

std::string read_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open " + path);
    return read_fd(fd.get(), path);
}

std::string read_file_from(const std::string& path, int64_t offset, size_t max_bytes, int64_t* size) {
    *size = 0;
    UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!f) {
        if (errno == ENOENT) return "";
        SVM_THROW_ERRNO("open " + path);
    }
    struct stat st;
    if (::fstat(f.get(), &st) != 0) SVM_THROW_ERRNO("stat " + path);
    *size = st.st_size;
    if (st.st_size <= offset) return "";
    std::string out(std::min<size_t>(max_bytes, static_cast<size_t>(st.st_size - offset)), '\0');
    ssize_t n = ::pread(f.get(), out.data(), out.size(), offset);
    if (n < 0) SVM_THROW_ERRNO("read " + path);
    out.resize(static_cast<size_t>(n));
    return out;
}

bool read_file_if_exists(const std::string& path, std::string& out) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        if (errno == ENOENT) return false;
        SVM_THROW_ERRNO("open " + path);
    }
    out = read_fd(fd.get(), path);
    return true;
}

static void write_all(int fd, const std::string& data, const std::string& path) {
    size_t off = 0;
    while (off < data.size()) {
        ssize_t n = ::write(fd, data.data() + off, data.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            SVM_THROW_ERRNO("write " + path);
        }
        off += static_cast<size_t>(n);
    }
}

static std::string dirname_of(const std::string& path) {
    auto pos = path.rfind('/');
    if (pos == std::string::npos) return ".";
    if (pos == 0) return "/";
    return path.substr(0, pos);
}

static void write_and_rename(const std::string& path, const std::string& content, mode_t mode, bool sync) {
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
        UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
        if (!fd) SVM_THROW_ERRNO("create " + tmp);
        if (::fchmod(fd.get(), mode) != 0) SVM_THROW_ERRNO("chmod " + tmp);
        write_all(fd.get(), content, tmp);
        if (sync && ::fsync(fd.get()) != 0) SVM_THROW_ERRNO("fsync " + tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        SVM_THROW(errno_message("rename " + tmp + " to " + path, e));
    }
    if (!sync) return;
    UniqueFd dir(::open(dirname_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir) ::fsync(dir.get());
}

void write_file_atomic(const std::string& path, const std::string& content, mode_t mode) {
    write_and_rename(path, content, mode, true);
}

void replace_file(const std::string& path, const std::string& content, mode_t mode) {
    write_and_rename(path, content, mode, false);
}

std::string fd_real_path(int fd) {
    char buf[PATH_MAX + 1];
    std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), buf, PATH_MAX);
    if (n < 0) SVM_THROW_ERRNO("readlink " + link);
    return std::string(buf, static_cast<size_t>(n));
}

void write_new_file(const std::string& path, const std::string& content, mode_t mode) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
    if (!fd) SVM_THROW_ERRNO("create " + path);
    if (::fchmod(fd.get(), mode) != 0) SVM_THROW_ERRNO("chmod " + path);
    write_all(fd.get(), content, path);
}

std::string file_version_key(const struct stat& st) {
    return std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " +
           std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

static std::string kept_entry(const std::string& dir, const std::string& key) {
    return path_join(dir, sha256_hex(key).substr(0, 32));
}

std::string kept_value(const std::string& dir, const std::string& key) {
    std::string v;
    try {
        if (read_file_if_exists(kept_entry(dir, key), v)) return trim(v);
    } catch (const Error&) {
    }
    return "";
}

void keep_value(const std::string& dir, const std::string& key, const std::string& value) {
    try {
        mkdir_p(dir, 0700);
        write_file_atomic(kept_entry(dir, key), value + "\n", 0600);
    } catch (const Error&) {
    }
}

void write_sysfs(const std::string& path, const std::string& value) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open " + path);
    ssize_t n = ::write(fd.get(), value.data(), value.size());
    if (n < 0) SVM_THROW_ERRNO("write " + path);
    if (static_cast<size_t>(n) != value.size()) SVM_THROW("short write to " + path);
}

void mkdir_p(const std::string& dir, mode_t mode) {
    std::string path = dir;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path.empty()) return;
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        cur = path.substr(0, pos);
        if (cur.empty()) continue;
        // As mkdir -p: the parents it makes are 0755, only `path` gets `mode`
        // (a private log directory must not close a shared parent to others).
        mode_t m = pos == std::string::npos ? mode : 0755;
        if (::mkdir(cur.c_str(), m) != 0 && errno != EEXIST) SVM_THROW_ERRNO("mkdir " + cur);
    }
}

static void remove_at(int dirfd, const char* name, const std::string& shown) {
    if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
    if (errno != EISDIR && errno != EPERM) SVM_THROW_ERRNO("remove " + shown);
    int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return;
        SVM_THROW_ERRNO("open " + shown);
    }
    DIR* d = ::fdopendir(fd);
    if (!d) {
        ::close(fd);
        SVM_THROW_ERRNO("opendir " + shown);
    }
    while (dirent* e = ::readdir(d)) {
        if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
        remove_at(::dirfd(d), e->d_name, shown + "/" + e->d_name);
    }
    ::closedir(d);
    if (::unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) SVM_THROW_ERRNO("rmdir " + shown);
}

void remove_tree(const std::string& path) { remove_at(AT_FDCWD, path.c_str(), path); }

bool path_exists(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
}

std::string path_join(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    bool as = a.back() == '/', bs = b.front() == '/';
    if (as && bs) return a + b.substr(1);
    if (as || bs) return a + b;
    return a + "/" + b;
}

std::vector<std::string> list_dir(const std::string& path) {
    std::vector<std::string> out;
    DIR* d = ::opendir(path.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
        out.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

FileLock::FileLock(const std::string& path) {
    fd_ = UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd_) SVM_THROW_ERRNO("open lock " + path);
    while (::flock(fd_.get(), LOCK_EX) != 0) {
        if (errno != EINTR) SVM_THROW_ERRNO("lock " + path);
    }
}

int connect_unix(const std::string& path) {
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    if (::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return s;
    int saved = errno;
    ::close(s);
    errno = saved;
    return -1;
}

namespace {
constexpr size_t kMaxPassedFds = 8;
}

void send_with_fds(int sock, const std::string& data, const std::vector<int>& fds, const std::string& what) {
    if (data.empty() || fds.size() > kMaxPassedFds) SVM_THROW(what + ": no data, or too many descriptors");
    struct iovec iov = {const_cast<char*>(data.data()), data.size()};
    char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
        msg.msg_control = cbuf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
    }
    while (::sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) {
        if (errno != EINTR) SVM_THROW_ERRNO(what);
    }
}

std::string receive_with_fds(int sock, std::vector<UniqueFd>& fds, size_t max_data, size_t max_fds,
                             const std::string& what, bool dontwait) {
    max_fds = std::min(max_fds, kMaxPassedFds);
    std::string buf(max_data, '\0');
    struct iovec iov = {buf.data(), buf.size()};
    char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * max_fds);
    ssize_t n;
    do {
        n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (dontwait ? MSG_DONTWAIT : 0));
    } while (n < 0 && errno == EINTR);
    if (n < 0) SVM_THROW_ERRNO(what);
    fds.clear();
    for (struct cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
            fds.emplace_back(f);
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        fds.clear();
        SVM_THROW(what + ": malformed message");
    }
    buf.resize(static_cast<size_t>(n));
    return buf;
}

bool write_fully(int fd, const char* data, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        data += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

}  // namespace svm
