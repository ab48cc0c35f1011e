#include "task_exec.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_agent.hpp"
#include "guest_console.hpp"
#include "log.hpp"
#include "pmix.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "srun_relay.hpp"

namespace svm {

namespace {

pid_t g_child = 0;
int g_signal_pipe[2] = {-1, -1};

// Signals for the task go into the guest (see relay_signal); the handler
// only queues them for the main loop.
void on_signal(int sig) {
    int saved = errno;
    unsigned char b = static_cast<unsigned char>(sig);
    if (g_signal_pipe[1] >= 0 && ::write(g_signal_pipe[1], &b, 1) < 0) {
    }
    errno = saved;
}

// Slurm signals every process of the step (its cgroup), our ssh clients
// too; they must outlive the signal to carry it into the guest. (ssh keeps
// a signal ignored when it starts with it ignored.)
void ignore_job_signals() {
    for (int sig : forwarded_signals()) ::signal(sig, SIG_IGN);
}

// Sends `sig` to the task's process group in the guest over a second SSH
// session (a signal to the local ssh would only end the session and leave
// the task running). Returns the helper's pid, or -1.
pid_t relay_signal(const JobPlan& p, const std::string& self, const std::string& pid_file, int sig) {
    std::string name = forwarded_signal_name(sig);
    if (name.empty()) return -1;
    std::vector<std::string> args = ssh_argv(p, self, false);
    args.push_back("--");
    args.push_back(remote_signal_command(pid_file, name));
    SpawnOptions o;
    o.stdin_fd = o.stdout_fd = SpawnOptions::kNull;
    o.ignored_signals = forwarded_signals();
    o.exec_failure_status = 255;
    try {
        return spawn(args, o);
    } catch (const Error&) {
        return -1;
    }
}

// Starts ssh with `args`; the batch script goes to its stdin through the
// returned descriptor (-1 otherwise).
int start_ssh(const std::vector<std::string>& args, bool batch, uint32_t job_id) {
    int in_pipe[2] = {-1, -1};
    if (batch && ::pipe2(in_pipe, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
    SpawnOptions o;
    o.stdin_fd = in_pipe[0];  // -1 when not batch: inherited
    o.ignored_signals = forwarded_signals();
    o.exec_error = "slurm-vm: job " + std::to_string(job_id) + ": cannot run ssh: ";
    o.exec_failure_status = 255;
    try {
        g_child = spawn(args, o);
    } catch (...) {
        if (batch) {
            ::close(in_pipe[0]);
            ::close(in_pipe[1]);
        }
        throw;
    }
    if (batch) ::close(in_pipe[0]);
    return in_pipe[1];
}

void forward_signals_to_pipe() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) SVM_THROW_ERRNO("pipe");
    for (int sig : forwarded_signals()) {
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        ::sigemptyset(&sa.sa_mask);
        ::sigaction(sig, &sa, nullptr);
    }
    ::signal(SIGPIPE, SIG_IGN);
}

void write_all_and_close(int fd, const std::string& data) {
    write_fully(fd, data);
    ::close(fd);
}

// Waits for the task; relays signals meanwhile. A relay that fails (the
// guest no longer answers) falls back to ending the session.
int wait_relaying_signals(const JobPlan& p, const std::string& self, const std::string& pid_file) {
    int st = 0;
    std::map<pid_t, int> relays;  // helper pid -> signal
    for (;;) {
        pid_t w = ::waitpid(g_child, &st, WNOHANG);
        if (w == g_child) break;
        if (w < 0 && errno != EINTR) SVM_THROW_ERRNO("waitpid");
        struct pollfd pfd {
            g_signal_pipe[0], POLLIN, 0
        };
        ::poll(&pfd, 1, 200);
        unsigned char b;
        while (::read(g_signal_pipe[0], &b, 1) == 1) {
            pid_t h = relay_signal(p, self, pid_file, b);
            if (h > 0) relays[h] = b;
            log::debug("signal " + std::to_string(b) + " relayed into the guest");
        }
        for (auto it = relays.begin(); it != relays.end();) {
            int hs = 0;
            if (::waitpid(it->first, &hs, WNOHANG) != it->first) {
                ++it;
                continue;
            }
            bool ok = WIFEXITED(hs) && WEXITSTATUS(hs) == 0;
            if (!ok && it->second != SIGUSR1 && it->second != SIGUSR2) ::kill(g_child, SIGKILL);
            it = relays.erase(it);
        }
    }
    for (const auto& [h, sig] : relays) {
        (void)sig;
        ::kill(h, SIGKILL);  // it ignores the job's signals (ignore_job_signals)
        ::waitpid(h, nullptr, 0);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// --vm-save: the epilog copies the disk after the guest is stopped (at
// once, no shutdown): the guest's file systems are synced now.
void sync_for_save(const JobPlan& p, const TaskInvocation& t) {
    std::vector<std::string> sync_args = ssh_argv(p, t.self, false);
    sync_args.push_back("--");
    sync_args.push_back("sync");
    RunOptions so;  // this process's environment: the host side's (vm_exec.cpp)
    so.timeout_ms = 120000;
    RunResult sr = run(sync_args, so);
    if (sr.ok()) log::info("the guest's disk is synced; the job's epilog saves it to " + p.save_path);
    else log::warn("sync in the guest failed before --vm-save: " + trim(sr.err));
}

constexpr size_t kConsoleTailLines = 20;

// The guest's state once the keeper has seen what the lost session saw: a
// guest that failed while the first command waited in it (login), or, when
// the guest's channels closed (`gone`: its QEMU is gone), whatever its phase,
// is reported so a moment later (bounded).
GuestState settled_guest_state(const JobPlan& p, bool gone = false) {
    GuestState s;
    poll_until(Deadline(Milliseconds(5000)), Milliseconds(20), [&] {
        s = read_guest_state(p);
        return s.phase != GuestState::Phase::login && !(gone && !s.ended());
    });
    return s;
}

// ssh's options that forward the guest's loopback port `port` to the batch
// step's srun relay (lib/guest/srun_relay.hpp).
std::vector<std::string> srun_forward_options(int port, const std::string& relay_socket) {
    return {"-o", "ExitOnForwardFailure=no", "-R", "127.0.0.1:" + std::to_string(port) + ":" + relay_socket};
}

// The batch script's srun relay when the script runs through the guest's
// agent: an SSH session with no command (ssh -N) forwards the port, started
// once the script's srun asked for it and the guest is ready (the guest's
// srun waits for the port meanwhile). A script without srun costs no SSH
// session.
class SrunForward {
public:
    ~SrunForward() { stop(); }
    void start_when_ready(const JobPlan& p, const std::string& self, int port, const SrunRelay* relay) {
        if (pid_ != 0 || !relay || read_guest_state(p).phase != GuestState::Phase::ready) return;
        std::vector<std::string> args = ssh_argv(p, self, false);
        std::vector<std::string> fwd = srun_forward_options(port, relay->socket_path());
        fwd.insert(fwd.begin(), "-N");
        args.insert(args.end() - 1, fwd.begin(), fwd.end());
        SpawnOptions o;
        o.stdin_fd = o.stdout_fd = SpawnOptions::kNull;
        o.ignored_signals = forwarded_signals();
        o.exec_failure_status = 255;
        try {
            pid_ = spawn(args, o);
        } catch (const Error& e) {
            pid_ = -1;
            log::warn("srun will not work inside the guest: " + e.reason());
        }
    }
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);  // it ignores the job's signals, TERM among them
        ::waitpid(pid_, nullptr, 0);
        pid_ = 0;
    }

private:
    pid_t pid_ = 0;
};

// The task ended with 255: its way into the guest was lost (`gone`: for
// sure), or the guest failed while the task waited in it. Says which.
void report_lost(const JobPlan& p, const std::string& way, bool gone = false) {
    GuestState now = settled_guest_state(p, gone);
    if (now.phase != GuestState::Phase::ready) {
        log::error(now.ended() ? now.reason : "the guest is gone");
        show_console_to_user(p);
    } else {
        log::error("lost " + way + " on " + p.node);
    }
}

// Waits at most timeout_ms for `pid`; its exit status, or -1 (then killed).
int wait_exit(pid_t pid, long timeout_ms) {
    int st = 0;
    if (!poll_until(Deadline(Milliseconds(timeout_ms)), Milliseconds(20),
                    [&] { return ::waitpid(pid, &st, WNOHANG) == pid; })) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// What ssh said on stderr before it ended or went to the background (at
// most 64 KiB, from a pipe that no one writes any more: in the background,
// ssh writes to /dev/null).
std::string drain(int fd) {
    std::string out;
    char buf[4096];
    ssize_t n;
    while (out.size() < 65536 && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

// srun --mpi=pmix (pmix.hpp): the step's PMIx server reached from the guest.
// One SSH session per node and step forwards the guest's loopback port to
// the host's: the step's first task on the node makes it (ssh -f returns once
// the forward is made; the session stays, among the step's processes, until
// Slurm ends the step and kills them); the others find its mark, under the
// lock, in the step's own directory (the user's, removed with the step). The
// session writes no file: what the guest makes it say later (a refused
// channel, a failed connection) is not kept on the host's disk.
// Returns "" or why the ranks cannot start.
std::string ensure_pmix_forward(const JobPlan& p, const std::string& self, const PmixStep& s) {
    std::string lock = s.tmpdir + "/slurm-vm-forward.lock";
    std::string mark = s.tmpdir + "/slurm-vm-forward." + std::to_string(s.port);
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return "cannot open " + lock + ": " + std::strerror(errno);
    std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { ::close(*f); });
    while (::flock(fd, LOCK_EX) != 0)
        if (errno != EINTR) return "cannot lock " + lock + ": " + std::strerror(errno);
    if (::access(mark.c_str(), F_OK) == 0) return "";
    std::vector<std::string> args = ssh_argv(p, self, false);
    std::vector<std::string> fwd = pmix_forward_options(s.port);
    args.insert(args.end() - 1, fwd.begin(), fwd.end());
    int err[2];
    if (::pipe2(err, O_CLOEXEC | O_NONBLOCK) != 0) return std::string("cannot make a pipe: ") + std::strerror(errno);
    SpawnOptions o;
    o.stdin_fd = o.stdout_fd = SpawnOptions::kNull;
    o.stderr_fd = err[1];
    o.ignored_signals = forwarded_signals();  // it ends with the step, by SIGKILL
    o.exec_failure_status = 255;
    pid_t pid = -1;
    try {
        pid = spawn(args, o);
    } catch (const Error& e) {
        ::close(err[0]);
        ::close(err[1]);
        return "cannot run ssh: " + e.reason();
    }
    ::close(err[1]);
    int st = wait_exit(pid, (std::max(60, p.boot_timeout_s / 5) + 30) * 1000L);
    std::string why = trim(drain(err[0]));
    if (st != 0)
        return "cannot forward the step's PMIx server into the guest on " + p.node + ": " +
               (why.empty() ? "ssh ended with " + std::to_string(st) : log::tail_lines(log::printable(why), 1));
    write_file_atomic(mark, "", 0600);
    return "";
}

// The batch step's output files (stdout's, and stderr's when it is another
// file), regular files only, by the path the descriptor has.
std::vector<std::pair<int, std::string>> output_files() {
    std::vector<std::pair<int, std::string>> out;
    struct stat first {};
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (!out.empty() && st.st_dev == first.st_dev && st.st_ino == first.st_ino) continue;
        char buf[4096];
        ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
        std::string path(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
        if (path.empty() || path[0] != '/' || path.find(" (deleted)") != std::string::npos) continue;
        if (out.empty()) first = st;
        out.emplace_back(fd, path);
    }
    return out;
}

constexpr size_t kMaxInlineCommand = 96 * 1024;

// The batch script through the guest's agent (lib/guest/guest_agent.hpp): it
// waits in the guest until the guest is set up, as the user.
// Gives the agent the batch script, or (a guest restored from its
// checkpoint) takes over the one it runs; false when the agent is lost.
bool start_or_reattach(const JobPlan& p, const GuestCommand& c, GuestAgent& agent, const std::string& script) {
    // A script of usual size goes in the command itself (one argument of the
    // user's shell: the kernel takes up to 128 KiB), a larger one on stdin.
    GuestCommand inline_c = c;
    inline_c.script = script;
    std::string command = remote_shell_command(inline_c);
    GuestAgent::Reattached was = p.restore_from.empty() ? GuestAgent::Reattached::idle : agent.reattach(60000);
    if (was == GuestAgent::Reattached::running) log::info("the job goes on where it was when Slurm requeued it");
    try {
        if (was == GuestAgent::Reattached::lost) SVM_THROW("the restored guest's agent does not answer");
        bool inline_script = command.size() <= kMaxInlineCommand;
        if (was == GuestAgent::Reattached::idle)
            agent.start(inline_script ? command : remote_shell_command(c), inline_script ? "" : script, c.pid_file);
    } catch (const Error& e) {
        log::debug(e.chain());
        report_lost(p, "the guest agent's channel", true);
        return false;
    }
    return true;
}

int run_by_agent(const JobPlan& p, const TaskInvocation& t, GuestCommand c, GuestAgent& agent,
                 const std::string& script, const SrunRelay* relay) {
    c.wait_for_flags_in = kGuestFlagDir;
    if (relay) c.srun_wake = std::string(kGuestFlagDir) + "/srun";
    // SIGPIPE ignored from here (forward_signals_to_pipe): a guest whose
    // set-up failed may be destroyed while the command is sent, and the
    // user is told why rather than the step dying of the signal unheard.
    forward_signals_to_pipe();
    if (!start_or_reattach(p, c, agent, script)) return 255;
    SrunForward fwd;
    std::optional<int> st = agent.wait(
        g_signal_pipe[0], STDOUT_FILENO, STDERR_FILENO,
        [&] {
            if (agent.srun_asked()) fwd.start_when_ready(p, t.self, c.srun_port, relay);
        },
        [&](int sig) { return !(sig == SIGTERM && !p.checkpoint_dir.empty() && t.requeued && t.requeued(p.job_id)); });
    fwd.stop();
    if (agent.detached()) {
        log::info(
            "Slurm requeues the job: its guest is saved with the script as it runs, to go on where it stopped "
            "when the job runs again");
        set_output_aside();
        return 0;
    }
    // The agent answers whatever the guest's readiness (sshd's daemon may
    // not be up yet when a short script ends).
    if (st && !p.save_path.empty()) {
        std::optional<int> synced = agent.sync(120000);
        if (synced == 0) log::info("the guest's disk is synced; the job's epilog saves it to " + p.save_path);
        else log::warn("sync in the guest failed before --vm-save");
    }
    if (!st) {
        report_lost(p, "the guest agent's channel", true);
        return 255;
    }
    // 255 is also the command's own status when the guest failed its set-up
    // while the command waited in it (the flag "failed").
    if (*st == 255) {
        GuestState now = settled_guest_state(p);
        if (now.ended()) {
            log::error(now.reason);
            show_console_to_user(p);
        }
    }
    return *st;
}

}  // namespace

std::optional<TaskInvocation> task_invocation(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                              const std::string& cwd) {
    TaskInvocation t;
    t.env = env;
    t.cwd = cwd;
    std::optional<std::string> plan = env_entry(env, "SLURM_VM_PLAN");
    bool prepended = env_entry(env, "SLURM_VM_PREPENDED").has_value();
    std::optional<std::string> argv0 = prepended
                                           ? (argv.size() > 1 ? std::optional<std::string>(argv[1]) : std::nullopt)
                                           : env_entry(env, "SLURM_VM_ARGV0");
    if (!plan || !argv0) return std::nullopt;
    t.plan_path = *plan;
    t.argv.push_back(*argv0);
    for (size_t i = prepended ? 2 : 1; i < argv.size(); ++i) t.argv.push_back(argv[i]);
    t.batch = env_entry(env, "SLURM_VM_BATCH").has_value();
    if (auto cfd = env_entry(env, "SLURM_VM_CONSOLE_FD"))
        t.console_fd = static_cast<int>(parse_job_id(*cfd));  // digits only
    // Our own path for the ProxyCommand: argv[0] as the plugin set it (an
    // absolute path; /proc/self/exe would say "(deleted)" after an upgrade).
    t.self = argv.empty() ? "" : argv[0];
    if (t.self.empty() || t.self[0] != '/') {
        char buf[4096];
        ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n <= 0) SVM_THROW_ERRNO("readlink /proc/self/exe");
        t.self.assign(buf, static_cast<size_t>(n));
    }
    return t;
}

std::string wait_for_guest(const JobPlan& p, bool first_login) {
    GuestState state;
    auto up = [&] {
        return state.phase == GuestState::Phase::ready || (first_login && state.phase == GuestState::Phase::login);
    };
    // A small file, read while the guest boots.
    if (poll_until(Deadline(Milliseconds((p.boot_timeout_s + 60) * 1000L)), Milliseconds(20), [&] {
            state = read_guest_state(p);
            return up() || state.ended();
        }))
        return up() ? "" : state.reason;
    return "the guest on " + p.node +
           " did not start (state: " + (state.phase == GuestState::Phase::none ? "none" : state.text()) +
           "); is PrologFlags=Contain set?";
}

void wait_for_record(const JobPlan& p, long timeout_ms) {
    // A short script may end before the keeper, which starts writing the
    // record when the guest is set up, has written it.
    bool over = poll_until(Deadline(Milliseconds(timeout_ms)), Milliseconds(20), [&] {
        return ::access(p.record_written().c_str(), F_OK) == 0 || read_guest_state(p).ended();
    });
    if (!over)
        log::warn("the job's VM record is not written after " + std::to_string(timeout_ms / 1000) +
                  " s: the job ends without it");
}

GuestCommand guest_command(const JobPlan& p, const TaskInvocation& t, const std::string& pid_file) {
    GuestCommand c;
    c.argv = t.argv;
    c.env = t.env;
    std::string tpn = env_entry(t.env, "SLURM_TASKS_PER_NODE").value_or("");
    if (!p.peers.empty() && !p.peers[0].ip.empty()) c.hostfile = mpi_hostfile(p.peers, tpn.empty() ? "1" : tpn);
    c.cwd = t.cwd;
    c.pid_file = pid_file;
    if (t.batch) {
        c.script_on_stdin = true;
        for (const auto& peer : p.peers)
            if (peer.hostname != p.hostname && !peer.ip.empty()) c.wait_for_peers.push_back(peer.hostname);
        c.peer_wait_s = p.boot_timeout_s;
    }
    return c;
}

int run_task_in_guest(const JobPlan& p, const TaskInvocation& t) {
    // This process is unique on the host, the guest is this host's only.
    GuestCommand c = guest_command(p, t, "/tmp/.slurm-vm-task." + std::to_string(::getpid()));
    std::string script = t.batch ? read_file(t.argv[0]) : "";
    // The batch script's srun goes through us (lib/guest/srun_relay.hpp).
    std::unique_ptr<SrunRelay> srun_relay;
    if (t.batch) {
        try {
            srun_relay = std::make_unique<SrunRelay>();
            srun_relay->start();
            // The same for every run of the job: a restored script's srun
            // finds its relay there again.
            c.srun_port = 30000 + static_cast<int>(p.job_id % 30000);
        } catch (const Error& e) {
            log::warn("srun will not work inside the guest: " + e.reason());
        }
    }
    // The batch script goes to the guest's agent, which waits for it from
    // early in the guest's boot; without one, over SSH once the guest is ready.
    if (t.batch && !p.checkpoint_dir.empty()) put_output_back();
    if (t.batch && !p.resume_note.empty()) log::warn(p.resume_note);
    if (t.batch) {
        if (std::optional<GuestAgent> agent = GuestAgent::take(p.agent_socket())) {
            int rc = run_by_agent(p, t, c, *agent, script, srun_relay.get());
            wait_for_record(p);
            return rc;
        }
        if (std::string why = wait_for_guest(p); !why.empty()) {
            log::error(why);
            show_console_to_user(p);
            return 1;
        }
    }
    if (std::optional<PmixStep> pmix = t.batch ? std::nullopt : pmix_step(t.env)) {
        if (std::string why = ensure_pmix_forward(p, t.self, *pmix); !why.empty()) {
            log::error(why);
            return 1;
        }
        c.settings = pmix_guest_settings();
    }
    // srun --pty: the task's stdin is a terminal; so is the command's in
    // the guest (`srun --jobid=ID --overlap --pty bash` is a shell there).
    bool tty = !t.batch && ::isatty(STDIN_FILENO) == 1;
    std::vector<std::string> args = ssh_argv(p, t.self, tty);
    if (srun_relay) {
        std::vector<std::string> fwd = srun_forward_options(c.srun_port, srun_relay->socket_path());
        args.insert(args.end() - 1, fwd.begin(), fwd.end());
    }
    args.push_back("--");
    args.push_back(remote_shell_command(c));
    int script_fd = start_ssh(args, t.batch, p.job_id);
    forward_signals_to_pipe();
    if (script_fd >= 0) write_all_and_close(script_fd, script);
    int rc = wait_relaying_signals(p, t.self, c.pid_file);
    if (t.batch && !p.save_path.empty() && read_guest_state(p).phase == GuestState::Phase::ready) sync_for_save(p, t);
    if (rc == 255) report_lost(p, "the SSH connection to the guest");
    if (t.batch) wait_for_record(p);
    return rc;
}

std::string output_aside_path(const std::string& path) { return path + ".requeued"; }

void set_output_aside() {
    for (const auto& [fd, path] : output_files())
        if (::rename(path.c_str(), output_aside_path(path).c_str()) != 0)
            log::warn("the job's output " + path + " is not kept across the requeue: " + std::strerror(errno));
}

void put_output_back() {
    for (const auto& [fd, path] : output_files()) {
        std::string aside = output_aside_path(path);
        UniqueFd in(::open(aside.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
        if (!in) continue;
        char buf[65536];
        ssize_t n;
        while ((n = ::read(in.get(), buf, sizeof buf)) > 0)
            if (!write_fully(fd, buf, static_cast<size_t>(n))) break;
        ::unlink(aside.c_str());
    }
}

void show_console_to_user(const JobPlan& p) {
    // Kept in the job's working directory (we run as the user: this is the
    // user's own write); the keeper left a filtered copy when the guest failed.
    std::string text;
    try {
        if (!read_file_if_exists(p.console_copy(), text)) return;
        std::string dst = "slurm-" + std::to_string(p.job_id) + "-" + p.node + ".console.log";
        write_file_atomic(dst, text, 0600);
        log::info("the guest's console log is in " + dst);
    } catch (const Error&) {
    }
    std::string tail = log::tail_lines(log::printable(text), kConsoleTailLines);
    if (tail.empty()) return;
    log::info("the last lines of the guest's console on " + p.node + ":");
    std::string shown;
    for (size_t b = 0; b < tail.size();) {
        size_t e = tail.find('\n', b);
        shown += "  | " + tail.substr(b, e - b) + "\n";
        b = e + 1;
    }
    std::fputs(shown.c_str(), stderr);
    std::fflush(stderr);
}

int proxy_to_guest(const std::string& socket_path) {
    ignore_job_signals();  // ssh's transport: it ends with ssh, not with Slurm's signal
    int s = connect_unix(socket_path);
    if (s < 0) {
        log::error("cannot reach the guest through " + socket_path + ": " + std::strerror(errno));
        return 255;
    }
    char buf[65536];
    bool in_open = true, s_open = true;
    while (s_open) {
        struct pollfd p[2] = {{0, static_cast<short>(in_open ? POLLIN : 0), 0}, {s, POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return 255;
        }
        if (in_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = ::read(0, buf, sizeof buf);
            if (n <= 0) {
                in_open = false;
                ::shutdown(s, SHUT_WR);
            } else if (::write(s, buf, static_cast<size_t>(n)) != n) {
                return 255;
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = ::read(s, buf, sizeof buf);
            if (n <= 0) {
                s_open = false;
            } else {
                for (ssize_t off = 0; off < n;) {
                    ssize_t w = ::write(1, buf + off, static_cast<size_t>(n - off));
                    if (w <= 0) return 255;
                    off += w;
                }
            }
        }
    }
    return 0;
}

}  // namespace svm
