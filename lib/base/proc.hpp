// Running helper programs: optionally as another user (never root's rights on
// a user's path), with resource limits and a timeout, output captured.
#pragma once
#include <sys/types.h>
#include <csignal>

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace svm {

struct Credentials {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // supplementary groups; empty = just gid
    std::string user;           // for initgroups when groups is empty and user is set
};

// Looks the user up in the passwd database and fills uid, gid and groups.
Credentials credentials_for(uid_t uid, std::optional<gid_t> gid = std::nullopt);

struct RunOptions {
    std::optional<Credentials> as;                // drop to this user before exec
    std::vector<std::string> env;                 // full environment; empty = minimal PATH only
    std::string stdin_data;                       // written to the child's stdin
    int timeout_ms = 60000;                       // killed (SIGKILL) after this
    std::optional<unsigned long> limit_cpu_s;     // RLIMIT_CPU
    std::optional<unsigned long> limit_as_bytes;  // RLIMIT_AS
    std::string cwd = "/";
    bool new_session = false;
    // Descriptors (each > 2) the command inherits at the same number: their
    // close-on-exec flag is cleared in the child only.
    std::vector<int> keep_fds;
    int netns_fd = -1;  // a network namespace the command runs in (setns); -1: this thread's
    // Stdout and stderr each kept up to this many bytes (0: no bound); past
    // it the command is killed and RunResult::truncated set.
    size_t max_output_bytes = 0;
};

struct RunResult {
    int status = -1;  // exit status, or 128+signal
    bool timed_out = false;
    bool truncated = false;  // killed for writing more than max_output_bytes
    std::string out;
    std::string err;
    bool ok() const { return status == 0 && !timed_out && !truncated; }
};

RunResult run(const std::vector<std::string>& argv, const RunOptions& opts = {});
// Like run, but throws svm::Error with the command's stderr when it fails.
std::string run_checked(const std::vector<std::string>& argv, const RunOptions& opts = {});

// Forks and runs `fn` in the child; the child's return value (0..255) and
// its stdout/stderr are returned, an exception's message on its stderr. The
// callback may write a result to the given fd (a pipe read back into
// RunResult::out). For single-threaded callers only (the child runs C++ code
// and allocates): the prolog, the epilog and the admin command use it.
RunResult run_function(const std::function<int(int out_fd)>& fn, int timeout_ms = 60000);
// The same with the child dropped to `as` first.
RunResult run_function_as(const Credentials& as, const std::function<int(int out_fd)>& fn, int timeout_ms = 60000);

// The one way this project starts a program (run, spawn and spawn_detached
// all come here): everything is prepared before fork, and between fork and
// exec the child makes only async-signal-safe calls (it allocates nothing),
// so threaded callers may use it. Signal dispositions and the mask are
// inherited except as listed (exec resets handled signals to their default).
// The child sets up, in this order: signals, session, descriptors, limits,
// identity (user namespace), directory (entered as that identity), exec.
struct SpawnOptions {
    static constexpr int kNull = -2;              // a descriptor: /dev/null
    std::optional<std::vector<std::string>> env;  // the full environment; nullopt: this process's
    std::string cwd;                              // empty: this process's
    // When cwd cannot be entered: this note on stderr, and the child stays
    // where it is; empty: the child fails (below).
    std::string cwd_missing_note;
    int stdin_fd = -1;  // dup2'd to 0, 1, 2 (kNull: /dev/null); -1: inherited
    int stdout_fd = -1;
    int stderr_fd = -1;
    bool default_all_signals = false;  // every signal SIG_DFL first
    std::vector<int> ignored_signals;  // SIG_IGN in the child
    std::vector<int> default_signals;  // SIG_DFL in the child
    bool clear_signal_mask = false;    // no signal blocked
    bool new_session = false;          // setsid
    bool close_other_fds = false;      // nothing above 2 is inherited
    // Descriptors (each > 2) the command inherits at the same number: their
    // close-on-exec flag is cleared in the child only.
    std::vector<int> keep_fds;
    // A network namespace the child enters (setns) before anything else of
    // its identity changes; -1: the calling thread's.
    int netns_fd = -1;
    std::optional<unsigned long> limit_cpu_s;     // RLIMIT_CPU
    std::optional<unsigned long> limit_as_bytes;  // RLIMIT_AS
    // RLIMIT_NOFILE; where the hard limit may not be raised, up to it.
    std::optional<unsigned long> limit_nofile;
    std::optional<Credentials> as;  // groups, gid and uid set to these
    // A user namespace of the child's own, made while it is still root (after
    // the groups and gid of `as` are set), so that root owns it and the user
    // cannot ptrace what runs in it. The child writes a byte on ready_fd and
    // waits for one on mapped_fd (the caller writes the namespace's uid_map
    // and gid_map in between, or kills it), then becomes uid `inside` there
    // instead of as->uid, every capability of the namespace kept across exec
    // as an ambient one. Needs `as`.
    struct UserNamespace {
        uid_t inside = 0;
        int ready_fd = -1;
        int mapped_fd = -1;
    };
    std::optional<UserNamespace> user_namespace;
    bool search_path = true;  // argv[0] looked up in PATH when it has no slash
    // What is executed when argv[0] is only the name the process shows;
    // empty: argv[0].
    std::string program;
    // When a step above or exec fails: the child writes this followed by the
    // step and the reason on stderr (nothing when empty) and exits with
    // exec_failure_status.
    std::string exec_error;
    int exec_failure_status = 127;
};
// Starts argv; returns the child's pid, for the caller to wait for. Throws
// when fork fails.
pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& opts);

// Drops privileges of the current process for good (setgroups, setresgid, setresuid).
void drop_privileges(const Credentials& as);

// Starts argv[0] (an absolute path) detached: a session of its own, not this
// process's child (double fork), default signal dispositions, stdin from
// /dev/null, stdout and stderr appended to `log` (created 0600, not through a
// link), no other descriptor, this process's environment. Returns once it is
// started; exec failures end up in the log.
void spawn_detached(const std::vector<std::string>& argv, const std::string& log);

std::string shell_quote(const std::string& s);

// "NAME=value" for each of `names` set in this process's environment (to pass
// e.g. PATH and SLURM_CONF on to a Slurm command run with RunOptions::env).
std::vector<std::string> inherited_env(std::initializer_list<const char*> names);

// The value of NAME in an environment given as "NAME=value" strings; nullopt
// when it is not set.
std::optional<std::string> env_entry(const std::vector<std::string>& env, const std::string& name);

// A process recorded in a pid file, identified by `expect`: every
// tab-separated part of it must be in its command line (a pid file may outlive
// its process, and the pid may now be another's). Zombies do not count.
bool process_recorded_alive(const std::string& pid_file, const std::string& expect);
// The pid recorded in a pid file; 0 when there is none (or it is not a pid).
pid_t recorded_pid(const std::string& pid_file);
// Fields of /proc/<pid>/stat; nullopt when the process is gone or the file
// cannot be read or parsed.
struct ProcStat {
    std::string comm;  // the command name (15 characters at most)
    char state = 0;    // 'R', 'S', ..., 'Z' for a zombie
    pid_t ppid = 0;
    pid_t session = 0;
};
std::optional<ProcStat> proc_stat(pid_t pid);
// Makes this process the subreaper of what its children leave behind (a
// daemon they start becomes its child, not init's) and starts a thread that
// every 100 ms reaps those of its exited children that are daemons of that
// kind: their command names start with `comm_prefix`, and they run in a
// session other than this process's (a daemon leaves its parent's session;
// a child this process started and waits for itself, as libvirt waits for
// the QEMU it runs with -daemonize, stays in it). Any other child is left to
// whoever waits for it. For a process whose library daemonizes programs and
// then waits to see them gone (libvirt and QEMU): an init that reaps late (a
// container's) would otherwise keep them zombies, which libvirt takes for
// alive.
void adopt_orphans_and_reap(const std::string& comm_prefix);
// One pass of that thread's work, now.
void reap_exited_children(const std::string& comm_prefix);
// Waits (at most timeout_ms) until pid no longer exists at all, zombie
// included: once its parent, or init, has reaped it.
void wait_until_reaped(pid_t pid, int timeout_ms);
// Stops such a process if it still runs: `sig` (SIGTERM; the keeper saves its
// guest on SIGUSR2), then SIGKILL after grace_ms (0: at once); returns when
// it is gone, throws if SIGKILL did not end it.
void stop_recorded_process(const std::string& pid_file, const std::string& expect, int grace_ms, int sig = SIGTERM);

}  // namespace svm
