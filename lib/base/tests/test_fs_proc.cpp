#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
Spawned spawned(const std::vector<std::string>& argv, svm::SpawnOptions o) {
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    o.stdout_fd = out[1];
    o.stderr_fd = err[1];
    pid_t pid = svm::spawn(argv, o);
    ::close(out[1]);
    ::close(err[1]);
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

TEST_CASE("shell_quote survives single quotes") {
    auto r = svm::run({"/bin/sh", "-c", "printf %s " + svm::shell_quote("it's $HOME `x`")});
    CHECK(r.out == "it's $HOME `x`");
}

#include "cgroup.hpp"

TEST_CASE("the job level of a Slurm cgroup path", "[cgroup]") {
    CHECK(svm::job_level_path("/slurm_node1/uid_2001/job_42/step_extern/task_0") == "/slurm_node1/uid_2001/job_42");
    CHECK(svm::job_level_path("/slurm/uid_1/job_7/step_extern") == "/slurm/uid_1/job_7");
    CHECK(svm::job_level_path("/slurm/uid_1/job_7") == "/slurm/uid_1/job_7");
    CHECK(svm::job_level_path("/slurm/uid_1/job_x/step_0") == "/slurm/uid_1/job_x/step_0");
    CHECK(svm::job_level_path("/user.slice") == "/user.slice");
}

TEST_CASE("remove_job_cgroups removes only the job's empty directories, deepest first", "[cgroup]") {
    std::string root = svm::trim(svm::run_checked({"mktemp", "-d", "/tmp/svm-cg.XXXXXX"}));
    for (const char* d : {"memory/slurm_n1/uid_1/job_42/step_extern/task_0", "freezer/slurm_n1/uid_1/job_42",
                          "memory/slurm_n1/uid_1/job_420/step_0", "cpuset/slurm_n1/uid_1/job_43"})
        svm::mkdir_p(root + "/" + d);
    svm::write_file_atomic(root + "/cpuset/slurm_n1/uid_1/job_43/keep", "");  // a non-empty one stays
    CHECK(svm::remove_job_cgroups(42, root) == 4);
    CHECK_FALSE(svm::path_exists(root + "/memory/slurm_n1/uid_1/job_42"));
    CHECK_FALSE(svm::path_exists(root + "/freezer/slurm_n1/uid_1/job_42"));
    CHECK(svm::path_exists(root + "/memory/slurm_n1/uid_1/job_420/step_0"));
    CHECK(svm::remove_job_cgroups(43, root) == 0);
    CHECK(svm::path_exists(root + "/cpuset/slurm_n1/uid_1/job_43"));
    svm::remove_tree(root);
}
