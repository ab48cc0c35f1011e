#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <sstream>

#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"
#include "support.hpp"

TEST_CASE("atomic write replaces content and sets mode") {
    svm::test::TempDir tmp("svm-fs");
    std::string dir = tmp.path();
    std::string f = svm::path_join(dir, "a.json");
    svm::write_file_atomic(f, "one", 0600);
    svm::write_file_atomic(f, "two", 0640);
    CHECK(svm::read_file(f) == "two");
    CHECK(svm::list_dir(dir) == std::vector<std::string>{"a.json"});
    svm::remove_tree(dir);
    CHECK_FALSE(svm::path_exists(dir));
    svm::remove_tree(dir);  // missing is fine
}

TEST_CASE("mkdir_p makes the missing parents 0755 and only the directory itself private", "[fs]") {
    svm::test::TempDir tmp("svm-fs");
    std::string top = tmp.path();
    mode_t old = ::umask(0);
    svm::mkdir_p(top + "/shared/node1/log/", 0750);
    ::umask(old);
    struct stat st;
    REQUIRE(::stat((top + "/shared").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    REQUIRE(::stat((top + "/shared/node1").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    REQUIRE(::stat((top + "/shared/node1/log").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0750);
}

TEST_CASE("connect_unix reaches a listening socket, and says why when it cannot", "[fs]") {
    svm::test::TempDir d("svm-sock");
    std::string path = d.path() + "/s.sock";
    svm::UniqueFd l = svm::test::listening_socket(path);
    svm::UniqueFd c(svm::connect_unix(path));
    CHECK(c);
    CHECK((::fcntl(c.get(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(svm::connect_unix(d.path() + "/none.sock") == -1);
    CHECK(errno == ENOENT);
    CHECK(svm::connect_unix("/" + std::string(200, 'x')) == -1);
    CHECK(errno == ENAMETOOLONG);
}

TEST_CASE("read_file names the file in its error") {
    try {
        svm::read_file("/nonexistent/x");
        FAIL("no error");
    } catch (const svm::Error& e) {
        CHECK(std::string(e.what()).find("/nonexistent/x") != std::string::npos);
    }
}

TEST_CASE("run captures output, status and stdin, and times out") {
    auto r = svm::run({"/bin/sh", "-c", "cat; echo err >&2; exit 3"}, {.stdin_data = "hello"});
    CHECK(r.status == 3);
    CHECK(r.out == "hello");
    CHECK(r.err == "err\n");
    svm::RunOptions o;
    o.timeout_ms = 200;
    auto t = svm::run({"/bin/sleep", "5"}, o);
    CHECK(t.timed_out);
    CHECK_THROWS_AS(svm::run_checked({"/bin/false"}), svm::Error);
}

namespace {
// Runs `argv` through spawn with stdout and stderr on pipes; returns
// {status, out, err} once it exits.
struct Spawned {
    int status = -1;
    std::string out, err;
};
std::string drain(int fd) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return s;
}
// `started`, when given, is called with the child's pid before its output is read.
Spawned spawned(const std::vector<std::string>& argv, svm::SpawnOptions o,
                const std::function<void(pid_t)>& started = {}) {
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    o.stdout_fd = out[1];
    o.stderr_fd = err[1];
    pid_t pid = svm::spawn(argv, o);
    ::close(out[1]);
    ::close(err[1]);
    if (started) started(pid);
    Spawned r;
    r.out = drain(out[0]);
    r.err = drain(err[0]);
    int st = 0;
    REQUIRE(::waitpid(pid, &st, 0) == pid);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}
}  // namespace

TEST_CASE("spawn: environment, directory, descriptors, signals and exec failure as asked", "[proc]") {
    svm::test::TempDir tmp("svm-spawn");
    svm::SpawnOptions o;
    o.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "ONLY=this"};
    o.cwd = tmp.path();
    o.stdin_fd = svm::SpawnOptions::kNull;
    o.ignored_signals = {SIGUSR1};
    // Found through PATH; the environment is the one given; stdin is /dev/null.
    ::setenv("SVM_SPAWN_TEST_INHERITED", "1", 1);
    auto r =
        spawned({"sh", "-c", "echo $ONLY ${SVM_SPAWN_TEST_INHERITED:-none}; pwd; cat; kill -USR1 $$; echo alive"}, o);
    ::unsetenv("SVM_SPAWN_TEST_INHERITED");
    CHECK(r.status == 0);
    CHECK(r.out == "this none\n" + tmp.path() + "\nalive\n");

    // A directory that cannot be entered: the note, and the child runs where it was.
    o.cwd = tmp.path() + "/missing";
    o.cwd_missing_note = "no such directory here\n";
    r = spawned({"sh", "-c", "echo ran"}, o);
    CHECK(r.status == 0);
    CHECK(r.out == "ran\n");
    CHECK(r.err == "no such directory here\n");
    // Without a note the child fails instead, saying why.
    o.cwd_missing_note.clear();
    o.exec_error = "test: ";
    r = spawned({"sh", "-c", "echo ran"}, o);
    CHECK(r.status == 127);
    CHECK(r.out.empty());
    CHECK(r.err == "test: chdir: No such file or directory\n");

    // exec fails: the sentence and the status asked for.
    o.cwd.clear();
    o.exec_error = "slurm-vm: cannot run it: ";
    o.exec_failure_status = 255;
    r = spawned({"no-such-program-anywhere"}, o);
    CHECK(r.status == 255);
    CHECK(r.err == "slurm-vm: cannot run it: No such file or directory\n");

    // A signal set back to its default ends the child.
    o.ignored_signals.clear();
    o.default_signals = {SIGUSR1};
    r = spawned({"sh", "-c", "kill -USR1 $$; echo alive"}, o);
    CHECK(r.status == 128 + SIGUSR1);
}

TEST_CASE("run: as another user, with limits, a session and a kept descriptor", "[proc]") {
    REQUIRE(::geteuid() == 0);  // the unit tests run as root (they change identity)
    svm::test::TempDir tmp("svm-run-as");
    std::string mine = tmp.path() + "/root-only";
    REQUIRE(::mkdir(mine.c_str(), 0700) == 0);
    svm::RunOptions o;
    o.as = svm::Credentials{65534, 65534, {65534}, ""};
    o.limit_cpu_s = 7;
    o.limit_as_bytes = 1UL << 30;
    o.new_session = true;
    int keep = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(keep > 2);
    o.keep_fds = {keep};
    std::string fd = std::to_string(keep);
    auto r = svm::run({"/bin/sh", "-c",
                       "id -u; id -g; id -G; ulimit -t; ulimit -v; ps -o sid= -p $$ | tr -d ' '; echo $$; "
                       "test -e /proc/self/fd/" +
                           fd + " && echo kept"},
                      o);
    ::close(keep);
    CHECK(r.status == 0);
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    REQUIRE(lines.size() >= 8);
    CHECK(std::vector<std::string>(lines.begin(), lines.begin() + 5) ==
          std::vector<std::string>{"65534", "65534", "65534", "7", "1048576"});
    CHECK(lines[5] == lines[6]);  // the leader of a session of its own
    CHECK(lines[7] == "kept");
    // The directory is entered as the user: root's own is refused, and the
    // child says which step failed.
    o.cwd = mine;
    o.keep_fds.clear();
    r = svm::run({"/bin/true"}, o);
    CHECK(r.status == 127);
    CHECK(r.err == "/bin/true: chdir: Permission denied\n");
    // A bare name is looked up in PATH; a missing program says so.
    o.cwd = "/";
    r = svm::run({"no-such-program-anywhere"}, o);
    CHECK(r.status == 127);
    CHECK(r.err == "no-such-program-anywhere: No such file or directory\n");
}

TEST_CASE("run: in another network namespace, the caller's own left as it was", "[proc]") {
    REQUIRE(::geteuid() == 0);
    const std::string name = "svmtest-run-" + std::to_string(::getpid());
    REQUIRE(svm::run({"ip", "netns", "add", name}).ok());
    struct Removed {
        std::string n;
        ~Removed() { svm::run({"ip", "netns", "del", n}); }
    } removed{name};
    svm::UniqueFd ns(::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(ns);
    struct stat want;
    REQUIRE(::fstat(ns.get(), &want) == 0);
    svm::RunOptions o;
    o.netns_fd = ns.get();
    auto r = svm::run({"stat", "-L", "-c", "%i", "/proc/self/ns/net"}, o);
    REQUIRE(r.ok());
    CHECK(svm::trim(r.out) == std::to_string(want.st_ino));
    auto mine = svm::run({"stat", "-L", "-c", "%i", "/proc/self/ns/net"});
    CHECK(svm::trim(mine.out) != std::to_string(want.st_ino));
    // A descriptor that is no namespace: the child says which step failed.
    svm::UniqueFd not_ns(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    o.netns_fd = not_ns.get();
    r = svm::run({"/bin/true"}, o);
    CHECK(r.status == 127);
    CHECK(r.err == "/bin/true: setns: Invalid argument\n");
}

TEST_CASE("spawn: in a user namespace that root owns and the caller maps, with its capabilities", "[proc]") {
    REQUIRE(::geteuid() == 0);
    int ready[2], mapped[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(mapped, O_CLOEXEC) == 0);
    int keep = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(keep > 2);
    svm::SpawnOptions o;
    o.program = "/bin/sh";  // argv[0] is only a name
    o.as = svm::Credentials{65534, 65534, {65534}, ""};
    o.user_namespace = svm::SpawnOptions::UserNamespace{0, ready[1], mapped[0]};
    o.limit_nofile = 4096;
    o.close_other_fds = true;
    o.keep_fds = {keep};
    std::string script =
        "echo $0; tr -s ' ' </proc/self/uid_map; tr -s ' ' </proc/self/gid_map; id -u; ulimit -n; "
        "sed -n 's/^CapAmb:\\t//p' /proc/self/status; test -e /proc/self/fd/" +
        std::to_string(keep) + " && echo kept; test -e /proc/self/fd/" + std::to_string(ready[1]) + " || echo closed";
    auto map = [](pid_t pid, const char* which) {
        std::string path = "/proc/" + std::to_string(pid) + "/" + which, line = "0 65534 1\n";
        svm::UniqueFd f(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
        REQUIRE(f);
        REQUIRE(::write(f.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size()));
    };
    Spawned r = spawned({"svm-test-mark", "-c", script}, o, [&](pid_t pid) {
        ::close(ready[1]);
        ::close(mapped[0]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);  // in its namespace, not mapped yet
        map(pid, "uid_map");
        map(pid, "gid_map");
        REQUIRE(::write(mapped[1], &c, 1) == 1);
    });
    ::close(ready[0]);
    ::close(mapped[1]);
    INFO(r.err);
    CHECK(r.status == 0);
    // Root of its namespace, which maps 0 to nobody; every capability there.
    CHECK(r.out == "svm-test-mark\n 0 65534 1\n 0 65534 1\n0\n4096\n000001ffffffffff\nkept\nclosed\n");

    // Until it is mapped, the child waits, unmapped, without running the
    // program; the caller that gives up kills it (as start_virtiofsd does).
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(mapped, O_CLOEXEC) == 0);
    o.user_namespace = svm::SpawnOptions::UserNamespace{0, ready[1], mapped[0]};
    std::string comm, uid_map = "?";
    r = spawned({"svm-test-mark", "-c", "echo ran"}, o, [&](pid_t pid) {
        ::close(ready[1]);
        ::close(mapped[0]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        ::usleep(100000);
        comm = svm::read_file("/proc/" + std::to_string(pid) + "/comm");
        uid_map = svm::read_file("/proc/" + std::to_string(pid) + "/uid_map");
        ::kill(pid, SIGKILL);
        ::close(mapped[1]);
    });
    ::close(ready[0]);
    ::close(keep);
    CHECK(comm != "sh\n");
    CHECK(uid_map.empty());
    CHECK(r.status == 128 + SIGKILL);
    CHECK(r.out.empty());
    // Without an identity there is no namespace to own.
    o.as.reset();
    CHECK_THROWS_AS(svm::spawn({"/bin/true"}, o), svm::Error);
}

TEST_CASE("spawn_detached: its own session, adopted, output to the log and nothing else inherited", "[proc]") {
    svm::test::TempDir tmp("svm-detached");
    std::string log = tmp.path() + "/log", done = tmp.path() + "/done";
    int open_fd = ::open("/dev/null", O_RDONLY);  // not close-on-exec: must still not reach it
    REQUIRE(open_fd > 2);
    std::string script =
        "echo sid=$(ps -o sid= -p $$ | tr -d ' ') pid=$$ ppid=$PPID; read x || echo stdin-empty; "
        "test -e /proc/self/fd/" +
        std::to_string(open_fd) + " && echo leaked; echo err >&2; touch " + done;
    svm::spawn_detached({"/bin/sh", "-c", script}, log);
    ::close(open_fd);
    for (int i = 0; i < 500 && !svm::path_exists(done); ++i) ::usleep(10000);
    REQUIRE(svm::path_exists(done));
    std::string out = svm::read_file(log);
    auto field = [&](const std::string& k) {
        size_t b = out.find(k + "=") + k.size() + 1;
        return out.substr(b, out.find_first_of(" \n", b) - b);
    };
    // A session of its own (not its leader: it can never get a terminal).
    CHECK(field("sid") != std::to_string(::getsid(0)));
    CHECK(field("sid") != field("pid"));
    CHECK(field("ppid") != std::to_string(::getpid()));
    CHECK(out.find("stdin-empty\n") != std::string::npos);
    CHECK(out.find("leaked") == std::string::npos);
    CHECK(out.find("err\n") != std::string::npos);
    struct stat st;
    REQUIRE(::stat(log.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    // A program that cannot run: its failure is in the log; a relative path is refused.
    svm::spawn_detached({tmp.path() + "/missing"}, log);
    for (int i = 0; i < 500 && svm::read_file(log).find("missing: ") == std::string::npos; ++i) ::usleep(10000);
    CHECK(svm::read_file(log).find(tmp.path() + "/missing: No such file or directory\n") != std::string::npos);
    CHECK_THROWS_AS(svm::spawn_detached({"sh"}, log), svm::Error);
    // The log is not followed through a link.
    std::string link = tmp.path() + "/link";
    REQUIRE(::symlink(log.c_str(), link.c_str()) == 0);
    CHECK_THROWS_AS(svm::spawn_detached({"/bin/true"}, link), svm::Error);
}

TEST_CASE("reap_exited_children reaps exited daemons of that name only", "[proc]") {
    // Three children that exit at once: one named as asked (the name of the
    // file it runs) in a session of its own (a daemon), one named so in this
    // process's session (a child someone here waits for), one of another
    // name in a session of its own.
    svm::test::TempDir tmp("svm-reap");
    std::string prog = tmp.path() + "/reap-me-please";
    svm::write_file_atomic(prog, svm::read_file("/bin/true"), 0755);
    svm::SpawnOptions daemon;
    daemon.new_session = true;
    pid_t reaped = svm::spawn({prog}, daemon);
    pid_t waited_for = svm::spawn({prog}, {});
    pid_t other = svm::spawn({"/bin/true"}, daemon);
    auto zombie = [](pid_t pid) {
        auto ps = svm::proc_stat(pid);
        return ps && ps->state == 'Z';
    };
    for (int i = 0; i < 500 && !(zombie(reaped) && zombie(waited_for) && zombie(other)); ++i) ::usleep(10000);
    REQUIRE(zombie(reaped));
    REQUIRE(zombie(waited_for));
    REQUIRE(zombie(other));
    svm::reap_exited_children("reap-me");
    CHECK(::waitpid(reaped, nullptr, WNOHANG) == -1);  // gone: reaped by the pass
    CHECK(errno == ECHILD);
    CHECK(zombie(waited_for));  // left to whoever waits for them
    CHECK(zombie(other));
    CHECK(::waitpid(waited_for, nullptr, 0) == waited_for);
    CHECK(::waitpid(other, nullptr, 0) == other);
}

TEST_CASE("shell_quote survives single quotes") {
    auto r = svm::run({"/bin/sh", "-c", "printf %s " + svm::shell_quote("it's $HOME `x`")});
    CHECK(r.out == "it's $HOME `x`");
}
