// The guest's agent (seed.hpp's agent_script, run for real by /bin/sh) and
// the host's side of its protocol (guest_agent.hpp), talking to each other.
// The agent's three virtio-serial ports are stood in for by raw ptys:
// character devices that the agent opens by path, as it opens the ports. The
// command is the real remote command of a batch script (guest_exec.hpp), run
// by the real runuser as root (root's own PAM session: the test needs root).
#include "catch.hpp"

#include <fcntl.h>
#include <pty.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <functional>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_agent.hpp"
#include "guest_exec.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace {

// One port: the host's end (the pty's master) and the device path the
// agent opens (its slave, in raw mode: no echo, no newline translation).
// The test holds the slave open too until the guest "dies" (die()), as QEMU
// holds a port: what the host sends before the agent opens it waits there.
struct Port {
    svm::UniqueFd host;
    std::string device;
    svm::UniqueFd held;
};

Port make_port() {
    int m = -1, s = -1;
    char name[128];
    if (::openpty(&m, &s, name, nullptr, nullptr) != 0) SVM_THROW_ERRNO("openpty");
    struct termios t;
    ::tcgetattr(s, &t);
    ::cfmakeraw(&t);
    ::tcsetattr(s, TCSANOW, &t);
    ::fcntl(m, F_SETFD, FD_CLOEXEC);
    ::fcntl(s, F_SETFD, FD_CLOEXEC);
    return Port{svm::UniqueFd(m), name, svm::UniqueFd(s)};
}

std::string root_name() {
    struct passwd* pw = ::getpwuid(0);
    return pw ? pw->pw_name : "root";
}

// The agent as the seed starts it, in a session of its own.
struct Agent {
    svm::test::TempDir dir{"svm-agent"};
    Port ports[3] = {make_port(), make_port(), make_port()};
    pid_t pid = -1;
    svm::UniqueFd started;
    // The lines on the FIFO "started" so far.
    std::string started_lines() const {
        char buf[256];
        ssize_t n = ::read(started.get(), buf, sizeof buf);
        return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    }
    Agent() {
        REQUIRE(svm::run({"mkfifo", "-m", "0666", dir.path() + "/srun", dir.path() + "/started"}).ok());
        // Held open as the seed's script holds it (sshd's daemon waits for a line).
        started = svm::UniqueFd(::open((dir.path() + "/started").c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
        svm::SpawnOptions o;
        o.new_session = true;
        o.stdin_fd = o.stdout_fd = o.stderr_fd = svm::SpawnOptions::kNull;
        o.env = std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin"};  // as the seed starts it
        pid = svm::spawn({"/bin/sh", "-c", svm::agent_script(), "svm-agent", ports[0].device, ports[1].device,
                          ports[2].device, root_name(), dir.path(), "/usr/sbin/runuser", "/usr/bin/setsid"},
                         o);
    }
    ~Agent() {
        if (pid <= 0) return;
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
    // A tick for GuestAgent::wait that ends the agent after 30 s: a test
    // that would hang fails instead.
    std::function<void()> bounded(std::function<void()> then = {}) {
        long deadline = svm::now_ms() + 30000;
        return [this, deadline, then] {
            if (svm::now_ms() > deadline) die();
            if (then) then();
        };
    }
    // The guest dies: the agent is killed and the ports close.
    void die() {
        if (pid > 0) ::kill(-pid, SIGKILL);
        for (auto& p : ports) p.held = svm::UniqueFd();
    }
    svm::GuestAgent host() {
        std::vector<svm::UniqueFd> fds;
        for (auto& p : ports) fds.push_back(std::move(p.host));
        return svm::GuestAgent(std::move(fds));
    }
    // Another host side on the same ports, while the first holds them (a
    // guest restored from a checkpoint meets a new one).
    svm::GuestAgent another_host(const svm::GuestAgent& first) const {
        std::vector<svm::UniqueFd> fds;
        for (int fd : first.channel_fds()) fds.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
        return svm::GuestAgent(std::move(fds));
    }
};

// The batch script's command, as slurm-vm-exec sends it: it waits for the
// flag "ready" in `flags` (made here already, with the FIFO).
svm::GuestCommand batch_command(const std::string& flags, const std::string& cwd) {
    REQUIRE(svm::run({"/bin/sh", "-c", "mkfifo -m 0666 " + flags + "/go && : >" + flags + "/ready"}).ok());
    svm::GuestCommand c;
    c.argv = {"/home/u/job.sh", "first arg"};
    c.script_on_stdin = true;
    c.wait_for_flags_in = flags;
    c.cwd = cwd;
    c.pid_file = cwd + "/task.pid";
    return c;
}

struct Captured {
    svm::test::TempDir dir{"svm-agent-out"};
    svm::UniqueFd out{::open((dir.path() + "/out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)};
    svm::UniqueFd err{::open((dir.path() + "/err").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)};
    std::string out_text() const { return svm::read_file(dir.path() + "/out"); }
    std::string err_text() const { return svm::read_file(dir.path() + "/err"); }
};

// The agent given a batch script by the host side, as slurm-vm-exec gives
// it, with the task's output captured; the task's session is ended with it.
struct Batch {
    Agent a;
    svm::test::TempDir work{"svm-agent-wd"};
    svm::GuestCommand c = batch_command(a.dir.path(), work.path());
    svm::GuestAgent host = a.host();
    Captured cap;
    ~Batch() {
        std::string task;
        if (svm::read_file_if_exists(c.pid_file, task) && !svm::trim(task).empty()) ::kill(-std::stoi(task), SIGKILL);
    }
    void start(const std::string& script) { host.start(svm::remote_shell_command(c), script, c.pid_file); }
    // As slurm-vm-exec sends a script of usual size: in the command itself.
    void start_inline(const std::string& script) {
        c.script = script;
        host.start(svm::remote_shell_command(c), "", c.pid_file);
    }
    std::optional<int> wait(std::function<void()> tick = {}, int signal_fd = -1) {
        return host.wait(signal_fd, cap.out.get(), cap.err.get(), a.bounded(std::move(tick)));
    }
};

// A TERM for the host side to carry once the task has started (its first
// line, "started", is out), through a pipe as slurm-vm-exec's signal pipe.
struct TermWhenStarted {
    int fds[2] = {-1, -1};
    bool sent = false;
    TermWhenStarted() { REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0); }
    ~TermWhenStarted() {
        ::close(fds[0]);
        ::close(fds[1]);
    }
    TermWhenStarted(const TermWhenStarted&) = delete;
    TermWhenStarted& operator=(const TermWhenStarted&) = delete;
    std::function<void()> tick(const Captured& cap) {
        return [this, &cap] {
            if (sent || cap.out_text().find("started\n") == std::string::npos) return;
            unsigned char s = SIGTERM;
            sent = ::write(fds[1], &s, 1) == 1;
        };
    }
};

void require_root() {
    INFO("the agent runs its command with runuser, which needs root");
    REQUIRE(::geteuid() == 0);
}

}  // namespace

TEST_CASE("the guest's agent: output until the nonce, split anywhere", "[agent]") {
    const std::string nonce = "0123456789abcdef";
    const std::string stream = "line 1\n0123 not it\nlast" + nonce + "after the end";
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
        svm::UntilNonce f(nonce);
        std::string out = f.feed(stream.data(), cut);
        out += f.feed(stream.data() + cut, stream.size() - cut);
        INFO("cut at " << cut);
        CHECK(out == "line 1\n0123 not it\nlast");
        CHECK(f.done());
    }
    // Output is passed on as it comes: only an end that could start the
    // nonce waits for what follows.
    svm::UntilNonce g(nonce);
    CHECK(g.feed("progress 10%\n", 13) == "progress 10%\n");
    CHECK(g.feed("no end 01234", 12) == "no end ");
    CHECK(g.feed("5x", 2) == "012345x");
    CHECK(g.feed("0", 1).empty());
    CHECK(g.flush() == "0");
    CHECK(!g.done());
}

TEST_CASE("the guest's agent: header and status lines", "[agent]") {
    CHECK(svm::agent_header("ab12", 10, 0, "/tmp/.p") == "SVM-AGENT-1 ab12 10 0 /tmp/.p\n");
    CHECK(svm::agent_status("exit 0", "exit") == 0);
    CHECK(svm::agent_status("exit 143", "exit") == 143);
    CHECK(svm::agent_status("exit 999", "exit") == 255);
    CHECK(!svm::agent_status("exit", "exit"));
    CHECK(!svm::agent_status("exit -1", "exit"));
    CHECK(!svm::agent_status("exit 1 2", "exit"));
    CHECK(!svm::agent_status("synced 0", "exit"));
    CHECK(svm::agent_status("synced 0", "synced") == 0);
    std::string n = svm::agent_nonce();
    CHECK(n.size() == 32);
    CHECK(n.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(n != svm::agent_nonce());
}

TEST_CASE("the guest's agent runs the batch script as the user: its output, stderr, status, then sync", "[agent]") {
    require_root();
    Batch b;
    b.start("#!/bin/sh\necho \"out $1 in $(pwd) as $(id -un), $SHELL\"\necho to stderr >&2\nexit 3\n");
    std::optional<int> st = b.wait();
    REQUIRE(st);
    CHECK(*st == 3);
    struct passwd* pw = ::getpwuid(0);
    CHECK(b.cap.out_text() == "out first arg in " + b.work.path() + " as " + root_name() + ", " + pw->pw_shell + "\n");
    CHECK(b.cap.err_text() == "to stderr\n");
    // The command said it started the task (the guest's sshd daemon waits
    // for that), and the agent that it ended.
    CHECK(b.a.started_lines() == "started\nended\n");
    CHECK(b.host.sync(20000) == 0);
    // The script's stdin, kept by the agent in its directory, is gone.
    CHECK(!svm::path_exists(b.a.dir.path() + "/stdin"));
}

TEST_CASE("the guest's agent runs a batch script written by the command itself, quotes and all", "[agent]") {
    require_root();
    Batch b;
    const std::string script =
        "#!/bin/sh\n# it's \"quoted\", with $HOME and \\backslashes\\ and `backticks`\n"
        "echo 'single' \"double $1\"\nsed -n 2p \"$0\"\nexit 5";  // no newline at the end
    b.start_inline(script);
    std::optional<int> st = b.wait();
    REQUIRE(st);
    CHECK(*st == 5);
    CHECK(b.cap.out_text() ==
          "single double first arg\n# it's \"quoted\", with $HOME and \\backslashes\\ and `backticks`\n");
    CHECK(b.cap.err_text().empty());
    CHECK(b.a.started_lines() == "started\nended\n");
    CHECK(!svm::path_exists(b.a.dir.path() + "/stdin"));  // none was sent
}

TEST_CASE("the guest's agent starts the script in a session of its own, with a login's few variables", "[agent]") {
    require_root();
    Batch b;
    // The names of its environment, the shell's own left out, then whether
    // it leads its session (signals reach its group).
    b.start(
        "#!/bin/sh\nenv | sed -n 's/=.*//p' | grep -vx 'PWD\\|OLDPWD\\|SHLVL\\|_' | sort | tr '\\n' ' '; echo\n"
        "[ \"$(ps -o sid= -p $$)\" -eq $$ ] && echo leads its session\n");
    std::optional<int> st = b.wait();
    INFO("stdout: " << b.cap.out_text() << "stderr: " << b.cap.err_text());
    REQUIRE(st == 0);
    // Run as root here (runuser sets USER and LOGNAME for other users only;
    // test_attack_agent checks the job's user's in a guest).
    CHECK(b.cap.out_text() == "HOME PATH SHELL \nleads its session\n");
    CHECK(b.cap.err_text().empty());
}

TEST_CASE("the guest's agent carries a signal to the task's process group", "[agent]") {
    require_root();
    Batch b;
    b.start(
        "#!/bin/sh\nsh -c 'trap \"echo child got TERM; exit 0\" TERM; while :; do sleep 0.05; done' &\n"
        "trap 'echo task got TERM; wait; exit 7' TERM\necho started\nwhile :; do sleep 0.05; done\n");
    TermWhenStarted term;
    std::optional<int> st = b.wait(term.tick(b.cap), term.fds[0]);
    REQUIRE(st);
    CHECK(term.sent);
    CHECK(*st == 7);
    std::string out = b.cap.out_text();
    CHECK(out.find("task got TERM\n") != std::string::npos);
    CHECK(out.find("child got TERM\n") != std::string::npos);
}

TEST_CASE("the guest's agent passes on the command's request for its srun relay", "[agent]") {
    require_root();
    Batch b;
    // What the guest's srun does when its port is not there yet.
    b.c.srun_port = 1;
    b.c.srun_wake = b.a.dir.path() + "/srun";
    b.start("#!/bin/sh\n{ echo srun 1<>\"$SLURM_VM_SRUN_WAKE\"; } 2>/dev/null\necho asked\nsleep 1\n");
    int asked_ticks = 0;
    std::optional<int> st = b.wait([&] { asked_ticks += b.host.srun_asked() ? 1 : 0; });
    REQUIRE(st);
    CHECK(*st == 0);
    CHECK(b.cap.out_text() == "asked\n");
    CHECK(b.host.srun_asked());
    CHECK(asked_ticks >= 1);
    // Without the request, nothing is asked.
    Batch quiet;
    quiet.start("#!/bin/sh\necho quiet\n");
    REQUIRE(quiet.wait() == 0);
    CHECK(!quiet.host.srun_asked());
}

TEST_CASE("the guest's agent: a guest that fails its set-up ends the script unrun, a lost guest is said", "[agent]") {
    require_root();
    {
        Batch b;
        ::unlink((b.a.dir.path() + "/ready").c_str());
        REQUIRE(svm::run({"/bin/sh", "-c", ": >" + b.a.dir.path() + "/failed"}).ok());
        b.start("#!/bin/sh\necho ran\n");
        CHECK(b.wait() == 255);
        CHECK(b.cap.out_text().empty());
        // The task never started: the agent's line alone lets sshd's daemon start.
        CHECK(b.a.started_lines() == "ended\n");
    }
    {
        // The guest dies while the script runs (its QEMU closes the ports).
        Batch b;
        b.start("#!/bin/sh\necho started\nexec sleep 60\n");
        long t0 = svm::now_ms();
        std::optional<int> st = b.wait([&] {
            if (b.cap.out_text() == "started\n") b.a.die();  // the agent, not the task's session
        });
        CHECK(!st);
        CHECK(svm::now_ms() - t0 < 15000);
    }
    {
        // A header the agent does not know: it runs nothing and leaves.
        Agent a;
        REQUIRE(::write(a.ports[0].host.get(), "HELLO 1 2 3\n", 12) == 12);
        int st = -1;
        for (int i = 0; i < 200 && ::waitpid(a.pid, &st, WNOHANG) != a.pid; ++i) ::usleep(25000);
        CHECK(WIFEXITED(st));
        CHECK(WEXITSTATUS(st) == 0);
        a.pid = -1;
    }
}

TEST_CASE("the guest's agent answers a new host side: idle before a command, its nonce during one", "[agent]") {
    require_root();
    Batch b;
    // Restored before its command came: it says so, then takes one.
    svm::GuestAgent first = b.a.another_host(b.host);
    CHECK(first.reattach(20000) == svm::GuestAgent::Reattached::idle);
    b.start("#!/bin/sh\necho one\nsleep 1\necho two >&2\nexit 5\n");
    // The host side that started it is gone (saved with the guest, say);
    // another takes over and relays the command's output and status.
    CHECK(first.reattach(20000) == svm::GuestAgent::Reattached::running);
    Captured cap;
    std::optional<int> st = first.wait(-1, cap.out.get(), cap.err.get(), b.a.bounded());
    REQUIRE(st);
    CHECK(*st == 5);
    CHECK(cap.out_text() == "one\n");
    CHECK(cap.err_text() == "two\n");
    // After its command, too: the status again.
    svm::GuestAgent& again = b.host;
    CHECK(again.reattach(20000) == svm::GuestAgent::Reattached::running);
}

TEST_CASE("the guest's agent: a TERM the host side does not carry lets go of the command", "[agent]") {
    require_root();
    Batch b;
    b.start("#!/bin/sh\ntrap 'echo got TERM; exit 9' TERM\necho started\nwhile :; do sleep 0.05; done\n");
    {
        TermWhenStarted term;
        REQUIRE(b.wait(term.tick(b.cap), term.fds[0]) == 9);
        CHECK(!b.host.detached());  // carried: the script ended with its trap
    }
    Batch kept;
    kept.start("#!/bin/sh\ntrap 'echo got TERM; exit 9' TERM\necho started\nwhile :; do sleep 0.05; done\n");
    TermWhenStarted term;
    std::optional<int> st = kept.host.wait(term.fds[0], kept.cap.out.get(), kept.cap.err.get(),
                                           kept.a.bounded(term.tick(kept.cap)), [](int s) { return s != SIGTERM; });
    CHECK(!st);
    CHECK(kept.host.detached());
    // The command goes on in the guest, untouched: a new host side finds it running.
    svm::GuestAgent next = kept.a.another_host(kept.host);
    CHECK(next.reattach(20000) == svm::GuestAgent::Reattached::running);
    CHECK(kept.cap.out_text().find("got TERM") == std::string::npos);
}
