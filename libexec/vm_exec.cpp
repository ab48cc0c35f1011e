// slurm-vm-exec: what a task of a VM job runs instead of its command. The
// SPANK plugin replaces the task's argv[0] with this program (Slurm 22.05 has
// no spank_prepend_task_argv) and leaves the original in SLURM_VM_ARGV0. It
// waits for the node's guest, then runs the command inside it over SSH as the
// job's user, in the same directory, with the job's SLURM_* environment, and
// exits with the command's status.
//
// `slurm-vm-exec --proxy SOCKET` is the SSH ProxyCommand: it relays stdin and
// stdout to the job's Unix socket, which the keeper connects to the guest.
//
// It runs as the job's user: its messages go to stderr only (the job's
// output), as "slurm-vm: job 42: ...", never to the admins' log files.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "error.hpp"
#include "fs.hpp"
#include "guest_console.hpp"
#include "guest_exec.hpp"
#include "job_plan.hpp"
#include "log.hpp"
#include "proc.hpp"
#include "srun_relay.hpp"

extern char** environ;

namespace {

int proxy(const char* path) {
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        svm::log::error("cannot reach the guest through " + std::string(path) + ": " + std::strerror(errno));
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
    for (int sig : svm::forwarded_signals()) ::signal(sig, SIG_IGN);
}

// Sends `sig` to the task's process group in the guest over a second SSH
// session (a signal to the local ssh would only end the session and leave
// the task running). Returns the helper's pid, or -1.
pid_t relay_signal(const svm::JobPlan& p, const std::string& self, const std::string& pid_file, int sig) {
    std::string name = svm::forwarded_signal_name(sig);
    if (name.empty()) return -1;
    std::vector<std::string> args = svm::ssh_argv(p, self, false);
    args.push_back("--");
    args.push_back(svm::remote_signal_command(pid_file, name));
    pid_t h = ::fork();
    if (h != 0) return h;
    ignore_job_signals();
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
        ::dup2(null, 0);
        ::dup2(null, 1);
    }
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    ::execvp("ssh", cargv.data());
    _exit(255);
}

constexpr size_t kConsoleTailLines = 20;

void keep_console(const svm::JobPlan& p) {
    // Keep the guest's console for the user, in the job's working directory
    // (we run as the user: this is the user's own write), and show its end.
    // The keeper left a filtered copy of it when the guest failed.
    std::string text;
    try {
        if (!svm::read_file_if_exists(p.console_copy(), text)) return;
        std::string dst = "slurm-" + std::to_string(p.job_id) + "-" + p.node + ".console.log";
        svm::write_file_atomic(dst, text, 0600);
        svm::log::info("the guest's console log is in " + dst);
    } catch (const svm::Error&) {
    }
    std::string tail = svm::log::tail_lines(svm::log::printable(text), kConsoleTailLines);
    if (tail.empty()) return;
    svm::log::info("the last lines of the guest's console on " + p.node + ":");
    std::string shown;
    for (size_t b = 0; b < tail.size();) {
        size_t e = tail.find('\n', b);
        shown += "  | " + tail.substr(b, e - b) + "\n";
        b = e + 1;
    }
    std::fputs(shown.c_str(), stderr);
    std::fflush(stderr);
}

// Messages to stderr only, tagged with the job.
void init_log() {
    svm::log::Setup ls;
    ls.program = "slurm-vm-exec";
    const char* id = getenv("SLURM_JOB_ID");
    if (id) ls.job_id = static_cast<uint32_t>(std::strtoul(id, nullptr, 10));
    ls.stderr_prefix = "slurm-vm: ";
    ls.stderr_level = svm::log::Level::info;
    svm::log::init(ls);
}

}  // namespace

int main(int argc, char** argv) {
    init_log();
    if (argc == 3 && !std::strcmp(argv[1], "--proxy")) {
        ignore_job_signals();  // ssh's transport: it ends with ssh, not with Slurm's signal
        return proxy(argv[2]);
    }
    if (argc >= 2 && !std::strcmp(argv[1], "--help")) {
        std::printf("usage: slurm-vm-exec --proxy SOCKET\n"
                    "Otherwise run by the slurm-vm SPANK plugin in place of a task's command.\n");
        return 0;
    }
    const char* plan_path = getenv("SLURM_VM_PLAN");
    // Slurm 22.05: argv[0] was replaced, the original is in SLURM_VM_ARGV0;
    // Slurm 23.11+: we were prepended, argv[1] is the original argv[0].
    bool prepended = getenv("SLURM_VM_PREPENDED") != nullptr;
    const char* argv0 = prepended ? (argc > 1 ? argv[1] : nullptr) : getenv("SLURM_VM_ARGV0");
    int first_arg = prepended ? 2 : 1;
    if (!plan_path || !argv0) {
        svm::log::error("slurm-vm-exec was not started by the slurm-vm plugin (SLURM_VM_PLAN unset)");
        return 2;
    }
    bool batch = getenv("SLURM_VM_BATCH") != nullptr;
    // `slurm-vm console` (srun --vm-console): the plugin opened the guest's
    // console log for this step of the job's owner; print it, run nothing.
    if (const char* cfd = getenv("SLURM_VM_CONSOLE_FD")) {
        try {
            int fd = static_cast<int>(svm::parse_job_id(cfd));  // digits only
            std::string text = svm::read_console(fd);
            ::close(fd);
            std::fwrite(text.data(), 1, text.size(), stdout);
            return 0;
        } catch (const svm::Error& e) {
            svm::log::error("the guest's console: " + e.chain());
            return 1;
        }
    }
    try {
        svm::JobPlan p = svm::load_plan(plan_path);
        // 1. Wait for the guest of this node.
        long deadline = svm::now_ms() + (p.boot_timeout_s + 60) * 1000L;
        for (;;) {
            svm::GuestState state = svm::read_guest_state(p);
            if (state.phase == svm::GuestState::Phase::ready) break;
            if (state.ended()) {
                svm::log::error(state.reason);
                keep_console(p);
                return 1;
            }
            if (svm::now_ms() > deadline) {
                svm::log::error("the guest on " + p.node + " did not start (state: " +
                                (state.phase == svm::GuestState::Phase::none ? "none" : state.text()) +
                                "); is PrologFlags=Contain set?");
                keep_console(p);
                return 1;
            }
            ::usleep(20000);  // a small file, read while the guest boots
        }
        // 2. The command, its environment and directory, for the guest.
        svm::GuestCommand c;
        c.argv.push_back(argv0);
        for (int i = first_arg; i < argc; ++i) c.argv.push_back(argv[i]);
        for (char** e = environ; *e; ++e) c.env.push_back(*e);
        const char* tpn = getenv("SLURM_TASKS_PER_NODE");
        if (!p.peers.empty() && !p.peers[0].ip.empty()) c.hostfile = svm::mpi_hostfile(p.peers, tpn ? tpn : "1");
        char cwd[4096];
        if (::getcwd(cwd, sizeof cwd)) c.cwd = cwd;
        // This process is unique on the host, the guest is this host's only.
        c.pid_file = "/tmp/.slurm-vm-task." + std::to_string(::getpid());
        std::string script;
        if (batch) {
            c.script_on_stdin = true;
            script = svm::read_file(argv0);
            for (const auto& peer : p.peers)
                if (peer.hostname != p.hostname && !peer.ip.empty()) c.wait_for_peers.push_back(peer.hostname);
            c.peer_wait_s = p.boot_timeout_s;
        }
        // Our own path for the ProxyCommand: argv[0] as the plugin set it (an
        // absolute path; /proc/self/exe would say "(deleted)" after an upgrade).
        std::string self = argv[0];
        if (self.empty() || self[0] != '/') {
            char buf[4096];
            ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
            if (n <= 0) SVM_THROW_ERRNO("readlink /proc/self/exe");
            self.assign(buf, static_cast<size_t>(n));
        }
        // The batch script's srun goes through us (lib/srun_relay.hpp).
        std::unique_ptr<svm::SrunRelay> srun_relay;
        if (batch) {
            try {
                srun_relay = std::make_unique<svm::SrunRelay>();
                srun_relay->start();
                c.srun_port = 30000 + static_cast<int>(::getpid() % 30000);
            } catch (const svm::Error& e) {
                svm::log::warn("srun will not work inside the guest: " + e.reason());
            }
        }
        // srun --pty: the task's stdin is a terminal; so is the command's in
        // the guest (`srun --jobid=ID --overlap --pty bash` is a shell there).
        bool tty = !batch && ::isatty(STDIN_FILENO) == 1;
        std::vector<std::string> args = svm::ssh_argv(p, self, tty);
        if (srun_relay)
            args.insert(args.end() - 1, {"-o", "ExitOnForwardFailure=no", "-R",
                                         "127.0.0.1:" + std::to_string(c.srun_port) + ":" + srun_relay->socket_path()});
        args.push_back("--");
        args.push_back(svm::remote_shell_command(c));

        // 3. Run it; forward signals; report a lost guest.
        int in_pipe[2] = {-1, -1};
        if (batch && ::pipe(in_pipe) != 0) SVM_THROW_ERRNO("pipe");
        g_child = ::fork();
        if (g_child < 0) SVM_THROW_ERRNO("fork");
        if (g_child == 0) {
            ignore_job_signals();
            if (batch) {
                ::dup2(in_pipe[0], 0);
                ::close(in_pipe[0]);
                ::close(in_pipe[1]);
            }
            std::vector<char*> cargv;
            for (auto& a : args) cargv.push_back(const_cast<char*>(a.c_str()));
            cargv.push_back(nullptr);
            ::execvp("ssh", cargv.data());
            std::fprintf(stderr, "slurm-vm: job %u: cannot run ssh: %s\n", p.job_id, std::strerror(errno));
            _exit(255);
        }
        if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) SVM_THROW_ERRNO("pipe");
        for (int sig : svm::forwarded_signals()) {
            struct sigaction sa {};
            sa.sa_handler = on_signal;
            ::sigemptyset(&sa.sa_mask);
            ::sigaction(sig, &sa, nullptr);
        }
        ::signal(SIGPIPE, SIG_IGN);
        if (batch) {
            ::close(in_pipe[0]);
            size_t off = 0;
            while (off < script.size()) {
                ssize_t w = ::write(in_pipe[1], script.data() + off, script.size() - off);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) break;
                off += static_cast<size_t>(w);
            }
            ::close(in_pipe[1]);
        }
        // Wait for the task; relay signals meanwhile. A relay that fails
        // (the guest no longer answers) falls back to ending the session.
        int st = 0;
        std::map<pid_t, int> relays;  // helper pid -> signal
        for (;;) {
            pid_t w = ::waitpid(g_child, &st, WNOHANG);
            if (w == g_child) break;
            if (w < 0 && errno != EINTR) SVM_THROW_ERRNO("waitpid");
            struct pollfd pfd {g_signal_pipe[0], POLLIN, 0};
            ::poll(&pfd, 1, 200);
            unsigned char b;
            while (::read(g_signal_pipe[0], &b, 1) == 1) {
                pid_t h = relay_signal(p, self, c.pid_file, b);
                if (h > 0) relays[h] = b;
                svm::log::debug("signal " + std::to_string(b) + " relayed into the guest");
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
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        // --vm-save: the epilog copies the disk after the guest is stopped
        // (at once, no shutdown): the guest's file systems are synced now.
        if (batch && !p.save_path.empty() && svm::read_guest_state(p).phase == svm::GuestState::Phase::ready) {
            std::vector<std::string> sync_args = svm::ssh_argv(p, self, false);
            sync_args.push_back("--");
            sync_args.push_back("sync");
            svm::RunOptions so;
            for (char** e = environ; *e; ++e) so.env.push_back(*e);
            so.timeout_ms = 120000;
            svm::RunResult sr = svm::run(sync_args, so);
            if (sr.ok()) svm::log::info("the guest's disk is synced; the job's epilog saves it to " + p.save_path);
            else svm::log::warn("sync in the guest failed before --vm-save: " + svm::trim(sr.err));
        }
        if (rc == 255) {
            svm::GuestState now = svm::read_guest_state(p);
            if (now.phase != svm::GuestState::Phase::ready) {
                std::string why = now.ended() ? now.reason : "the guest is gone";
                svm::log::error(why);
                keep_console(p);
            } else {
                svm::log::error("lost the SSH connection to the guest on " + p.node);
            }
        }
        return rc;
    } catch (const svm::Error& e) {
        svm::log::error(e.chain());
        return 1;
    }
}
