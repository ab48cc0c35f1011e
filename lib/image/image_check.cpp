#include "image_check.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "sha256.hpp"
#include "user_open.hpp"

namespace svm {

namespace {

constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

std::string user_name(const Credentials& c) { return c.user.empty() ? "uid " + std::to_string(c.uid) : c.user; }

// One sentence for a file that is not a regular file; empty when it is.
std::string not_regular(const std::string& shown, mode_t mode) {
    if (S_ISREG(mode)) return "";
    if (S_ISDIR(mode)) return shown + " is a directory, not a disk image file";
    if (S_ISFIFO(mode)) return shown + " is a FIFO, not a regular file";
    if (S_ISCHR(mode)) return shown + " is a character device, not a regular file";
    if (S_ISBLK(mode)) return shown + " is a block device, not a regular file";
    if (S_ISSOCK(mode)) return shown + " is a socket, not a regular file";
    return shown + " is not a regular file";
}

// One sentence for an errno from stat/open of the path as `who`.
std::string open_failure(const std::string& path, const std::string& who, int err) {
    switch (err) {
    case ENOENT: return path + " does not exist for user " + who + "; check the path";
    case ENOTDIR:
        return path + " does not exist for user " + who +
               " (a component of the path is not a directory); check the path";
    case EACCES:
    case EPERM:
        return path + " is not readable by user " + who + " (" + std::strerror(err) +
               "); make it and its directories readable by that user";
    case ELOOP:
        return path + " cannot be opened by user " + who + " (" + std::strerror(err) +
               "); point to the image file itself";
    default:
        return path + " cannot be opened by user " + who + " (" + std::strerror(err) +
               "); check the path and its file system";
    }
}

// "30 s", "0.5 s".
std::string seconds(int ms) {
    char b[32];
    if (ms % 1000 == 0) std::snprintf(b, sizeof b, "%d s", ms / 1000);
    else std::snprintf(b, sizeof b, "%.1f s", ms / 1000.0);
    return b;
}

std::string join_dirs(const std::vector<std::string>& dirs) {
    std::string s;
    for (const auto& d : dirs) s += (s.empty() ? "" : ", ") + d;
    return s;
}

void check_allowed(const std::string& shown, const std::string& real, const ImagePolicy& policy) {
    if (policy.allowed_dirs.empty() || path_inside(real, policy.allowed_dirs)) return;
    std::string where = real == shown ? shown : shown + " (which is " + printable(real) + ")";
    SVM_THROW(where + " lies outside the allowed image directories (" + join_dirs(policy.allowed_dirs) +
              "); move it into one of them");
}

std::string first_line(const std::string& s) {
    std::string t = trim(s);
    auto nl = t.find('\n');
    if (nl != std::string::npos) t = t.substr(0, nl);
    if (t.rfind("qemu-img: ", 0) == 0) t = t.substr(10);
    return printable(t, 300);
}

// A file larger than `cap` (what `what` allows) is refused before it is read.
void check_file_size(const std::string& shown, uint64_t size, uint64_t cap, const std::string& what) {
    if (size <= cap) return;
    SVM_THROW(shown + " is a file of " + format_size(size) + ", more than " + what + " (at most " + format_size(cap) +
              "); write a compact copy with 'qemu-img convert -O qcow2 IN OUT'");
}

// The key under which qemu-img's verdict on this version, read as this
// format by this qemu-img, is kept ("" without a cache).
std::string verdict_key(const ImagePolicy& policy, const struct stat& st, const ImageHeaderInfo& hdr) {
    if (policy.verdict_cache_dir.empty()) return "";
    return "qemu-img verdict " + file_version_key(st) + " " + format_name(hdr.format) + " " + policy.qemu_img;
}

// What a kept verdict says: the format and virtual size qemu-img agreed to.
std::string verdict_line(const ImageHeaderInfo& hdr) {
    return std::string(format_name(hdr.format)) + " " + std::to_string(hdr.virtual_size);
}

// qemu-img's reading of the image must agree with ours: no backing or data
// file, no encryption, the same format and virtual size.
void check_with_qemu_img(int fd, const ImageHeaderInfo& hdr, const std::string& shown, const ImagePolicy& policy,
                         const std::optional<Credentials>& as) {
    QemuImgInfo q = qemu_img_info(fd, hdr.format, shown, policy, as);
    if (!q.backing_filename.empty() || !q.full_backing_filename.empty())
        SVM_THROW(shown + " has a backing file (" +
                  printable(q.backing_filename.empty() ? q.full_backing_filename : q.backing_filename) +
                  ") according to qemu-img; flatten it with 'qemu-img convert -O qcow2 IN OUT'");
    if (!q.data_file.empty())
        SVM_THROW(shown + " has an external data file (" + printable(q.data_file) +
                  ") according to qemu-img; rewrite it as a single file with 'qemu-img convert -O qcow2 IN OUT'");
    if (q.encrypted)
        SVM_THROW(shown +
                  " uses qcow2 encryption, which is not supported; write a decrypted copy with 'qemu-img convert'");
    if (q.format != format_name(hdr.format) || q.virtual_size != hdr.virtual_size)
        SVM_THROW(shown + " reads as " + printable(q.format) + " of " + std::to_string(q.virtual_size) +
                  " bytes to qemu-img but as " + format_name(hdr.format) + " of " + std::to_string(hdr.virtual_size) +
                  " bytes to its header; rewrite it with 'qemu-img convert -O qcow2 IN OUT'");
}

// Reads up to len bytes at off into out (short at the end of the file).
void read_at(int fd, std::vector<uint8_t>& out, size_t len, uint64_t off) {
    out.resize(len);
    size_t got = 0;
    while (got < len) {
        ssize_t n = ::pread(fd, out.data() + got, len - got, static_cast<off_t>(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) SVM_THROW_ERRNO("read image header");
        if (n == 0) break;
        got += static_cast<size_t>(n);
    }
    out.resize(got);
}

// What look_at_image reads, done where it runs.
ImageLook look_here(int fd, bool bytes) {
    ImageLook l;
    if (::fstat(fd, &l.st) != 0) SVM_THROW_ERRNO("fstat image");
    if (!bytes || !S_ISREG(l.st.st_mode)) return l;
    const uint64_t size = static_cast<uint64_t>(l.st.st_size);
    read_at(fd, l.head, static_cast<size_t>(std::min<uint64_t>(size, kImageHeadBytes)), 0);
    if (size >= 512) read_at(fd, l.tail, 512, size - 512);
    return l;
}

void write_all(int fd, const std::string& s) {
    for (size_t off = 0; off < s.size();) {
        ssize_t n = ::write(fd, s.data() + off, s.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) SVM_THROW_ERRNO("write the image's header");
        off += static_cast<size_t>(n);
    }
}

void put_part(std::string& out, const void* p, size_t n) {
    uint64_t len = n;
    out.append(reinterpret_cast<const char*>(&len), sizeof len);
    out.append(static_cast<const char*>(p), n);
}

// The next part of what the reader sent, at most `max` bytes.
std::string take_part(const std::string& in, size_t& at, size_t max) {
    uint64_t len = 0;
    if (in.size() - at < sizeof len) SVM_THROW("the image reader's answer is malformed");
    std::memcpy(&len, in.data() + at, sizeof len);
    at += sizeof len;
    if (len > max || in.size() - at < len) SVM_THROW("the image reader's answer is malformed");
    at += len;
    return in.substr(at - len, len);
}

ImageInfo check_impl(int fd, const std::string& shown, const ImagePolicy& policy, const std::optional<Credentials>& as,
                     std::string real) {
    // Read by the user under the deadline of qemu-img's run (look_at_image).
    ImageLook look = look_at_image(fd, as, policy.qemu_img_timeout_ms, shown);
    const struct stat st = look.st;
    std::string bad = not_regular(shown, st.st_mode);
    if (!bad.empty()) SVM_THROW(bad);
    if (real.empty()) real = fd_real_path(fd);
    check_allowed(shown, real, policy);
    // Before anything is read: no file larger than the largest image the
    // site takes (a sparse tail costs the user nothing and a reader hours).
    check_file_size(shown, static_cast<uint64_t>(st.st_size), max_image_file_size(policy.max_virtual_size),
                    "this site's limit for images");

    ImageHeaderInfo hdr = inspect_image_bytes(look.head.data(), look.head.size(), look.tail.data(), look.tail.size(),
                                              static_cast<uint64_t>(st.st_size));
    if (!hdr.ok()) SVM_THROW(shown + " " + hdr.problems.front().text);
    if (hdr.format != ImageFormat::qcow2 && hdr.format != ImageFormat::raw)  // inspect_image reports these
        SVM_THROW(shown + " is a " + format_name(hdr.format) + " image; convert it to qcow2 or raw");
    // A raw disk image is a whole number of sectors: this refuses the text
    // files, scripts and other non-images that no format check would claim.
    if (hdr.format == ImageFormat::raw && hdr.file_size % 512 != 0)
        SVM_THROW(shown + " is not a disk image (a raw image is a whole number of 512-byte sectors, this file has " +
                  std::to_string(hdr.file_size) + " bytes); give a qcow2 or raw disk image");
    if (hdr.virtual_size > policy.max_virtual_size)
        SVM_THROW(shown + " has a virtual size of " + format_size(hdr.virtual_size) +
                  ", which exceeds this site's limit of " + format_size(policy.max_virtual_size) +
                  "; use a smaller image");
    if (hdr.format == ImageFormat::qcow2)
        check_file_size(shown, hdr.file_size, max_image_file_size(hdr.virtual_size),
                        "what its virtual size of " + format_size(hdr.virtual_size) + " needs");

    std::string verdict = verdict_key(policy, st, hdr);
    bool known = !verdict.empty() && kept_value(policy.verdict_cache_dir, verdict) == verdict_line(hdr);
    if (!known) check_with_qemu_img(fd, hdr, shown, policy, as);
    struct stat after = look_at_image(fd, as, policy.qemu_img_timeout_ms, shown, false).st;
    if (identity_of(after) != identity_of(st))
        SVM_THROW(shown + " changed while it was being checked; submit again once nothing writes to it");
    if (!known && !verdict.empty()) keep_value(policy.verdict_cache_dir, verdict, verdict_line(hdr));

    ImageInfo info;
    info.format = hdr.format;
    info.virtual_size = hdr.virtual_size;
    info.file_size = static_cast<uint64_t>(st.st_size);
    info.allocated_size = static_cast<uint64_t>(st.st_blocks) * 512;
    info.identity = identity_of(st);
    info.real_path = real;
    return info;
}

}  // namespace

ImageLook look_at_image(int fd, const std::optional<Credentials>& as, int timeout_ms, const std::string& shown,
                        bool bytes) {
    if (!as) return look_here(fd, bytes);
    RunResult r = run_function_as(
        *as,
        [&](int out) {
            ImageLook l = look_here(fd, bytes);
            std::string msg;
            put_part(msg, &l.st, sizeof l.st);
            put_part(msg, l.head.data(), l.head.size());
            put_part(msg, l.tail.data(), l.tail.size());
            write_all(out, msg);
            return 0;
        },
        timeout_ms);
    if (r.timed_out)
        SVM_THROW(shown + " could not be read by user " + user_name(*as) + " within " + seconds(timeout_ms) +
                  "; check that its file system responds");
    if (r.status != 0)
        SVM_THROW(shown + " could not be read by user " + user_name(*as) + " (" +
                  first_line(r.err.empty() ? "exit status " + std::to_string(r.status) : r.err) + ")");
    ImageLook l;
    size_t at = 0;
    std::string st = take_part(r.out, at, sizeof l.st);
    if (st.size() != sizeof l.st) SVM_THROW("the image reader's answer is malformed");
    std::memcpy(&l.st, st.data(), sizeof l.st);
    std::string head = take_part(r.out, at, kImageHeadBytes), tail = take_part(r.out, at, 512);
    l.head.assign(head.begin(), head.end());
    l.tail.assign(tail.begin(), tail.end());
    return l;
}

FileIdentity identity_of(const struct stat& st) {
    FileIdentity id;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    id.mtime_sec = st.st_mtim.tv_sec;
    id.mtime_nsec = st.st_mtim.tv_nsec;
    id.size = static_cast<uint64_t>(st.st_size);
    return id;
}

void check_image_path(const std::string& path) {
    if (path.empty()) SVM_THROW("the image path is empty; give the image's absolute path");
    if (path.find('\0') != std::string::npos)
        SVM_THROW(printable(path) + " contains a NUL byte; give the image's absolute path");
    if (path[0] != '/') SVM_THROW(path + " is not an absolute path; give the image's absolute path");
    // The per-job overlay names its backing file in a qcow2 header field of
    // at most 1023 bytes.
    if (path.size() > 1023)
        SVM_THROW("the image path (" + std::to_string(path.size()) + " bytes, starting " + path.substr(0, 40) +
                  "...) is longer than 1023 bytes; give a shorter path (without /./ or repeated slashes)");
    size_t pos = 0;
    while (pos <= path.size()) {
        size_t next = path.find('/', pos);
        if (next == std::string::npos) next = path.size();
        if (path.compare(pos, next - pos, "..") == 0)
            SVM_THROW(path + " contains a '..' component; give the image's path without '..'");
        pos = next + 1;
    }
}

bool path_inside(const std::string& real_path, const std::vector<std::string>& dirs) {
    for (std::string d : dirs) {
        while (d.size() > 1 && d.back() == '/') d.pop_back();
        if (d.empty()) continue;
        if (d == "/") return real_path.rfind('/', 0) == 0;
        if (real_path == d) return true;
        if (real_path.size() > d.size() && real_path.compare(0, d.size(), d) == 0 && real_path[d.size()] == '/')
            return true;
    }
    return false;
}

QemuImgInfo qemu_img_info(int fd, ImageFormat format, const std::string& shown, const ImagePolicy& policy,
                          const std::optional<Credentials>& as) {
    UniqueFd dup;
    if (fd <= 2) {  // keep_fds needs a descriptor above stdio
        dup = UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
        if (!dup) SVM_THROW_ERRNO("dup image fd");
        fd = dup.get();
    }
    RunOptions o;
    o.as = as;
    o.timeout_ms = policy.qemu_img_timeout_ms;
    o.limit_cpu_s = policy.qemu_img_cpu_s;
    o.limit_as_bytes = policy.qemu_img_as_bytes;
    o.keep_fds = {fd};
    const std::string fmt = format_name(format);
    RunResult r = run({policy.qemu_img, "info", "--output=json", "-f", fmt, "/dev/fd/" + std::to_string(fd)}, o);
    if (r.timed_out)
        SVM_THROW(shown + " took longer than " + seconds(policy.qemu_img_timeout_ms) +
                  " to inspect with qemu-img; check that its file system responds and that the image is intact");
    if (r.status == 128 + SIGXCPU || r.status == 128 + SIGKILL)
        SVM_THROW(shown + " made qemu-img exceed its CPU time limit of " + std::to_string(policy.qemu_img_cpu_s) +
                  " s; rewrite it with 'qemu-img convert -O qcow2 IN OUT'");
    if (r.status != 0) {
        std::string why = first_line(r.err.empty() ? r.out : r.err);
        if (why.empty()) why = "exit status " + std::to_string(r.status);
        if (why.find("lock") != std::string::npos)
            SVM_THROW(shown + " is in use by a program that writes to it (" + why +
                      "); stop that program or use a copy");
        SVM_THROW(shown + " cannot be read as " + fmt + " by qemu-img (" + why + "); check it with 'qemu-img check'");
    }
    QemuImgInfo q;
    q.json = r.out;
    try {
        Json j = json_parse(r.out, "qemu-img info");
        q.format = json_get_string(j.get(), "format").value_or("");
        q.virtual_size = static_cast<uint64_t>(json_get_int(j.get(), "virtual-size").value_or(-1));
        q.backing_filename = json_get_string(j.get(), "backing-filename").value_or("");
        q.full_backing_filename = json_get_string(j.get(), "full-backing-filename").value_or("");
        q.encrypted = json_get_bool(j.get(), "encrypted").value_or(false);
        json_t* spec = json_object_get(j.get(), "format-specific");
        json_t* data = spec ? json_object_get(spec, "data") : nullptr;
        if (data && json_is_object(data)) {
            q.data_file = json_get_string(data, "data-file").value_or("");
            if (json_object_get(data, "encrypt")) q.encrypted = true;
        }
    } catch (Error& e) {
        SVM_CONTEXT(e, "qemu-img info of " + shown);
        throw;
    }
    return q;
}

ImageInfo check_image_fd(int fd, const std::string& shown_path, const ImagePolicy& policy) {
    return check_impl(fd, shown_path, policy, std::nullopt, "");
}

CheckedImage open_image_as_self(const std::string& path, const ImagePolicy& policy) {
    check_image_path(path);
    std::string who = std::to_string(::geteuid());
    try {
        who = credentials_for(::geteuid()).user;
    } catch (const Error&) {
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) SVM_THROW(open_failure(path, who, errno));
    std::string bad = not_regular(path, st.st_mode);
    if (!bad.empty()) SVM_THROW(bad);
    CheckedImage out;
    out.fd = UniqueFd(::open(path.c_str(), kOpenFlags));
    if (!out.fd) SVM_THROW(open_failure(path, who, errno));
    out.info = check_impl(out.fd.get(), path, policy, std::nullopt, "");
    return out;
}

// Opens path as `user` (open_as_user) and says where it really points.
static UniqueFd receive_as_user(const std::string& path, const Credentials& user, int timeout_ms, std::string& real,
                                struct stat* st = nullptr) {
    check_image_path(path);
    const std::string who = user_name(user);
    std::vector<UserOpen> f(1);
    f[0].path = path;
    if (!open_as_user(user, f, timeout_ms))
        SVM_THROW(path + " could not be opened by user " + who + " within " + seconds(timeout_ms) +
                  "; check that its file system responds");
    switch (f[0].failed) {
    case UserOpen::Failed::none: break;
    case UserOpen::Failed::stat:
    case UserOpen::Failed::open: SVM_THROW(open_failure(path, who, f[0].err));
    case UserOpen::Failed::not_regular: SVM_THROW(not_regular(path, f[0].st.st_mode));
    case UserOpen::Failed::replaced:
        SVM_THROW(path + " was replaced while it was being opened; try again once nothing renames it");
    }
    real = fd_real_path(f[0].fd.get());
    if (st) *st = f[0].st;
    return std::move(f[0].fd);
}

CheckedImage open_image_as_user(const std::string& path, const Credentials& user, const ImagePolicy& policy) {
    CheckedImage out;
    std::string real;
    out.fd = receive_as_user(path, user, policy.qemu_img_timeout_ms, real);
    out.info = check_impl(out.fd.get(), path, policy, user, real);
    return out;
}

UniqueFd open_file_as_user(const std::string& path, const Credentials& user, int timeout_ms, struct stat* st) {
    std::string real;
    return receive_as_user(path, user, timeout_ms, real, st);
}

UniqueFd reopen_checked_as_user(const std::string& path, const Credentials& user, const FileIdentity& checked,
                                int timeout_ms) {
    struct stat st;  // the opener's: root's fstat could wait on the file system
    UniqueFd fd = open_file_as_user(path, user, timeout_ms, &st);
    if (identity_of(st) != checked)
        SVM_THROW(path +
                  " changed since the job started (it is not the file that was checked); leave the image "
                  "unchanged while the job runs, or give the job a copy");
    return fd;
}

std::string image_digest(int fd, uint64_t size) {
    Sha256 h;
    std::vector<uint8_t> buf(4 << 20);
    uint64_t off = 0;
    while (off < size) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
        ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(off));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) SVM_THROW_ERRNO("read image for digest");
        if (n == 0)
            SVM_THROW("the image ended at " + std::to_string(off) + " bytes, before the " + std::to_string(size) +
                      " it had when it was checked");
        h.update(buf.data(), static_cast<size_t>(n));
        off += static_cast<uint64_t>(n);
    }
    return "sha256:" + h.hex_digest();
}

namespace {

bool is_digest(const std::string& d) {
    return d.size() == 7 + 64 && d.rfind("sha256:", 0) == 0 &&
           d.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
}

}  // namespace

std::string digest_as_user(int fd, const FileIdentity& checked, const std::string& shown, const DigestJob& job) {
    struct stat st;
    if (::fstat(fd, &st) != 0) SVM_THROW_ERRNO("fstat " + shown);
    if (identity_of(st) != checked)
        SVM_THROW(shown + " changed since it was checked; leave the image unchanged while the job runs");
    const std::string key = file_version_key(st);
    if (!job.cache_dir.empty()) {
        std::string kept = kept_value(job.cache_dir, key);
        if (is_digest(kept)) return kept;
    }
    RunOptions o;
    o.as = job.user;
    o.timeout_ms = job.timeout_ms;
    o.limit_cpu_s = static_cast<unsigned long>(job.timeout_ms / 1000 + 1);
    o.limit_as_bytes = uint64_t(1) << 30;
    o.keep_fds = {fd};
    std::vector<std::string> argv = job.helper;
    argv.push_back(std::to_string(fd));
    argv.push_back(std::to_string(checked.size));
    RunResult r = run(argv, o);
    if (r.timed_out || r.status == 128 + SIGXCPU || r.status == 128 + SIGKILL)
        SVM_THROW(shown + " could not be read for its digest within " + seconds(job.timeout_ms) +
                  "; check that its file system responds");
    std::string d = trim(r.out);
    if (r.status != 0 || !is_digest(d))
        SVM_THROW(shown + " could not be read for its digest (" +
                  first_line(r.err.empty() ? "exit status " + std::to_string(r.status) : r.err) + ")");
    struct stat after;
    if (::fstat(fd, &after) != 0 || file_version_key(after) != key)
        SVM_THROW(shown + " changed while it was read for its digest; leave the image unchanged while the job runs");
    if (!job.cache_dir.empty()) keep_value(job.cache_dir, key, d);
    return d;
}

uint64_t max_image_file_size(uint64_t virtual_size) {
    const uint64_t allowance = virtual_size / 8 + kImageMetadataAllowance;
    return virtual_size > UINT64_MAX - allowance ? UINT64_MAX : virtual_size + allowance;
}

std::string format_size(uint64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (u < 6 && bytes >= (uint64_t(1) << (10 * (u + 1)))) ++u;
    const uint64_t unit = uint64_t(1) << (10 * u);
    char b[64];
    if (bytes % unit == 0)
        std::snprintf(b, sizeof b, "%llu %s", static_cast<unsigned long long>(bytes / unit), units[u]);
    else std::snprintf(b, sizeof b, "%.1f %s", static_cast<double>(bytes) / static_cast<double>(unit), units[u]);
    return b;
}

void check_boot_file(const std::string& path, const std::string& what, const std::string& user) {
    check_image_path(path);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) SVM_THROW(path + " (" + what + ") is not readable by user " + user + " (" + std::strerror(errno) + ")");
    struct stat st;
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) SVM_THROW(path + " (" + what + ") is not a regular file");
    if (st.st_size == 0) SVM_THROW(path + " (" + what + ") is empty");
}

}  // namespace svm
