// Safe intake of a user's disk image: the site's policy and the verdict.
//
// Root never opens a user's path: open_image_as_user() opens it in a child that
// runs as the user and hands the open fd back over a socketpair (SCM_RIGHTS).
// Every check then works on that fd: our own header inspection
// (image_format.hpp), then `qemu-img info` with the format we detected forced,
// run as the user under CPU, memory and time limits on /dev/fd/N; the two must
// agree. Every refusal is an svm::Error whose reason() is one sentence that
// names the path and says what to change. See image_check.md.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fs.hpp"
#include "image_format.hpp"
#include "proc.hpp"

namespace svm {

struct ImagePolicy {
    uint64_t max_virtual_size = uint64_t(1) << 40;        // 1 TiB
    std::vector<std::string> allowed_dirs;                // canonical paths; empty = any
    int qemu_img_timeout_ms = 30000;                      // also the limit for the user-side open
    unsigned long qemu_img_cpu_s = 10;                    // RLIMIT_CPU of qemu-img
    unsigned long qemu_img_as_bytes = uint64_t(1) << 30;  // RLIMIT_AS of qemu-img (it needs ~200 MiB)
    std::string qemu_img = "qemu-img";                    // program (looked up in a minimal PATH)
    // Root's directory (created 0700) where qemu-img's verdict on a version of
    // an image is kept (the file's version, file_version_key, with the format
    // and the qemu-img program): a later check of the same version reads the header
    // again but does not start qemu-img. Empty: qemu-img runs every time.
    std::string verdict_cache_dir;
};

// What was checked: a later fstat of the same fd must give the same identity.
struct FileIdentity {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t mtime_sec = 0;
    long mtime_nsec = 0;
    uint64_t size = 0;
    bool operator==(const FileIdentity& o) const {
        return dev == o.dev && ino == o.ino && mtime_sec == o.mtime_sec && mtime_nsec == o.mtime_nsec && size == o.size;
    }
    bool operator!=(const FileIdentity& o) const { return !(*this == o); }
};
FileIdentity identity_of(const struct stat& st);
// An image's identity as the fields "image_dev" ... "image_mtime_nsec" of a
// record (the plan, a checkpoint's entry), for JsonIn and JsonOut alike.
template <class V, class I>
void image_identity_fields(V& v, I& id) {
    v("image_dev", id.dev);
    v("image_ino", id.ino);
    v("image_size", id.size);
    v("image_mtime_sec", id.mtime_sec);
    v("image_mtime_nsec", id.mtime_nsec);
}

struct ImageInfo {
    ImageFormat format = ImageFormat::raw;  // qcow2 or raw once accepted
    uint64_t virtual_size = 0;              // bytes the guest sees
    uint64_t file_size = 0;                 // st_size
    uint64_t allocated_size = 0;            // st_blocks * 512
    FileIdentity identity;
    std::string real_path;  // where the checked fd points
};

struct CheckedImage {
    UniqueFd fd;  // read-only, close-on-exec; the only handle to the image root may use
    ImageInfo info;
};

// For a process that already runs as the user (the SPANK plugin at submit
// time): checks the open fd; shown_path is used in messages only.
ImageInfo check_image_fd(int fd, const std::string& shown_path, const ImagePolicy& policy);

// For a process that already runs as the user: validates and opens the path
// (never blocking on a FIFO), then check_image_fd.
CheckedImage open_image_as_self(const std::string& path, const ImagePolicy& policy);

// For root (the prolog): a child dropped to `user` validates and opens the path
// and passes the fd back; qemu-img also runs as `user`. Root never opens the path.
CheckedImage open_image_as_user(const std::string& path, const Credentials& user, const ImagePolicy& policy);
// Opens path as `user` (read-only, a regular file) and returns the
// descriptor: root reads through it what the user may read, nothing else.
// The opener's fstat of it goes to *st when given (root's own could wait on
// a file system that stopped answering).
UniqueFd open_file_as_user(const std::string& path, const Credentials& user, int timeout_ms = 30000,
                           struct stat* st = nullptr);
// Opens path again as `user` (read-only) and returns the descriptor only if
// it is the very file that was checked (same device, inode, size and
// modification time); else one sentence saying the file changed. The keeper
// hands this descriptor to QEMU: the image is never opened by path by root
// or by QEMU.
UniqueFd reopen_checked_as_user(const std::string& path, const Credentials& user, const FileIdentity& checked,
                                int timeout_ms = 30000);

// What root reads of an opened image before it decides anything: the
// descriptor's fstat and, with `bytes`, the first kImageHeadBytes (2 MiB)
// and the last 512 bytes (for inspect_image_bytes). With `as` (root's
// prolog) a forked child running as that user does the reading and is
// killed after timeout_ms, so a file system that stops answering costs root
// at most that (plus a 2 s grace to reap the child; one stuck in the file
// system is left behind, reaped once it ends): then one sentence naming
// `shown`. Without `as`, this process reads (it is the user's own).
struct ImageLook {
    struct stat st {};
    std::vector<uint8_t> head, tail;
};
ImageLook look_at_image(int fd, const std::optional<Credentials>& as, int timeout_ms, const std::string& shown,
                        bool bytes = true);

// What qemu-img said about the image, format forced.
struct QemuImgInfo {
    std::string format;
    uint64_t virtual_size = 0;
    std::string backing_filename;       // "backing-filename"
    std::string full_backing_filename;  // "full-backing-filename"
    std::string data_file;              // "format-specific"."data"."data-file"
    bool encrypted = false;
    std::string json;  // the raw output
};
// Runs `qemu-img info --output=json -f FORMAT /dev/fd/N` with the policy's
// limits, as `as` when given; throws a one-sentence svm::Error naming
// shown_path when qemu-img fails or times out.
QemuImgInfo qemu_img_info(int fd, ImageFormat format, const std::string& shown_path, const ImagePolicy& policy,
                          const std::optional<Credentials>& as = std::nullopt);

// Absolute, no ".." component, no NUL; throws a one-sentence svm::Error.
void check_image_path(const std::string& path);

// A kernel or initrd for direct boot (`what`), checked by a process that runs
// as the user (`user` names them in messages): the image's path rules, then a
// non-empty regular file that user can read. Never blocks on a FIFO.
void check_boot_file(const std::string& path, const std::string& what, const std::string& user);
// True when real_path is one of dirs or lies below one of them.
bool path_inside(const std::string& real_path, const std::vector<std::string>& dirs);

// The image's content digest for accounting, "sha256:<hex>": SHA-256 over
// the first `size` bytes of the file behind fd (the size it had when it was
// checked: what `sha256sum` says of that version). Never reads past `size`
// (a file that grows is not followed); throws when the file ends before it.
// Run it as the job's user only (digest_as_user), never as root.
std::string image_digest(int fd, uint64_t size);

// Who computes the digest and how long it may take.
struct DigestJob {
    Credentials user;                 // the job's user: the reader runs as this, no capability
    std::vector<std::string> helper;  // program and arguments; the fd and the size are appended
    int timeout_ms = 600000;          // wall clock (and as much CPU time)
    // Root's directory (0700) keeping the digest of each version of a file
    // (device, inode, size, modification and change times): a later job with
    // the same version reads the cache, not the image. Empty: no cache.
    std::string cache_dir;
};
// The digest of the checked image behind fd, computed by `helper` started as
// the user (it inherits fd, reads `checked.size` bytes and prints the
// digest) under the job's limits: root reads nothing of the image. The fd
// must still be the version that was checked, before and after; a timeout,
// a failure or a change is one sentence naming shown (an svm::Error).
std::string digest_as_user(int fd, const FileIdentity& checked, const std::string& shown, const DigestJob& job);

// The largest file an image of virtual_size may be: a raw image's file is
// its virtual size; a qcow2 file adds its metadata (L1/L2 and refcount
// tables: under 5% of the virtual size even with 512-byte clusters and
// extended L2 entries, and a few clusters of up to 2 MiB each), so the
// allowance is an eighth of the virtual size plus 64 MiB. Anything larger (a
// sparse tail, internal snapshots, leaked clusters) is refused at intake
// before any byte is read: no reader of the file (qemu-img, the digest, the
// save) then reads more than this.
constexpr uint64_t kImageMetadataAllowance = uint64_t(64) << 20;
uint64_t max_image_file_size(uint64_t virtual_size);

// "512 GiB", "2.5 TiB", "1000 B".
std::string format_size(uint64_t bytes);

}  // namespace svm
