// The remote command and the signal command, run for real in a local shell
// the way the guest's sshd runs them (a new session: the login shell leads
// its own process group).
#include "catch.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "deadline.hpp"
#include "fs.hpp"
#include "guest_exec.hpp"
#include "proc.hpp"
#include "support.hpp"

TEST_CASE("a signal sent with the signal command reaches the task and its children in the guest", "[exec]") {
    std::string pid_file = "/tmp/.svm-test-task." + std::to_string(::getpid());
    ::unlink(pid_file.c_str());
    svm::GuestCommand c;
    // The task traps USR1 in a child shell too: the whole group gets it.
    c.argv = {"sh", "-c",
              "sh -c 'trap \"echo child got USR1; exit 0\" USR1; while :; do sleep 0.05; done' & "
              "trap 'echo task got USR1; wait; exit 7' USR1; while :; do sleep 0.05; done"};
    c.cwd = "/tmp";
    c.pid_file = pid_file;
    svm::RunOptions o;
    o.new_session = true;
    o.timeout_ms = 20000;
    pid_t sender = ::fork();
    REQUIRE(sender >= 0);
    if (sender == 0) {
        for (int i = 0; i < 100 && !svm::path_exists(pid_file); ++i) ::usleep(50000);
        ::usleep(300000);  // the traps are set
        auto r = svm::run({"/bin/sh", "-c", svm::remote_signal_command(pid_file, "USR1")});
        _exit(r.status);
    }
    auto r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
    int st = 0;
    ::waitpid(sender, &st, 0);
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(r.status == 7);
    CHECK(r.out.find("task got USR1") != std::string::npos);
    CHECK(r.out.find("child got USR1") != std::string::npos);
    // No task noted: the signal command says so (exit 3) instead of killing anything.
    ::unlink(pid_file.c_str());
    CHECK(svm::run({"/bin/sh", "-c", svm::remote_signal_command(pid_file, "TERM")}).status == 3);
    CHECK(svm::forwarded_signal_name(SIGUSR1) == "USR1");
    CHECK(svm::forwarded_signal_name(SIGCONT).empty());
    for (int sig : svm::forwarded_signals())
        CHECK(svm::forwarded_signal_number(svm::forwarded_signal_name(sig)) == sig);
    CHECK(svm::forwarded_signal_number("KILL") == 0);
}

TEST_CASE("the batch script, srun and the MPI hostfile reach the task without a program started", "[exec]") {
    svm::test::TempDir bin("svm-srun-dir");
    svm::write_file_atomic(bin.path() + "/srun", svm::guest_srun_shim(), 0755);
    svm::GuestCommand c;
    c.argv = {"/home/u/job.sh", "first arg"};
    c.script_on_stdin = true;
    c.hostfile = "node1-vm slots=2\n";
    c.srun_port = 4242;
    c.srun_dir = bin.path();
    c.cwd = "/tmp";
    // The script's own "#!" line runs it (interpreter and one argument, as
    // the kernel splits it), though the file is not executable.
    const std::string body =
        "echo \"arg=$1 opt=$-\"\n"
        "echo \"srun=$(command -v srun)\"\n"
        "echo \"hostfile=$(cat \"$OMPI_MCA_orte_default_hostfile\")\"\n"
        "echo \"modes=$(stat -c %a \"$0\" \"$OMPI_MCA_orte_default_hostfile\" | tr '\\n' ' ')\"\n"
        "echo \"port=$SLURM_VM_SRUN_PORT\"\n"
        "rm \"$0\" \"$OMPI_MCA_orte_default_hostfile\"\n";
    const std::string want = "hostfile=node1-vm slots=2\nmodes=600 600 \nport=4242\n";
    for (bool inline_script : {false, true}) {
        INFO("inline script: " << inline_script);
        svm::RunOptions o;
        std::string script = "#! \t/bin/sh  -e \t\n" + body;
        if (inline_script) c.script = script;
        else o.stdin_data = script;
        auto r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
        CHECK(r.status == 0);
        CHECK(r.out == "arg=first arg opt=e\nsrun=" + bin.path() + "/srun\n" + want);
    }
    // No "#!" line: the shell runs it, as it does a file the kernel refuses.
    c.script = body;
    auto r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)});
    CHECK(r.status == 0);
    CHECK(r.out == "arg=first arg opt=\nsrun=" + bin.path() + "/srun\n" + want);
    // Each command draws its own names: two never meet.
    CHECK(svm::remote_shell_command(c) != svm::remote_shell_command(c));
    // No task to prepare: nothing written, nothing run before it.
    svm::GuestCommand plain;
    plain.argv = {"true"};
    CHECK(svm::remote_shell_command(plain) == "exec 'true'");
}

TEST_CASE("the batch script waits until the job's other guests accept logins", "[exec]") {
    svm::test::TempDir tmp("svm-peers");
    std::string d = tmp.path();
    // A stand-in for ssh: host "late" accepts the third login, "never" none.
    svm::write_file_atomic(d + "/ssh",
                           "#!/bin/sh\nfor a; do case \"$a\" in late|never|early) h=$a ;; esac; done\n"
                           "echo x >>\"" +
                               d +
                               "/tries.$h\"\n"
                               "[ \"$h\" = early ] && exit 0\n"
                               "[ \"$h\" = late ] && [ $(wc -l <\"" +
                               d + "/tries.$h\") -ge 3 ] && exit 0\nexit 255\n",
                           0755);
    svm::GuestCommand c;
    c.argv = {"/home/u/job.sh"};
    c.script_on_stdin = true;
    c.wait_for_peers = {"early", "late"};
    c.peer_wait_s = 30;
    svm::RunOptions o;
    o.env = {"PATH=" + d + ":/usr/bin:/bin"};
    o.stdin_data = "#!/bin/sh\necho \"script ran after $(cat " + d + "/tries.late | wc -l) tries\"\n";
    auto r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
    CHECK(r.status == 0);
    CHECK(r.out == "script ran after 3 tries\n");
    CHECK(svm::read_file(d + "/tries.early") == "x\n");
    // A guest that never answers: bounded, said, and the script still runs.
    c.wait_for_peers = {"never"};
    c.peer_wait_s = 2;
    o.stdin_data = "#!/bin/sh\necho ran\n";
    r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
    CHECK(r.out == "ran\n");
    CHECK(r.err.find("slurm-vm: guest never does not accept logins (waited 2 s)") != std::string::npos);
}

TEST_CASE("the wait for the job's other guests is bounded by time, not by tries", "[exec]") {
    svm::test::TempDir tmp("svm-peers-slow");
    std::string d = tmp.path();
    // A stand-in for ssh at a guest that does not answer: each try waits out
    // a connect timeout (here 3 s) before it fails.
    svm::write_file_atomic(d + "/ssh", "#!/bin/sh\necho x >>\"" + d + "/tries\"\nsleep 3\nexit 255\n", 0755);
    svm::GuestCommand c;
    c.argv = {"/home/u/job.sh"};
    c.script_on_stdin = true;
    c.wait_for_peers = {"silent"};
    c.peer_wait_s = 4;
    svm::RunOptions o;
    o.env = {"PATH=" + d + ":/usr/bin:/bin"};
    o.stdin_data = "#!/bin/sh\necho ran\n";
    o.timeout_ms = 60000;
    auto r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
    CHECK(r.out == "ran\n");
    CHECK(r.err.find("slurm-vm: guest silent does not accept logins (waited 4 s)") != std::string::npos);
    // Counted in tries, 4 tries of 3 s and 1 s of sleep each: 16 s. By the
    // clock: the try that passes the 4 s ends it (2 tries; 3 for slack).
    size_t tries = svm::read_file(d + "/tries").size() / 2;
    CHECK(tries >= 1);
    CHECK(tries <= 3);
}

TEST_CASE("the job's first login waits in the guest until it is set up, and ends if it failed", "[exec]") {
    svm::test::TempDir tmp("svm-flags");
    std::string d = tmp.path();
    REQUIRE(svm::run({"/bin/sh", "-c", "mkfifo -m 0666 " + d + "/go"}).ok());
    svm::GuestCommand c;
    c.argv = {"/home/u/job.sh"};
    c.script_on_stdin = true;
    c.wait_for_flags_in = d;
    svm::RunOptions o;
    o.timeout_ms = 20000;
    o.stdin_data = "#!/bin/sh\necho \"ran; flags: $(ls " + d + " | tr '\\n' ' ')\"\n";
    // The guest says it is set up 0.3 s after the command started, the way
    // the seed's script does (the flag, then a line to the FIFO).
    auto set_up_later = [&d](const std::string& flag) {
        pid_t pid = ::fork();
        if (pid == 0) {
            ::usleep(300000);
            _exit(svm::run({"/bin/sh", "-c", ": >" + d + "/" + flag + "; echo go 1<>" + d + "/go"}).status);
        }
        return pid;
    };
    pid_t setter = set_up_later("ready");
    REQUIRE(setter > 0);
    long t0 = svm::now_ms();
    auto r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
    long waited = svm::now_ms() - t0;
    ::waitpid(setter, nullptr, 0);
    CHECK(r.status == 0);
    CHECK(r.out == "ran; flags: go ready \n");
    CHECK(waited >= 300);
    // A guest that failed: the script never runs, the session ends with 255.
    ::unlink((d + "/ready").c_str());
    setter = set_up_later("failed");
    r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
    ::waitpid(setter, nullptr, 0);
    CHECK(r.status == 255);
    CHECK(r.out.empty());
    // Without the FIFO (not made: an older seed), the flags are polled.
    ::unlink((d + "/failed").c_str());
    ::unlink((d + "/go").c_str());
    setter = set_up_later("ready");
    r = svm::run({"/bin/sh", "-c", svm::remote_shell_command(c)}, o);
    ::waitpid(setter, nullptr, 0);
    CHECK(r.status == 0);
    CHECK(r.out == "ran; flags: go ready \n");
    // Not the first login: no wait.
    c.wait_for_flags_in.clear();
    CHECK(svm::remote_shell_command(c).find("until") == std::string::npos);
}
