#include "embed_root.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm {

namespace {

// Where an embedded root keeps libvirt's QEMU capabilities cache.
std::string caps_dir(const std::string& root) { return path_join(root, "cache/qemu/capabilities"); }

// The cache's entries in dir: libvirt's XML files (nothing else is copied).
std::vector<std::string> cache_files(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& f : list_dir(dir))
        if (f.size() > 4 && f.compare(f.size() - 4, 4, ".xml") == 0) out.push_back(f);
    return out;
}

// Makes everything below the directory `dir` (an open descriptor) root's,
// never following a symlink: libvirt's probe hands the trees it makes
// (lib/qemu/...) to the QEMU identity it was given, a job's user. At most
// `budget` entries and 8 levels (libvirt makes a few dozen).
void own_tree_by_root(int dir, const std::string& shown, int depth, int& budget) {
    for (const auto& n : list_dir("/proc/self/fd/" + std::to_string(dir))) {
        if (--budget < 0) SVM_THROW(shown + " holds more entries than a capabilities cache does");
        struct stat st;
        if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if ((st.st_uid != 0 || st.st_gid != 0) && ::fchownat(dir, n.c_str(), 0, 0, AT_SYMLINK_NOFOLLOW) != 0)
            SVM_THROW_ERRNO("chown " + path_join(shown, n));
        if (!S_ISDIR(st.st_mode)) continue;
        if (depth >= 8) SVM_THROW(shown + " is deeper than a capabilities cache is");
        UniqueFd sub(::openat(dir, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) SVM_THROW_ERRNO("open " + path_join(shown, n));
        own_tree_by_root(sub.get(), path_join(shown, n), depth + 1, budget);
    }
}

}  // namespace

void own_capabilities_cache(const std::string& cache_root) {
    UniqueFd d(::open(cache_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d) SVM_THROW_ERRNO("open " + cache_root);
    int budget = 10000;
    own_tree_by_root(d.get(), cache_root, 0, budget);
}

void write_embed_qemu_conf(const std::string& root, const EmbedSettings& s) {
    mkdir_p(path_join(root, "etc"), 0755);
    std::string conf;
    conf += "# Written by slurm-vm for one job; see README (Security).\n";
    conf += "user = \"+" + std::to_string(s.qemu_uid) + "\"\n";
    conf += "group = \"+" + std::to_string(s.qemu_gid) + "\"\n";
    conf += "dynamic_ownership = 0\n";
    conf += "remember_owner = 0\n";
    conf += "security_driver = \"none\"\n";
    conf += "cgroup_controllers = [ ]\n";
    // A private /dev for QEMU holding only the devices of its guest.
    conf += "namespaces = [ \"mount\" ]\n";
    conf += "stdio_handler = \"file\"\n";
    conf += "clear_emulator_capabilities = 1\n";
    // QEMU's own seccomp sandbox: no spawning, no privilege changes, no
    // obsolete system calls (-sandbox on,...).
    conf += "seccomp_sandbox = 1\n";
    replace_file(path_join(root, "etc/qemu.conf"), conf, 0644);
}

void seed_capabilities_cache(const std::string& root, const std::string& cache_root, const EmbedSettings& s,
                             const std::string& emulator, const std::string& probe_program) {
    std::string src = caps_dir(cache_root);
    if (list_dir(src).empty()) {
        // Warm it once per node: asking for the domain capabilities makes
        // libvirt probe QEMU and write its cache. A short-lived process does it
        // (the embedded driver holds its root's pid-file lock for as long as
        // the process lives), under a lock so concurrent prologs wait for it.
        mkdir_p(cache_root, 0700);
        FileLock lock(path_join(cache_root, ".lock"));
        if (list_dir(src).empty()) {
            write_embed_qemu_conf(cache_root, s);
            RunOptions o;
            o.timeout_ms = 300000;
            RunResult r = run({probe_program, "--probe-capabilities", cache_root, emulator}, o);
            own_capabilities_cache(cache_root);
            if (r.status != 0 || list_dir(src).empty())
                SVM_THROW("probing QEMU's capabilities in " + cache_root + " failed (is " +
                          "qemu-system-x86_64 installed and runnable?)");
        }
    }
    std::string dst = caps_dir(root);
    mkdir_p(dst, 0755);
    for (const auto& f : cache_files(src)) replace_file(path_join(dst, f), read_file(path_join(src, f)), 0644);
}

std::string capabilities_fingerprint(const std::string& root) {
    std::string dir = caps_dir(root), out;
    for (const auto& f : list_dir(dir)) {
        struct stat st;
        if (::stat(path_join(dir, f).c_str(), &st) != 0) continue;
        out += f + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_ctim.tv_sec) + "." +
               std::to_string(st.st_ctim.tv_nsec) + ";";
    }
    return out;
}

void use_capabilities_cache(const std::string& root, const std::string& cache_root) {
    std::string src = caps_dir(cache_root);
    std::vector<std::string> files = cache_files(src);
    if (files.empty()) return;
    std::string dst = caps_dir(root);
    mkdir_p(dst, 0755);
    for (const auto& f : list_dir(dst)) ::unlink(path_join(dst, f).c_str());
    for (const auto& f : files) replace_file(path_join(dst, f), read_file(path_join(src, f)), 0644);
}

void refresh_capabilities_cache(const std::string& root, const std::string& cache_root) {
    std::string src = caps_dir(root), dst = caps_dir(cache_root);
    mkdir_p(dst, 0700);
    FileLock lock(path_join(cache_root, ".lock"));
    std::vector<std::string> fresh = cache_files(src);
    if (fresh.empty()) return;
    for (const auto& f : fresh) write_file_atomic(path_join(dst, f), read_file(path_join(src, f)), 0600);
    for (const auto& f : list_dir(dst))
        if (std::find(fresh.begin(), fresh.end(), f) == fresh.end()) ::unlink(path_join(dst, f).c_str());
}

std::string qemu_mark(const std::string& name) { return "guest=" + name + ","; }

std::string qemu_pid_file(const std::string& root, const std::string& name) {
    return root + "/run/qemu/" + name + ".pid";
}

}  // namespace svm
