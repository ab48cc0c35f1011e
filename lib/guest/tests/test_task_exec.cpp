// slurm-vm-exec's logic (lib/guest/task_exec.hpp): how the plugin's two ways of
// starting it are read, and what the guest is asked to run.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "catch.hpp"
#include "deadline.hpp"
#include "fs.hpp"
#include "proc.hpp"
#include "support.hpp"
#include "task_exec.hpp"

using V = std::vector<std::string>;

TEST_CASE("task_exec: prepended (Slurm 23.11+) and argv[0] replaced (22.05) give the same command", "[task_exec]") {
    auto a = svm::task_invocation({"/usr/libexec/slurm-vm/slurm-vm-exec", "./app", "-n", "4"},
                                  {"SLURM_VM_PLAN=/run/j/plan.json", "SLURM_VM_PREPENDED=1"}, "/home/u");
    REQUIRE(a);
    CHECK(a->argv == V{"./app", "-n", "4"});
    CHECK(a->plan_path == "/run/j/plan.json");
    CHECK(a->self == "/usr/libexec/slurm-vm/slurm-vm-exec");
    CHECK_FALSE(a->batch);
    CHECK(a->console_fd == -1);
    auto b =
        svm::task_invocation({"/usr/libexec/slurm-vm/slurm-vm-exec", "-n", "4"},
                             {"SLURM_VM_PLAN=/run/j/plan.json", "SLURM_VM_ARGV0=./app", "SLURM_VM_BATCH=1"}, "/home/u");
    REQUIRE(b);
    CHECK(b->argv == V{"./app", "-n", "4"});
    CHECK(b->batch);
    CHECK(b->cwd == "/home/u");
}

TEST_CASE("task_exec: without the plugin's variables it was not started by the plugin", "[task_exec]") {
    CHECK_FALSE(svm::task_invocation({"/x/slurm-vm-exec", "a"}, {"SLURM_VM_ARGV0=./a"}, "/"));
    CHECK_FALSE(svm::task_invocation({"/x/slurm-vm-exec", "a"}, {"SLURM_VM_PLAN=/p"}, "/"));
    CHECK_FALSE(svm::task_invocation({"/x/slurm-vm-exec"}, {"SLURM_VM_PLAN=/p", "SLURM_VM_PREPENDED=1"}, "/"));
    // A console descriptor is digits only.
    CHECK(
        svm::task_invocation({"/x/e", "a"}, {"SLURM_VM_PLAN=/p", "SLURM_VM_PREPENDED=1", "SLURM_VM_CONSOLE_FD=7"}, "/")
            ->console_fd == 7);
    CHECK_FALSE(svm::test::reason_of([] {
                    svm::task_invocation({"/x/e", "a"},
                                         {"SLURM_VM_PLAN=/p", "SLURM_VM_PREPENDED=1", "SLURM_VM_CONSOLE_FD=7;rm"}, "/");
                }).empty());
}

TEST_CASE("task_exec: a relative argv[0] is replaced by this program's own path", "[task_exec]") {
    auto t = svm::task_invocation({"slurm-vm-exec", "a"}, {"SLURM_VM_PLAN=/p", "SLURM_VM_PREPENDED=1"}, "/");
    REQUIRE(t);
    CHECK(t->self[0] == '/');
}

TEST_CASE("task_exec: the guest's command: hostfile, peers to wait for, the batch script on stdin", "[task_exec]") {
    svm::JobPlan p;
    p.hostname = "n1-vm";
    p.boot_timeout_s = 77;
    p.peers = {{"n1", "n1-vm", "10.213.0.10", ""}, {"n2", "n2-vm", "10.213.0.11", ""}};
    svm::TaskInvocation t;
    t.argv = {"job.sh"};
    t.env = {"SLURM_TASKS_PER_NODE=2(x2)", "SLURM_JOB_ID=5"};
    t.cwd = "/home/u/w";
    svm::GuestCommand step = svm::guest_command(p, t, "/tmp/.slurm-vm-task.9");
    CHECK(step.hostfile == "n1-vm slots=2\nn2-vm slots=2\n");
    CHECK(step.cwd == "/home/u/w");
    CHECK(step.pid_file == "/tmp/.slurm-vm-task.9");
    CHECK_FALSE(step.script_on_stdin);
    CHECK(step.wait_for_peers.empty());
    t.batch = true;
    svm::GuestCommand batch = svm::guest_command(p, t, "/tmp/.slurm-vm-task.9");
    CHECK(batch.script_on_stdin);
    CHECK(batch.wait_for_peers == V{"n2-vm"});
    CHECK(batch.peer_wait_s == 77);
    // A guest without the job's network (no addresses): no hostfile.
    p.peers = {{"n1", "n1-vm", "", ""}};
    CHECK(svm::guest_command(p, t, "").hostfile.empty());
}

TEST_CASE("task_exec: waiting for the guest ends with its state's reason", "[task_exec]") {
    svm::test::TempDir d("svm-task");
    svm::JobPlan p;
    p.dir = d.path();
    p.node = "n1";
    p.boot_timeout_s = 5;
    svm::write_guest_state(p, {svm::GuestState::Phase::ready, ""});
    CHECK(svm::wait_for_guest(p) == "");
    svm::write_guest_state(p, {svm::GuestState::Phase::failed, "the image is not a disk image"});
    CHECK(svm::wait_for_guest(p) == "the image is not a disk image");
    // The guest takes the job's first login: the batch step goes on, the
    // others wait for it to be ready.
    svm::write_guest_state(p, {svm::GuestState::Phase::login, ""});
    CHECK(svm::wait_for_guest(p, true) == "");
    std::thread later([&p] {
        ::usleep(200000);
        svm::write_guest_state(p, {svm::GuestState::Phase::ready, ""});
    });
    long t0 = svm::now_ms();
    CHECK(svm::wait_for_guest(p) == "");
    CHECK(svm::now_ms() - t0 >= 150);
    later.join();
}

TEST_CASE("task_exec: ssh waits for a slow guest's banner as long as its boot timeout allows", "[task_exec]") {
    svm::JobPlan p;
    p.hostname = "n1-vm";
    p.boot_timeout_s = 300;
    auto has = [](const std::vector<std::string>& a, const std::string& opt) {
        return std::find(a.begin(), a.end(), opt) != a.end();
    };
    CHECK(has(svm::ssh_argv(p, "/x/slurm-vm-exec", false), "ConnectTimeout=60"));
    p.boot_timeout_s = 900;
    CHECK(has(svm::ssh_argv(p, "/x/slurm-vm-exec", false), "ConnectTimeout=180"));
}

TEST_CASE("task_exec: the batch step's end waits for the node's VM record, bounded", "[task_exec]") {
    svm::test::TempDir d("svm-record");
    svm::JobPlan p;
    p.dir = d.path();
    p.node = "n1";
    svm::write_guest_state(p, {svm::GuestState::Phase::login, ""});
    // Written 300 ms later: the end waits for it.
    std::thread later([&p] {
        ::usleep(300000);
        svm::write_file_atomic(p.record_written(), "", 0644);
    });
    long t0 = svm::now_ms();
    svm::wait_for_record(p, 10000);
    CHECK(svm::now_ms() - t0 >= 250);
    CHECK(svm::now_ms() - t0 < 5000);
    later.join();
    // Already written: no wait.
    t0 = svm::now_ms();
    svm::wait_for_record(p, 10000);
    CHECK(svm::now_ms() - t0 < 100);
    // Never written: bounded.
    ::unlink(p.record_written().c_str());
    t0 = svm::now_ms();
    svm::wait_for_record(p, 400);
    CHECK(svm::now_ms() - t0 >= 400);
    CHECK(svm::now_ms() - t0 < 5000);
    // A guest that has ended writes no record: no wait.
    svm::write_guest_state(p, {svm::GuestState::Phase::failed, "the guest failed"});
    t0 = svm::now_ms();
    svm::wait_for_record(p, 10000);
    CHECK(svm::now_ms() - t0 < 1000);
}

TEST_CASE("task_exec: a guest destroyed while the batch command is sent: its reason, not a silent SIGPIPE",
          "[task_exec]") {
    svm::test::TempDir d("svm-task-gone");
    svm::JobPlan p;
    p.dir = d.path();
    p.node = "n1";
    p.job_id = 7;
    p.boot_timeout_s = 5;
    // The keeper hands the agent's channels (the guest said its agent
    // waits), but the guest failed its set-up and was destroyed: every
    // channel's other end is closed.
    svm::write_guest_state(p, {svm::GuestState::Phase::login, ""});
    svm::UniqueFd listener = svm::test::listening_socket(p.agent_socket());
    std::thread keeper([&] {
        svm::UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        std::vector<svm::UniqueFd> ours;
        std::vector<int> raw;
        for (int i = 0; i < 3; ++i) {
            int sv[2];
            REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
            ::close(sv[1]);  // the guest's end: gone
            ours.emplace_back(sv[0]);
            raw.push_back(sv[0]);
        }
        svm::send_with_fds(c.get(), "1", raw, "hand the channels");
        ::usleep(100000);
        svm::write_guest_state(p, {svm::GuestState::Phase::failed, "the image's kernel has no 9p file system"});
    });
    svm::write_file_atomic(d.path() + "/job.sh", "#!/bin/sh\necho ran\n", 0644);
    svm::TaskInvocation t;
    t.argv = {d.path() + "/job.sh"};
    t.batch = true;
    t.cwd = d.path();
    svm::RunResult r = svm::run_function([&](int) { return svm::run_task_in_guest(p, t); }, 30000);
    keeper.join();
    INFO(r.err);
    CHECK(r.status == 255);  // 128 + SIGPIPE (141) without the reason before the fix
    CHECK(r.err.find("the image's kernel has no 9p file system") != std::string::npos);
}

TEST_CASE("task_exec: a requeued job's output is set aside and put back before the next run's", "[task_exec]") {
    svm::test::TempDir d("svm-output");
    std::string out = d.path() + "/slurm-42.out", err = d.path() + "/slurm-42.err";
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // The first run (stdout and stderr files, as slurmstepd opens them).
        auto open_as_slurm = [&] {
            int o = ::open(out.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_TRUNC, 0600);
            int e = ::open(err.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_TRUNC, 0600);
            if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) _exit(3);
        };
        open_as_slurm();
        if (!svm::write_fully(1, "out before\n") || !svm::write_fully(2, "err before\n")) _exit(4);
        svm::set_output_aside();
        // The next run: Slurm truncates (or creates) the files again.
        open_as_slurm();
        svm::put_output_back();
        if (!svm::write_fully(1, "out after\n") || !svm::write_fully(2, "err after\n")) _exit(5);
        _exit(0);
    }
    int st = 0;
    REQUIRE(::waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(svm::read_file(out) == "out before\nout after\n");
    CHECK(svm::read_file(err) == "err before\nerr after\n");
    CHECK(!svm::path_exists(svm::output_aside_path(out)));
    CHECK(!svm::path_exists(svm::output_aside_path(err)));
}
