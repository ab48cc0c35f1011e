#include "virtiofs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm {

namespace {

// virtiofsd keeps a descriptor per inode the guest looks up: a home
// directory's tree needs far more than the usual 1024.
constexpr rlim_t kOpenFiles = 1 << 20;

// QEMU's own virtiofsd (Debian 12: qemu-system-common), then the Rust one
// (Debian 13 and RHEL 9: the package virtiofsd).
const char* const kKnownPaths[] = {
    "/usr/lib/qemu/virtiofsd",
    "/usr/libexec/virtiofsd",
};

UniqueFd listen_socket(const std::string& path, gid_t job_gid) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) SVM_THROW("socket path too long: " + path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) SVM_THROW_ERRNO("socket");
    ::unlink(path.c_str());
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) SVM_THROW_ERRNO("bind " + path);
    // QEMU (the user, with the job's group) connects; no one else can.
    if (::chown(path.c_str(), 0, job_gid) != 0 || ::chmod(path.c_str(), 0660) != 0) SVM_THROW_ERRNO("chown " + path);
    if (::listen(fd.get(), 1) != 0) SVM_THROW_ERRNO("listen " + path);
    return fd;
}

// A user or group id as virtiofsd's user namespace names it: the same id for
// QEMU's virtiofsd, 0 for the Rust one (which must be the namespace's root);
// the map makes either the user's id outside.
unsigned namespace_id(const VirtiofsdSpec& s, unsigned id) { return s.kind == VirtiofsdKind::rust ? 0 : id; }

void write_map(pid_t pid, const char* which, unsigned inside, unsigned outside) {
    std::string line = std::to_string(inside) + " " + std::to_string(outside) + " 1\n";
    std::string path = "/proc/" + std::to_string(pid) + "/" + which;
    UniqueFd f(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!f || ::write(f.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        SVM_THROW_ERRNO("write " + path);
}

}  // namespace

std::string virtiofsd_mark(uint32_t job_id, size_t index) {
    return "slurm-vm-virtiofsd:job=" + std::to_string(job_id) + ":share=" + std::to_string(index) + ":";
}

std::vector<std::string> virtiofsd_argv(const VirtiofsdSpec& s, int socket_fd) {
    if (s.source.empty() || s.source[0] != '/' || s.source.find(',') != std::string::npos)
        SVM_THROW("cannot share \"" + s.source + "\" over virtio-fs (an absolute path without ',')");
    if (s.kind == VirtiofsdKind::rust) {
        std::string u = std::to_string(s.uid), g = std::to_string(s.gid);
        return {s.mark, "--fd=" + std::to_string(socket_fd), "--shared-dir=" + s.source,
                // Its own mount, pid and network namespaces, pivoted into the share.
                "--sandbox=namespace",
                // As with QEMU's (cache=none) and the 9p mount.
                "--cache=never",
                // The guest's root is refused (it would otherwise pass as
                // the namespace's 0, the user), as QEMU's virtiofsd refuses
                // it; the guest user's uid and gid are the namespace's 0 (the
                // user outside), both ways; every other id maps to nothing
                // here: files of other owners show as the overflow id, and
                // creating one as another owner fails.
                "--translate-uid=forbid-guest:0:1", "--translate-gid=forbid-guest:0:1",
                "--translate-uid=map:" + u + ":0:1", "--translate-gid=map:" + g + ":0:1",
                // The limit set before exec (0: leave it).
                "--rlimit-nofile=0", "--log-level=warn"};
    }
    return {s.mark, "--fd=" + std::to_string(socket_fd), "-o", "source=" + s.source,
            // Sandboxed in its own mount, pid and network namespaces,
            // pivoted into the shared directory.
            "-o", "sandbox=namespace",
            // No caching in the guest: what the host (or another node)
            // changes is seen at once, as with the 9p mount (cache=none).
            // Measured under TCG: faster than cache=auto as well.
            "-o", "cache=none", "--rlimit-nofile=0"};
}

VirtiofsdKind virtiofsd_kind_of_version(const std::string& out) {
    std::string first = out.substr(0, out.find('\n'));
    const std::string rust = "virtiofsd ";
    if (first.compare(0, rust.size(), rust) == 0 && first.size() > rust.size() &&
        std::isdigit(static_cast<unsigned char>(first[rust.size()])))
        return VirtiofsdKind::rust;
    if (first.rfind("virtiofsd version ", 0) == 0) return VirtiofsdKind::qemu;
    SVM_THROW("cannot tell which virtiofsd this is from its --version (\"" + first +
              "\"): QEMU's (\"virtiofsd version 7...\") and the Rust one (\"virtiofsd 1...\") are known");
}

VirtiofsdKind virtiofsd_kind(const std::string& binary, const std::string& cache_dir) {
    struct stat st;
    std::string key;
    if (!cache_dir.empty() && ::stat(binary.c_str(), &st) == 0)
        key = "virtiofsd " + binary + " " + file_version_key(st);
    std::string kept = key.empty() ? "" : kept_value(cache_dir, key);
    if (kept == "rust") return VirtiofsdKind::rust;
    if (kept == "qemu") return VirtiofsdKind::qemu;
    RunOptions o;
    o.timeout_ms = 10000;
    RunResult r = run({binary, "--version"}, o);
    if (!r.ok()) SVM_THROW(binary + " --version failed: " + r.err);
    VirtiofsdKind kind = virtiofsd_kind_of_version(r.out.empty() ? r.err : r.out);
    if (!key.empty()) keep_value(cache_dir, key, kind == VirtiofsdKind::rust ? "rust" : "qemu");
    return kind;
}

std::string find_virtiofsd(const std::string& configured) {
    if (!configured.empty()) {
        if (::access(configured.c_str(), X_OK) != 0)
            SVM_THROW("\"virtiofsd\" " + configured + " is not an executable: " + std::strerror(errno));
        return configured;
    }
    for (const char* p : kKnownPaths)
        if (::access(p, X_OK) == 0) return p;
    SVM_THROW(
        "no virtiofsd on this node (looked for QEMU's own, /usr/lib/qemu/virtiofsd, and the Rust one, "
        "/usr/libexec/virtiofsd): install one (Debian 12: qemu-system-common; Debian 13 and RHEL 9: the "
        "package virtiofsd), name it with \"virtiofsd\", or set \"shares_via\": \"9p\"");
}

namespace {

// As the user, in a user namespace of its own that root owns (mapped by
// start_virtiofsd), with the namespace's capabilities; the socket kept.
SpawnOptions virtiofsd_spawn_options(const VirtiofsdSpec& s, int socket_fd, int log_fd, int ready_w, int mapped_r) {
    SpawnOptions o;
    o.program = s.binary;
    o.env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    o.stdin_fd = SpawnOptions::kNull;
    o.stdout_fd = log_fd;
    o.stderr_fd = log_fd;
    o.default_all_signals = true;
    o.clear_signal_mask = true;
    o.close_other_fds = true;  // everything else the keeper holds
    o.keep_fds = {socket_fd};
    o.limit_nofile = kOpenFiles;
    o.as = Credentials{s.uid, s.gid, s.groups, ""};
    o.user_namespace = SpawnOptions::UserNamespace{namespace_id(s, s.uid), ready_w, mapped_r};
    o.exec_error = "slurm-vm: virtiofsd not started: ";
    return o;
}

}  // namespace

pid_t start_virtiofsd(const VirtiofsdSpec& s, const std::string& socket_path, int log_fd) {
    if (s.uid == 0) SVM_THROW("virtiofsd serves a user's files and never runs as root");
    UniqueFd listen_fd = listen_socket(socket_path, s.job_gid);
    int ready[2], mapped[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
    UniqueFd ready_r(ready[0]), ready_w(ready[1]);
    if (::pipe2(mapped, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
    UniqueFd mapped_r(mapped[0]), mapped_w(mapped[1]);
    pid_t pid = spawn(virtiofsd_argv(s, listen_fd.get()),
                      virtiofsd_spawn_options(s, listen_fd.get(), log_fd, ready_w.get(), mapped_r.get()));
    ready_w = UniqueFd();
    mapped_r = UniqueFd();
    auto reap = [&] {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    };
    char c;
    if (::read(ready_r.get(), &c, 1) != 1) {
        reap();
        SVM_THROW("virtiofsd for " + s.source + " failed before it started (see its log)");
    }
    try {
        write_map(pid, "uid_map", namespace_id(s, s.uid), s.uid);
        write_map(pid, "gid_map", namespace_id(s, s.gid), s.gid);
    } catch (...) {
        reap();
        throw;
    }
    if (::write(mapped_w.get(), &c, 1) != 1) {
        reap();
        SVM_THROW_ERRNO("virtiofsd for " + s.source + ": write");
    }
    return pid;
}

}  // namespace svm
