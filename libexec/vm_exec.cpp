// slurm-vm-exec: what a task of a VM job runs instead of its command. The
// SPANK plugin puts it in front of the task's command (Slurm 23.11+) or
// replaces the task's argv[0] with it and leaves the original in
// SLURM_VM_ARGV0 (Slurm 22.05). It waits for the node's guest, then runs the
// command inside it as the job's user (the batch script through the guest's
// agent, other tasks over SSH), in the same directory, with
// the job's SLURM_* environment, and exits with the command's status
// (lib/guest/task_exec.hpp).
//
// `slurm-vm-exec --proxy SOCKET` is the SSH ProxyCommand: it relays stdin and
// stdout to the job's Unix socket, which the keeper connects to the guest.
//
// It runs as the job's user: its messages go to stderr only (the job's
// output), as "slurm-vm: job 42: ...", never to the admins' log files.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "error.hpp"
#include "guest_console.hpp"
#include "job_record.hpp"
#include "log.hpp"
#include "srun_options.hpp"
#include "srun_relay.hpp"
#include "task_exec.hpp"

extern char** environ;

namespace {

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

// `slurm-vm console` (srun --vm-console): the plugin opened the guest's
// console log for this step of the job's owner; print it, run nothing.
int print_console(int fd) {
    try {
        std::string text = svm::read_console(fd);
        ::close(fd);
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    } catch (const svm::Error& e) {
        svm::log::error("the guest's console: " + e.chain());
        return 1;
    }
}

int run_task(const svm::TaskInvocation& t) {
    if (t.console_fd >= 0) return print_console(t.console_fd);
    svm::JobPlan p = svm::load_plan(t.plan_path);
    // The batch script may start while the guest finishes setting itself
    // up: the guest's agent takes it early (it waits there for the guest).
    std::string why = svm::wait_for_guest(p, t.batch);
    if (!why.empty()) {
        svm::log::error(why);
        svm::show_console_to_user(p);
        return 1;
    }
    return svm::run_task_in_guest(p, t);
}

}  // namespace

namespace {
// What this process runs on the host (ssh, its ProxyCommand through $SHELL,
// the srun relay's srun) is found in the system's directories and started
// without the variables that would load the user's code (the plugin has
// already removed those from the task's environment; this covers a task
// started otherwise). The task's own environment, captured before, goes on
// to the guest.
void host_side_environment() {
    ::setenv("PATH", svm::kTrustedPath, 1);
    ::setenv("SHELL", "/bin/sh", 1);
    std::vector<std::string> unsafe;
    for (char** e = environ; *e; ++e) {
        std::string v(*e);
        std::string name = v.substr(0, v.find('='));
        if (svm::host_unsafe_variable(name)) unsafe.push_back(name);
    }
    for (const auto& n : unsafe) ::unsetenv(n.c_str());
}
}  // namespace

int main(int argc, char** argv) {
    init_log();
    if (argc == 3 && !std::strcmp(argv[1], "--proxy")) return svm::proxy_to_guest(argv[2]);
    if (argc >= 2 && !std::strcmp(argv[1], "--help")) {
        std::printf(
            "usage: slurm-vm-exec --proxy SOCKET\n"
            "Otherwise run by the slurm-vm SPANK plugin in place of a task's command.\n");
        return 0;
    }
    try {
        char cwd[4096];
        std::vector<std::string> env;
        for (char** e = environ; *e; ++e) env.emplace_back(*e);
        std::optional<svm::TaskInvocation> t = svm::task_invocation(std::vector<std::string>(argv, argv + argc), env,
                                                                    ::getcwd(cwd, sizeof cwd) ? cwd : "");
        if (!t) {
            svm::log::error("slurm-vm-exec was not started by the slurm-vm plugin (SLURM_VM_PLAN unset)");
            return 2;
        }
        host_side_environment();
        // A resumable job's batch step asks Slurm at a TERM whether the job
        // is requeued or preempted (slurm-vm-job-info, as the user).
        t->requeued = [](uint32_t job) {
            std::string why;
            std::optional<svm::JobStatus> st = svm::read_job_status(job, 10000, why);
            if (!st) svm::log::warn("cannot tell whether Slurm requeues the job: " + why);
            return st && (st->requeued() || st->preempt_time != 0);
        };
        return run_task(*t);
    } catch (const svm::Error& e) {
        svm::log::error(e.chain());
        return 1;
    }
}
