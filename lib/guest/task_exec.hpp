// What slurm-vm-exec does for a task of a VM job (libexec/vm_exec.cpp is its
// main): wait for the node's guest, then run the task's command there as the
// job's user, in the same directory, with the job's SLURM_* environment,
// carrying Slurm's signals in, and exit with its status. The batch script
// goes to the guest's agent (lib/guest/guest_agent.hpp), every other task
// (and the batch script of a guest without the agent) over SSH.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "guest_exec.hpp"
#include "job_plan.hpp"

namespace svm {

// How the plugin started us, read from argv and the environment.
struct TaskInvocation {
    std::string plan_path;          // SLURM_VM_PLAN
    std::vector<std::string> argv;  // the task's own command
    std::string self;               // our absolute path (ssh's ProxyCommand)
    bool batch = false;             // the batch step: argv[0] is the script, sent on stdin
    int console_fd = -1;            // srun --vm-console: print this, run nothing
    std::vector<std::string> env;   // NAME=value
    std::string cwd;
    // A resumable job's batch step (JobPlan::checkpoint_dir), at a TERM:
    // whether Slurm requeues or preempts the job, asked of Slurm (then the
    // script is not signalled: its guest is saved as it runs).
    std::function<bool(uint32_t job_id)> requeued;
};

// Slurm 22.05: argv[0] was replaced, the original is in SLURM_VM_ARGV0;
// Slurm 23.11+: we were prepended (SLURM_VM_PREPENDED), argv[1] is the
// original argv[0]. nullopt when the plugin did not start us.
std::optional<TaskInvocation> task_invocation(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                              const std::string& cwd);

// Waits for this node's guest to be ready, or with `first_login` only until
// its agent takes the job's first command (GuestState login: the batch
// script then waits in the guest, GuestCommand::wait_for_flags_in). Returns
// "" then, else the reason the task fails with (the guest failed or stopped,
// or never started).
std::string wait_for_guest(const JobPlan& p, bool first_login = false);

// The batch step's end: waits (at most timeout_ms, not once the guest has
// ended) until the keeper has written this node's VM record
// (JobPlan::record_written), which Slurm takes only from a running job.
void wait_for_record(const JobPlan& p, long timeout_ms = 15000);

// The command the guest runs for the task, with `pid_file` noting its
// process group there.
GuestCommand guest_command(const JobPlan& p, const TaskInvocation& t, const std::string& pid_file);

// Runs the task in the guest and returns its exit status (255: the way into
// the guest was lost, and why is said).
int run_task_in_guest(const JobPlan& p, const TaskInvocation& t);

// Shows the end of the guest's console (the keeper's filtered copy) and
// keeps it in the job's working directory, as the user.
void show_console_to_user(const JobPlan& p);

// A requeued resumable job's output files: Slurm truncates them when the job
// runs again (unless --open-mode=append or JobFileAppend=1). The batch step,
// as the user, renames them aside (NAME.requeued) when it lets go of the
// script at the requeue, and the next run's batch step writes what they held
// into its own before anything else, then removes them. Regular files only
// (stdout's, and stderr's when it is another file).
std::string output_aside_path(const std::string& path);
void set_output_aside();
void put_output_back();

// The SSH ProxyCommand: relays stdin and stdout to the job's Unix socket,
// which the keeper connects to the guest.
int proxy_to_guest(const std::string& socket_path);

}  // namespace svm
