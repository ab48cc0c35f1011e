// What the unit tests share, in one place: a temporary directory that goes
// away with the test however it ends, a listening socket, libvirt's verdict
// on a domain's XML, python3's jsonschema, and the message of a failing call.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fs.hpp"
#include "proc.hpp"

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

// A stand-in for /dev/kvm in `dir`: an empty file "kvm", mode 0600 (like
// /dev/kvm on a node without udev rules); its path.
std::string temp_device_stand_in(const TempDir& dir);

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

// Whether libvirt's schema (virt-xml-validate) accepts a domain's XML; when
// it does not, the XML and what the validator said go with the next
// assertion's report.
bool domain_validates(const std::string& xml);

// Runs script with python3 (the one on PATH, with this process's
// environment) after a preamble that imports json, sys and jsonschema and
// makes v, a Draft 2020-12 validator of the JSON Schema at schema_path (the
// schema itself checked first); args are sys.argv[2:]. nullopt, with a
// warning, where python3-jsonschema is not installed.
std::optional<RunResult> run_schema_script(const std::string& schema_path, const std::string& script,
                                           const std::vector<std::string>& args);

// The chain (Error::chain) of the svm::Error that fn throws; "" when none.
std::string error_of(const std::function<void()>& fn);
// Its first sentence (Error::reason: what a user is told); "" when none.
std::string reason_of(const std::function<void()>& fn);

}  // namespace svm::test
