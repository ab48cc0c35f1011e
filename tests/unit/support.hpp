// What the unit tests share, in one place: a temporary directory that goes
// away with the test however it ends, a listening socket, and the message of
// a failing call.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "fs.hpp"

namespace svm::test {

// A new directory /tmp/PREFIX-XXXXXX, mode 0755 (other users, such as the
// identity a test switches to, can reach what it holds); removed with all
// it holds when the object goes, a failed REQUIRE included.
class TempDir {
public:
    explicit TempDir(const char* prefix = "svm-test");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// A Unix stream socket listening at path (close-on-exec), for a test's
// stand-in of a daemon; throws if it cannot be made.
UniqueFd listening_socket(const std::string& path);

// A node's hugepage state under a temporary root: pools per NUMA node and
// system-wide, /proc/meminfo's default size, /proc/mounts.
struct HugeTree {
    TempDir tmp{"svm-place"};
    std::string root = tmp.path();
    void pool(int node, int64_t kib, int64_t nr, int64_t free) {
        std::string dir = node >= 0 ? "/sys/devices/system/node/node" + std::to_string(node) + "/hugepages"
                                    : "/sys/kernel/mm/hugepages";
        dir = root + dir + "/hugepages-" + std::to_string(kib) + "kB";
        svm::mkdir_p(dir, 0755);
        svm::write_file_atomic(dir + "/nr_hugepages", std::to_string(nr) + "\n");
        svm::write_file_atomic(dir + "/free_hugepages", std::to_string(free) + "\n");
    }
    void proc(const std::string& name, const std::string& text) {
        svm::mkdir_p(root + "/proc", 0755);
        svm::write_file_atomic(root + "/proc/" + name, text);
    }
};

// The chain (Error::chain) of the svm::Error that fn throws; "" when none.
std::string error_of(const std::function<void()>& fn);
// Its first sentence (Error::reason: what a user is told); "" when none.
std::string reason_of(const std::function<void()>& fn);

}  // namespace svm::test
