// File helpers: atomic, durable writes and plain reads. Paths are never
// resolved against a user's rights here: callers that touch user paths use
// run_as (proc.hpp) instead.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace svm {

// Reads a whole file; throws svm::Error naming the file.
std::string read_file(const std::string& path);
// Returns false when the file does not exist; throws on other errors.
bool read_file_if_exists(const std::string& path, std::string& out);
// What a growing file holds past `offset` (at most max_bytes of it), and its
// size now in *size; "" when it does not exist.
std::string read_file_from(const std::string& path, int64_t offset, size_t max_bytes, int64_t* size);
// Writes to path.tmp, fsyncs, renames over path, fsyncs the directory.
void write_file_atomic(const std::string& path, const std::string& content, mode_t mode = 0644);
// The same without the fsyncs: readers see the old or the new content, never
// a part, but a crash of the node may lose it. For a job's own files, which
// are of no use once the node has crashed (and sit on tmpfs where the node
// keeps state_dir under /run, where a sync costs nothing anyway).
void replace_file(const std::string& path, const std::string& content, mode_t mode = 0644);
// Where an open descriptor of this process really points (its
// /proc/self/fd link): no path is followed.
std::string fd_real_path(int fd);
// Creates path, which must not exist (nor be a symlink), with this content
// and mode, and does not sync it: a scratch file that dies with its job.
void write_new_file(const std::string& path, const std::string& content, mode_t mode);
// The key of one version of a file: device, inode, size, modification and
// change times (a file rewritten in place, even with its mtime put back, has
// a new change time). For caches of what a file's content says.
std::string file_version_key(const struct stat& st);
// A small cache of root's (one file per key, named by the key's hash, in dir,
// created 0700) for what a version of a file says. A miss, or an entry that
// cannot be read, reads as ""; an entry that cannot be written is dropped:
// a cache costs time, not correctness.
std::string kept_value(const std::string& dir, const std::string& key);
void keep_value(const std::string& dir, const std::string& key, const std::string& value);
// Writes all n bytes to fd (retrying short writes and EINTR); false when fd
// takes no more.
bool write_fully(int fd, const char* data, size_t n);
inline bool write_fully(int fd, const std::string& data) { return write_fully(fd, data.data(), data.size()); }

// Plain write of an existing file (sysfs attributes and the like).
void write_sysfs(const std::string& path, const std::string& value);
// mkdir -p: the missing parents are made 0755, the directory itself `mode`.
void mkdir_p(const std::string& path, mode_t mode = 0755);
// Removes a file or a whole tree; missing is not an error.
void remove_tree(const std::string& path);
bool path_exists(const std::string& path);
std::string path_join(const std::string& a, const std::string& b);
std::vector<std::string> list_dir(const std::string& path);  // names, sorted; empty if missing
std::string trim(const std::string& s);

// An fd closed on scope exit.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
    UniqueFd& operator=(UniqueFd&& o) noexcept;
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd();
    int get() const { return fd_; }
    int release() {
        int f = fd_;
        fd_ = -1;
        return f;
    }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// A stream connection to the Unix socket at `path` (close-on-exec), or -1
// with errno set (a path too long for a socket address: ENAMETOOLONG).
int connect_unix(const std::string& path);

// Sends `data` (not empty) with descriptors `fds` (SCM_RIGHTS) over the Unix
// stream socket `sock`, in one message; throws naming `what`.
void send_with_fds(int sock, const std::string& data, const std::vector<int>& fds, const std::string& what);
// Receives one such message (at most max_data bytes and max_fds
// descriptors, close-on-exec) into `fds`; returns its data ("" when the peer
// closed). A truncated message throws, naming `what`. With `dontwait`, a
// message not there yet throws (EAGAIN) instead of waiting.
std::string receive_with_fds(int sock, std::vector<UniqueFd>& fds, size_t max_data, size_t max_fds,
                             const std::string& what, bool dontwait = false);

// flock(2)-based lock on a file, held for the object's life.
class FileLock {
public:
    explicit FileLock(const std::string& path);
    ~FileLock() = default;

private:
    UniqueFd fd_;
};

}  // namespace svm
