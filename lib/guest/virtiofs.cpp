#include "virtiofs.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

constexpr int kSocketFd = 3;
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

// In the child, between fork and exec: system calls only.
[[noreturn]] void child_fail(const char* what) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, "slurm-vm: virtiofsd not started: %s: %s\n", what, strerror(errno));
    if (n > 0) (void)!::write(2, buf, static_cast<size_t>(n));
    _exit(127);
}

struct ChildArgs {
    const VirtiofsdSpec* spec;
    const gid_t* groups;
    size_t ngroups;
    char* const* argv;
    char* const* envp;
    int listen_fd, log_fd, ready_w, mapped_r;
};

[[noreturn]] void exec_child(const ChildArgs& a) {
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(a.log_fd, 1) < 0 || ::dup2(a.log_fd, 2) < 0 ||
        ::dup2(a.listen_fd, kSocketFd) < 0)
        _exit(127);
    // Everything else the keeper holds closes at exec.
    if (::syscall(SYS_close_range, kSocketFd + 1, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */) != 0) child_fail("close_range");
    rlimit nofile{kOpenFiles, kOpenFiles};
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) {  // root without CAP_SYS_RESOURCE: as many as it may
        if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0) child_fail("getrlimit");
        nofile.rlim_cur = nofile.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) child_fail("setrlimit");
    }
    const VirtiofsdSpec& s = *a.spec;
    if (::setgroups(a.ngroups, a.groups) != 0) child_fail("setgroups");
    if (::setresgid(s.gid, s.gid, s.gid) != 0) child_fail("setresgid");
    if (::prctl(PR_SET_KEEPCAPS, 1) != 0) child_fail("keepcaps");
    // Still root here: root owns the new user namespace (so the user cannot
    // ptrace what runs in it).
    if (::unshare(CLONE_NEWUSER) != 0) child_fail("unshare(CLONE_NEWUSER)");
    char c = 'u';
    if (::write(a.ready_w, &c, 1) != 1) child_fail("write");
    if (::read(a.mapped_r, &c, 1) != 1) _exit(127);  // the keeper gave up
    uid_t inside = namespace_id(s, s.uid);
    if (::setresuid(inside, inside, inside) != 0) child_fail("setresuid");
    // Every capability of the namespace (only over what the user owns),
    // carried over exec as ambient ones; virtiofsd drops what it does not need.
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (::syscall(SYS_capget, &h, d) != 0) child_fail("capget");
    for (auto& x : d) x.effective = x.inheritable = x.permitted;
    if (::syscall(SYS_capset, &h, d) != 0) child_fail("capset");
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0);
    ::execve(s.binary.c_str(), a.argv, a.envp);
    child_fail(s.binary.c_str());
}

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

std::vector<std::string> virtiofsd_argv(const VirtiofsdSpec& s) {
    if (s.source.empty() || s.source[0] != '/' || s.source.find(',') != std::string::npos)
        SVM_THROW("cannot share \"" + s.source + "\" over virtio-fs (an absolute path without ',')");
    if (s.kind == VirtiofsdKind::rust) {
        std::string u = std::to_string(s.uid), g = std::to_string(s.gid);
        return {s.mark, "--fd=" + std::to_string(kSocketFd), "--shared-dir=" + s.source,
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
    return {s.mark, "--fd=" + std::to_string(kSocketFd), "-o", "source=" + s.source,
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

VirtiofsdKind virtiofsd_kind(const std::string& binary) {
    RunOptions o;
    o.timeout_ms = 10000;
    RunResult r = run({binary, "--version"}, o);
    if (!r.ok()) SVM_THROW(binary + " --version failed: " + r.err);
    return virtiofsd_kind_of_version(r.out.empty() ? r.err : r.out);
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

pid_t start_virtiofsd(const VirtiofsdSpec& s, const std::string& socket_path, int log_fd) {
    if (s.uid == 0) SVM_THROW("virtiofsd serves a user's files and never runs as root");
    std::vector<std::string> args = virtiofsd_argv(s);
    std::vector<char*> argv;
    for (auto& x : args) argv.push_back(x.data());
    argv.push_back(nullptr);
    std::string path_env = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char* envp[] = {path_env.data(), nullptr};
    std::vector<gid_t> groups = s.groups.empty() ? std::vector<gid_t>{s.gid} : s.groups;

    UniqueFd listen_fd = listen_socket(socket_path, s.job_gid);
    int ready[2], mapped[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
    UniqueFd ready_r(ready[0]), ready_w(ready[1]);
    if (::pipe2(mapped, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
    UniqueFd mapped_r(mapped[0]), mapped_w(mapped[1]);
    ChildArgs a{&s,     groups.data(), groups.size(), argv.data(), envp, listen_fd.get(),
                log_fd, ready_w.get(), mapped_r.get()};
    pid_t pid = ::fork();
    if (pid < 0) SVM_THROW_ERRNO("fork");
    if (pid == 0) exec_child(a);
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
