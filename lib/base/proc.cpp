#include "proc.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"

namespace svm {

Credentials credentials_for(uid_t uid, std::optional<gid_t> gid) {
    Credentials c;
    c.uid = uid;
    struct passwd pw;
    struct passwd* res = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) != 0 || !res)
        SVM_THROW("user id " + std::to_string(uid) + " is not known on this node");
    c.user = pw.pw_name;
    c.gid = gid ? *gid : pw.pw_gid;
    int n = 64;
    std::vector<gid_t> groups(static_cast<size_t>(n));
    if (getgrouplist(pw.pw_name, c.gid, groups.data(), &n) < 0) {
        groups.resize(static_cast<size_t>(n));
        getgrouplist(pw.pw_name, c.gid, groups.data(), &n);
    }
    groups.resize(static_cast<size_t>(n));
    c.groups = groups;
    return c;
}

void drop_privileges(const Credentials& as) {
    std::vector<gid_t> groups = as.groups.empty() ? std::vector<gid_t>{as.gid} : as.groups;
    if (::geteuid() == 0 && ::setgroups(groups.size(), groups.data()) != 0) SVM_THROW_ERRNO("setgroups");
    if (::setresgid(as.gid, as.gid, as.gid) != 0) SVM_THROW_ERRNO("setresgid");
    if (::setresuid(as.uid, as.uid, as.uid) != 0) SVM_THROW_ERRNO("setresuid");
    uid_t r, e, s;
    if (::getresuid(&r, &e, &s) != 0 || r != as.uid || e != as.uid || s != as.uid)
        SVM_THROW("could not drop privileges to uid " + std::to_string(as.uid));
}

namespace {
// The null-terminated pointer array exec wants, into `strings` (which must
// outlive it): built before fork, since nothing is allocated after it.
std::vector<char*> c_pointers(const std::vector<std::string>& strings) {
    std::vector<char*> v;
    v.reserve(strings.size() + 1);
    for (const auto& x : strings) v.push_back(const_cast<char*>(x.c_str()));
    v.push_back(nullptr);
    return v;
}

// Everything the child needs, made before fork: between fork and exec the
// child only reads it and makes async-signal-safe calls.
struct Prepared {
    const SpawnOptions* o;
    std::vector<char*> argv, env;
    char* const* envp;
    const char* path;           // where a bare argv[0] is looked for
    std::vector<gid_t> groups;  // the supplementary groups of o->as
};

Prepared prepare(const std::vector<std::string>& argv, const SpawnOptions& opts) {
    if (argv.empty() || argv[0].empty()) SVM_THROW("spawn: empty command");
    Prepared p{&opts, c_pointers(argv), {}, environ, ::getenv("PATH"), {}};
    if (opts.env) {
        p.env = c_pointers(*opts.env);
        p.envp = p.env.data();
        p.path = nullptr;
        for (char* e : p.env)
            if (e && std::strncmp(e, "PATH=", 5) == 0) p.path = e + 5;
    }
    if (!p.path) p.path = "/usr/bin:/bin";
    if (opts.as) p.groups = opts.as->groups.empty() ? std::vector<gid_t>{opts.as->gid} : opts.as->groups;
    if (opts.user_namespace && !opts.as) SVM_THROW("spawn: a user namespace needs an identity (as)");
    return p;
}

[[noreturn]] void spawn_fail(const SpawnOptions& o, const char* what) {
    int e = errno;
    if (!o.exec_error.empty()) {
        const char* why = ::strerrordesc_np(e);
        (void)!::write(2, o.exec_error.data(), o.exec_error.size());
        (void)!::write(2, what, std::strlen(what));
        (void)!::write(2, why ? why : "unknown error", why ? std::strlen(why) : 13);
        (void)!::write(2, "\n", 1);
    }
    _exit(o.exec_failure_status);
}

void spawn_redirect(int fd, int target) {
    if (fd == -1) return;
    if (fd == target) {  // already in place: kept across exec
        ::fcntl(fd, F_SETFD, 0);
        return;
    }
    int src = fd == SpawnOptions::kNull ? ::open("/dev/null", O_RDWR) : fd;
    if (src >= 0) ::dup2(src, target);
    if (fd == SpawnOptions::kNull && src > 2) ::close(src);
}

void spawn_signals(const SpawnOptions& o) {
    if (o.default_all_signals)
        for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
    for (int s : o.ignored_signals) ::signal(s, SIG_IGN);
    for (int s : o.default_signals) ::signal(s, SIG_DFL);
    if (o.clear_signal_mask) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
    }
}

void spawn_limits(const SpawnOptions& o) {
    if (o.limit_cpu_s) {
        struct rlimit rl = {*o.limit_cpu_s, *o.limit_cpu_s};
        if (::setrlimit(RLIMIT_CPU, &rl) != 0) spawn_fail(o, "setrlimit RLIMIT_CPU: ");
    }
    if (o.limit_as_bytes) {
        struct rlimit rl = {*o.limit_as_bytes, *o.limit_as_bytes};
        if (::setrlimit(RLIMIT_AS, &rl) != 0) spawn_fail(o, "setrlimit RLIMIT_AS: ");
    }
    if (o.limit_nofile) {
        struct rlimit rl = {*o.limit_nofile, *o.limit_nofile};
        if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {  // without CAP_SYS_RESOURCE: as many as it may
            if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) spawn_fail(o, "getrlimit RLIMIT_NOFILE: ");
            rl.rlim_cur = rl.rlim_max;
            if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) spawn_fail(o, "setrlimit RLIMIT_NOFILE: ");
        }
    }
}

// SpawnOptions::user_namespace, from root with the target's groups and gid.
void enter_user_namespace(const SpawnOptions& o) {
    const SpawnOptions::UserNamespace& ns = *o.user_namespace;
    if (::prctl(PR_SET_KEEPCAPS, 1) != 0) spawn_fail(o, "keepcaps: ");
    if (::unshare(CLONE_NEWUSER) != 0) spawn_fail(o, "unshare(CLONE_NEWUSER): ");
    char c = 'u';
    if (::write(ns.ready_fd, &c, 1) != 1) spawn_fail(o, "write: ");
    if (::read(ns.mapped_fd, &c, 1) != 1) spawn_fail(o, "read: ");
    if (::setresuid(ns.inside, ns.inside, ns.inside) != 0) spawn_fail(o, "setresuid: ");
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (::syscall(SYS_capget, &h, d) != 0) spawn_fail(o, "capget: ");
    for (auto& x : d) x.effective = x.inheritable = x.permitted;
    if (::syscall(SYS_capset, &h, d) != 0) spawn_fail(o, "capset: ");
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0);
}

void spawn_identity(const Prepared& p) {
    const SpawnOptions& o = *p.o;
    if (!o.as) return;
    if (::geteuid() == 0 && ::setgroups(p.groups.size(), p.groups.data()) != 0) spawn_fail(o, "setgroups: ");
    if (::setresgid(o.as->gid, o.as->gid, o.as->gid) != 0) spawn_fail(o, "setresgid: ");
    if (o.user_namespace) enter_user_namespace(o);
    else if (::setresuid(o.as->uid, o.as->uid, o.as->uid) != 0) spawn_fail(o, "setresuid: ");
}

// execve of a bare name in each directory of the PATH the child gets (not
// this process's, as execvpe would), on the stack; errno as execvpe leaves it.
void exec_in_path(const Prepared& p) {
    const char* name = p.argv[0];
    size_t name_len = std::strlen(name);
    bool denied = false;
    for (const char* dir = p.path;; ++dir) {
        const char* end = std::strchr(dir, ':');
        size_t len = end ? static_cast<size_t>(end - dir) : std::strlen(dir);
        char file[PATH_MAX];
        if (len + 1 + name_len < sizeof file) {
            char* w = std::copy(dir, dir + len, file);  // an empty entry is the current directory
            if (len > 0) *w++ = '/';
            std::copy(name, name + name_len + 1, w);
            ::execve(file, p.argv.data(), p.envp);
            if (errno == EACCES) denied = true;
            else if (errno != ENOENT && errno != ENOTDIR) return;
        }
        if (!end) break;
        dir = end;
    }
    errno = denied ? EACCES : ENOENT;
}

// The child's half of spawn, in this order: signals, session, descriptors,
// network namespace, limits, identity, directory, exec. Async-signal-safe
// calls only.
[[noreturn]] void spawn_child(const Prepared& p) {
    const SpawnOptions& o = *p.o;
    spawn_signals(o);
    if (o.new_session) ::setsid();
    spawn_redirect(o.stdin_fd, 0);
    spawn_redirect(o.stdout_fd, 1);
    spawn_redirect(o.stderr_fd, 2);
    // Closed at exec (what the identity step needs stays open until then).
    if (o.close_other_fds && ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) spawn_fail(o, "close_range: ");
    for (int fd : o.keep_fds) {
        errno = EBADF;
        if (fd <= 2 || ::fcntl(fd, F_SETFD, 0) != 0) spawn_fail(o, "keep a descriptor: ");
    }
    if (o.netns_fd >= 0 && ::setns(o.netns_fd, CLONE_NEWNET) != 0) spawn_fail(o, "setns: ");
    spawn_limits(o);
    spawn_identity(p);
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) {
        if (o.cwd_missing_note.empty()) spawn_fail(o, "chdir: ");
        (void)!::write(2, o.cwd_missing_note.data(), o.cwd_missing_note.size());
    }
    if (!o.program.empty()) ::execve(o.program.c_str(), p.argv.data(), p.envp);
    else if (o.search_path && !std::strchr(p.argv[0], '/')) exec_in_path(p);
    else ::execve(p.argv[0], p.argv.data(), p.envp);
    spawn_fail(o, "");
}

pid_t fork_child(const Prepared& p) {
    pid_t pid = ::fork();
    if (pid == 0) spawn_child(p);
    return pid;
}

// Reaps a child killed with SIGKILL, waiting at most grace_ms: one stuck in
// a file system's uninterruptible wait (a FUSE daemon that took a read and
// never answers) cannot die, and the caller must not wait with it. It is
// left a child of this process, reaped by init once this process ends.
constexpr int kKilledGraceMs = 2000;

void reap_killed(pid_t pid, int& st, int grace_ms) {
    bool ended = poll_until(Deadline(Milliseconds(grace_ms)), Milliseconds(2), [&] {
        pid_t w = ::waitpid(pid, &st, WNOHANG);
        return w == pid || (w < 0 && errno != EINTR);
    });
    if (!ended) st = SIGKILL;  // reads as killed
}

// The child's pipes as collect() serves them: stdin written from
// `in_data`, stdout and stderr read; -1 once closed.
struct ChildIo {
    int in = -1, out = -1, err = -1;
    const std::string& in_data;
    size_t in_off = 0;
    bool open() const { return in >= 0 || out >= 0 || err >= 0; }
    void close_all() {
        for (int* fd : {&in, &out, &err})
            if (*fd >= 0) ::close(std::exchange(*fd, -1));
    }
};

// Reads what came on fd into `into`; closes fd at its end.
void read_into(int& fd, std::string& into) {
    char buf[65536];
    ssize_t k = ::read(fd, buf, sizeof buf);
    if (k > 0) into.append(buf, static_cast<size_t>(k));
    else ::close(std::exchange(fd, -1));
}

// Writes the next part of stdin; closes it once all is written or the
// child no longer reads.
void write_some(ChildIo& io) {
    ssize_t w = ::write(io.in, io.in_data.data() + io.in_off, io.in_data.size() - io.in_off);
    if (w > 0) io.in_off += static_cast<size_t>(w);
    if (w < 0 || io.in_off >= io.in_data.size()) ::close(std::exchange(io.in, -1));
}

// One poll of the child's pipes, and what it found ready served. False
// when collecting ends here: the deadline passed or the output went over
// max_output (the child is killed), or poll failed.
bool serve_pipes(pid_t pid, ChildIo& io, const Deadline& deadline, size_t max_output, RunResult& r) {
    struct pollfd p[3];
    int n = 0, ii = -1, oi = -1, ei = -1;
    if (io.in >= 0) p[ii = n++] = {io.in, POLLOUT, 0};
    if (io.out >= 0) p[oi = n++] = {io.out, POLLIN, 0};
    if (io.err >= 0) p[ei = n++] = {io.err, POLLIN, 0};
    if (deadline.expired()) {
        r.timed_out = true;
        ::kill(pid, SIGKILL);
        return false;
    }
    int pr = ::poll(p, static_cast<nfds_t>(n), deadline.remaining_ms());
    if (pr < 0 && errno != EINTR) return false;
    if (pr <= 0) return true;
    if (max_output && (r.out.size() > max_output || r.err.size() > max_output)) {
        r.truncated = true;  // bounded: the command is stopped, not read on
        ::kill(pid, SIGKILL);
        return false;
    }
    if (ii >= 0 && p[ii].revents) write_some(io);
    if (oi >= 0 && p[oi].revents) read_into(io.out, r.out);
    if (ei >= 0 && p[ei].revents) read_into(io.err, r.err);
    return true;
}

// The child's wait status once its output is closed: it may still be
// running (it closed its fds), until the deadline.
int wait_for_child(pid_t pid, const Deadline& deadline, RunResult& r) {
    int st = 0;
    if (r.timed_out || r.truncated) {
        reap_killed(pid, st, kKilledGraceMs);
        return st;
    }
    bool ended = poll_until(deadline, Milliseconds(2), [&] {
        pid_t w = ::waitpid(pid, &st, WNOHANG);
        return w == pid || (w < 0 && errno != EINTR);
    });
    if (!ended) {
        r.timed_out = true;
        ::kill(pid, SIGKILL);
        reap_killed(pid, st, kKilledGraceMs);
    }
    return st;
}

RunResult collect(pid_t pid, int in_fd, int out_fd, int err_fd, const std::string& in_data, int timeout_ms,
                  size_t max_output = 0) {
    RunResult r;
    ChildIo io{in_fd, out_fd, err_fd, in_data};
    if (io.in >= 0 && in_data.empty()) ::close(std::exchange(io.in, -1));
    const Deadline deadline{Milliseconds(timeout_ms)};
    while (io.open() && serve_pipes(pid, io, deadline, max_output, r)) {
    }
    io.close_all();
    int st = wait_for_child(pid, deadline, r);
    if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
    else if (WIFSIGNALED(st)) r.status = 128 + WTERMSIG(st);
    return r;
}

// A pipe whose two ends close when it goes out of scope (unless taken).
struct Pipe {
    int fd[2] = {-1, -1};
    Pipe() {
        if (::pipe2(fd, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
    }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;
    ~Pipe() {
        for (int f : fd)
            if (f >= 0) ::close(f);
    }
    int take(int end) { return std::exchange(fd[end], -1); }
};

// What run's child gets: the pipes, its identity, limits and directory; the
// environment given (or a minimal PATH), PATH searched only for a bare name.
SpawnOptions run_spawn_options(const std::vector<std::string>& argv, const RunOptions& opts, int in, int out, int err) {
    SpawnOptions s;
    s.env = opts.env.empty()
                ? std::vector<std::string>{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
                : opts.env;
    s.cwd = opts.cwd;
    s.stdin_fd = in;
    s.stdout_fd = out;
    s.stderr_fd = err;
    s.default_signals = {SIGPIPE};
    s.clear_signal_mask = true;
    s.new_session = opts.new_session;
    s.keep_fds = opts.keep_fds;
    s.netns_fd = opts.netns_fd;
    s.limit_cpu_s = opts.limit_cpu_s;
    s.limit_as_bytes = opts.limit_as_bytes;
    s.as = opts.as;
    s.exec_error = argv[0] + ": ";
    return s;
}
}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& opts) {
    Prepared p = prepare(argv, opts);
    pid_t pid = fork_child(p);
    if (pid < 0) SVM_THROW_ERRNO("fork");
    return pid;
}

RunResult run(const std::vector<std::string>& argv, const RunOptions& opts) {
    if (argv.empty() || argv[0].empty()) SVM_THROW("run: empty command");
    Pipe in, out, err;
    pid_t pid = spawn(argv, run_spawn_options(argv, opts, in.fd[0], out.fd[1], err.fd[1]));
    ::close(in.take(0));
    ::close(out.take(1));
    ::close(err.take(1));
    return collect(pid, in.take(1), out.take(0), err.take(0), opts.stdin_data, opts.timeout_ms, opts.max_output_bytes);
}

void spawn_detached(const std::vector<std::string>& argv, const std::string& log) {
    if (argv.empty() || argv[0].empty() || argv[0][0] != '/') SVM_THROW("spawn_detached: not an absolute path");
    UniqueFd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) SVM_THROW_ERRNO("open " + log);
    SpawnOptions o;
    o.stdin_fd = SpawnOptions::kNull;
    o.stdout_fd = out.get();
    o.stderr_fd = out.get();
    o.default_all_signals = true;
    o.clear_signal_mask = true;
    o.close_other_fds = true;
    o.search_path = false;
    o.exec_error = argv[0] + ": ";
    Prepared p = prepare(argv, o);
    // A session of its own, then a child of that session's leader, which
    // exits at once: init adopts it.
    pid_t pid = ::fork();
    if (pid < 0) SVM_THROW_ERRNO("fork");
    if (pid == 0) {
        ::setsid();
        _exit(fork_child(p) < 0 ? 1 : 0);
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) SVM_THROW("spawn_detached: could not start " + argv[0]);
}

std::string run_checked(const std::vector<std::string>& argv, const RunOptions& opts) {
    RunResult r = run(argv, opts);
    if (r.timed_out) SVM_THROW(argv[0] + " timed out after " + std::to_string(opts.timeout_ms / 1000) + " s");
    if (r.status != 0) {
        std::string msg = trim(r.err);
        if (msg.empty()) msg = trim(r.out);
        SVM_THROW(argv[0] + " failed (exit " + std::to_string(r.status) + ")" + (msg.empty() ? "" : ": " + msg));
    }
    return r.out;
}

namespace {
RunResult run_in_child(const std::function<int(int out_fd)>& fn, const Credentials* as, int timeout_ms) {
    int outp[2], errp[2];
    if (::pipe2(outp, O_CLOEXEC) || ::pipe2(errp, O_CLOEXEC)) SVM_THROW_ERRNO("pipe");
    pid_t pid = ::fork();
    if (pid < 0) SVM_THROW_ERRNO("fork");
    if (pid == 0) {
        ::close(outp[0]);
        ::close(errp[0]);
        ::dup2(errp[1], 2);
        int rc = 1;
        try {
            if (as) drop_privileges(*as);
            rc = fn(outp[1]);
        } catch (const Error& e) {
            std::string m = e.chain() + "\n";
            (void)!::write(2, m.data(), m.size());
            rc = 1;
        } catch (const std::exception& e) {
            std::string m = std::string(e.what()) + "\n";
            (void)!::write(2, m.data(), m.size());
            rc = 1;
        }
        _exit(rc & 0xff);
    }
    ::close(outp[1]);
    ::close(errp[1]);
    return collect(pid, -1, outp[0], errp[0], "", timeout_ms);
}
}  // namespace

RunResult run_function(const std::function<int(int out_fd)>& fn, int timeout_ms) {
    return run_in_child(fn, nullptr, timeout_ms);
}

RunResult run_function_as(const Credentials& as, const std::function<int(int out_fd)>& fn, int timeout_ms) {
    return run_in_child(fn, &as, timeout_ms);
}

std::vector<std::string> inherited_env(std::initializer_list<const char*> names) {
    std::vector<std::string> out;
    for (const char* n : names)
        if (const char* v = ::getenv(n)) out.push_back(std::string(n) + "=" + v);
    return out;
}

std::optional<std::string> env_entry(const std::vector<std::string>& env, const std::string& name) {
    for (const auto& e : env)
        if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
            return e.substr(name.size() + 1);
    return std::nullopt;
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    out += "'";
    return out;
}

pid_t recorded_pid(const std::string& pid_file) {
    std::string text;
    try {
        if (!read_file_if_exists(pid_file, text)) return 0;
    } catch (const Error&) {
        return 0;
    }
    text = trim(text);
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return 0;
    pid_t pid = static_cast<pid_t>(std::stol(text));
    return pid > 1 ? pid : 0;
}

std::optional<ProcStat> proc_stat(pid_t pid) {
    std::string stat;
    try {
        if (!read_file_if_exists("/proc/" + std::to_string(pid) + "/stat", stat)) return std::nullopt;
    } catch (const Error&) {
        return std::nullopt;
    }
    // The command name may hold spaces and parentheses: it ends at the last ')'.
    size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
    ProcStat ps;
    ps.comm = stat.substr(open + 1, close - open - 1);
    long ppid = 0, pgrp = 0, session = 0;
    std::istringstream rest(stat.substr(close + 1));
    if (!(rest >> ps.state >> ppid >> pgrp >> session)) return std::nullopt;
    ps.ppid = static_cast<pid_t>(ppid);
    ps.session = static_cast<pid_t>(session);
    return ps;
}

void reap_exited_children(const std::string& comm_prefix) {
    std::string self = "/proc/" + std::to_string(::getpid());
    pid_t own = ::getsid(0);
    for (const auto& tid : list_dir(self + "/task")) {
        std::string children;
        if (!read_file_if_exists(self + "/task/" + tid + "/children", children)) continue;
        std::istringstream in(children);
        for (pid_t pid; in >> pid;) {
            // An exited daemon: a zombie of that name in another session.
            auto ps = proc_stat(pid);
            if (ps && ps->state == 'Z' && ps->session != own && ps->comm.rfind(comm_prefix, 0) == 0)
                ::waitpid(pid, nullptr, WNOHANG);
        }
    }
}

void adopt_orphans_and_reap(const std::string& comm_prefix) {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) SVM_THROW_ERRNO("prctl(PR_SET_CHILD_SUBREAPER)");
    std::thread([comm_prefix] {
        for (;; pause_for(Milliseconds(100))) {
            try {
                reap_exited_children(comm_prefix);
            } catch (const Error&) {
                // The next pass tries again.
            }
        }
    }).detach();
}

void wait_until_reaped(pid_t pid, int timeout_ms) {
    if (pid <= 1) return;
    poll_until(Deadline(Milliseconds(timeout_ms)), Milliseconds(2),
               [pid] { return ::kill(pid, 0) != 0 && errno == ESRCH; });
}

namespace {

// True while pid runs a command line containing every tab-separated part of
// `expect` (zombies do not count: a pid file may outlive its process, and
// pids are reused).
bool runs(pid_t pid, const std::string& expect) {
    std::string cmd;
    try {
        if (!read_file_if_exists("/proc/" + std::to_string(pid) + "/cmdline", cmd)) return false;
    } catch (const Error&) {
        return false;
    }
    for (auto& c : cmd)
        if (c == '\0') c = ' ';
    cmd += ' ';  // the last argument ends like the others
    for (size_t b = 0; b <= expect.size();) {
        size_t e = expect.find('\t', b);
        if (e == std::string::npos) e = expect.size();
        if (cmd.find(expect.substr(b, e - b)) == std::string::npos) return false;
        b = e + 1;
    }
    auto ps = proc_stat(pid);
    return !(ps && ps->state == 'Z');
}

}  // namespace

bool process_recorded_alive(const std::string& pid_file, const std::string& expect) {
    pid_t pid = recorded_pid(pid_file);
    return pid && runs(pid, expect);
}

void stop_recorded_process(const std::string& pid_file, const std::string& expect, int grace_ms, int sig) {
    pid_t pid = recorded_pid(pid_file);
    if (!pid || !runs(pid, expect)) return;
    auto ended = [&] { return !runs(pid, expect); };
    ::kill(pid, sig);
    if (poll_until(Deadline(Milliseconds(grace_ms)), Milliseconds(50), ended)) return;
    ::kill(pid, SIGKILL);
    if (poll_until(Deadline(Milliseconds(5000)), Milliseconds(10), ended)) return;
    SVM_THROW("process " + std::to_string(pid) + " (" + expect + ") did not exit after SIGKILL");
}

}  // namespace svm
