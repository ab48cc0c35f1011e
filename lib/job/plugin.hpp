// The SPANK plugin's logic, free of Slurm. spank/ is a shim: it turns Slurm's
// calls into these functions and implements PluginHost over spank_t; the unit
// tests implement PluginHost with a fake (lib/job/tests/test_plugin.cpp).
//
//   submit (sbatch/salloc/srun, as the user): check the request, pass it on
//     to the job's prolog and epilog through the job control environment.
//   extern step (slurmstepd, root): start the keeper of this node's guest.
//   other tasks (slurmstepd): run the task's command through slurm-vm-exec,
//     or refuse it where a guest was asked for but none was prepared.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "job_plan.hpp"

namespace svm {

struct PluginOptions {
    std::string image, kernel, initrd, cmdline, irq_profile, save, resume;
    bool console = false;  // srun --vm-console (slurm-vm console): print the guest's console
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
};

// plugstack.conf's arguments: config=FILE; throws on anything else.
void parse_plugin_args(const std::vector<std::string>& args, PluginOptions& opt);

// What the plugin needs from Slurm.
class PluginHost {
public:
    virtual ~PluginHost() = default;
    // The cluster's default partition; "" if none.
    virtual std::string default_partition() = 0;
    // Hands NAME=VALUE to the job's prolog and epilog (SPANK_NAME there).
    virtual void pass_to_job(const std::string& name, const std::string& value) = 0;
    // The task's environment (remote side).
    virtual std::optional<std::string> task_env(const std::string& name) = 0;
    virtual void set_task_env(const std::string& name, const std::string& value) = 0;
    virtual void unset_task_env(const std::string& name) = 0;
    // The names in the task's environment.
    virtual std::vector<std::string> task_env_names() = 0;
    // Runs `exec` in front of the task's command (argv becomes exec, cmd...).
    virtual void wrap_task(const std::string& exec) = 0;
    // The site's TaskProlog and TaskEpilog (slurm.conf), those set.
    virtual std::vector<std::string> site_task_scripts() = 0;
    // Lets this thread and what it starts execute only `allowed` (files, and
    // what lies beneath directories); logs when the kernel cannot.
    virtual void restrict_exec(const std::vector<std::string>& allowed) = 0;
    // --vm-image as the remote side received it; "" if not given.
    virtual std::string requested_image() = 0;
    // Slurm's log (slurmd's or the command's stderr).
    virtual void log_info(const std::string& msg) = 0;
    virtual void log_error(const std::string& msg) = 0;
};

// The submitting process's view: its environment, command line and cwd.
struct SubmitProcess {
    std::vector<std::string> env;   // NAME=value
    std::vector<std::string> args;  // the command line (for -p/--partition)
    std::string cwd;                // relative paths are made absolute against it
    static SubmitProcess self();    // this process's
};

// Submit side: fills what the environment gives (SLURM_VM_*), checks the
// request as the submitting user and passes it on. Throws svm::Error with one
// sentence for the user when it is refused.
void submit_request(PluginHost& host, PluginOptions& opt, const SubmitProcess& proc);

// What sbatch says of a job's --vm-resume (or its partition's default):
// whether the site's configuration lets it be saved at a requeue, and if
// not why; "" when the job is not to be resumed. From the submit host's
// configuration, the job's GPU options (--gres/--gpus and their SBATCH_*
// twins; #SBATCH lines are not seen) and its partition.
std::string resumable_at_submit(const NodeConfig& cfg, const std::string& resume, const std::string& partition,
                                const SubmitProcess& proc);

// The partitions a job asks for at submit: its command line, else
// SBATCH_PARTITION, SALLOC_PARTITION, SLURM_PARTITION, else the default.
std::vector<std::string> submit_partitions(PluginHost& host, const SubmitProcess& proc);

// The step a slurmstepd serves.
struct TaskIds {
    uint32_t job = 0;
    uint32_t node_id = 0;  // this node's index in the job
    uid_t uid = static_cast<uid_t>(-1);
    bool extern_step = false;
    bool batch_step = false;
};

// This node's plan of the job, if it runs a guest here. state_dir may hold
// "%n" (several slurmd on one host): the plan whose node_index is node_id wins.
// A configuration that cannot be read is logged and finds no plan (a job
// without a guest must not fail for it).
struct FoundPlan {
    JobPlan plan;
    std::string node;
};
std::optional<FoundPlan> find_plan(PluginHost& host, const std::string& config, uint32_t job, uint32_t node_id);

// Extern step (root): starts the keeper detached, logging to the job
// directory, told to join the cgroups of `stepd`, when the job runs a guest here.
void start_keeper_for(PluginHost& host, const std::string& config, const TaskIds& ids, pid_t stepd);

// --vm-console (root, before Slurm drops to the user): opens the console log
// of the node's guest for its owner or root and names the descriptor in
// SLURM_VM_CONSOLE_FD. Throws with the reason otherwise.
void open_console_for(PluginHost& host, const PluginOptions& opt, const TaskIds& ids);

// Every other task: wraps it in slurm-vm-exec when the job has a guest here,
// less the variables that would make a program on the host load the user's
// code (host_unsafe_variable: LD_PRELOAD, ...; whatever step they come from,
// a login node's srun --export included); throws when it asked for a guest
// (option or a required partition) and none was prepared: a VM job never
// runs on the host.
void route_task(PluginHost& host, const PluginOptions& opt, const TaskIds& ids);

// What the host side of a VM job's task may execute: slurm-vm-exec (the
// libexec directory), the system's ssh and srun, /bin/sh (ssh's
// ProxyCommand), their ELF interpreter, and the site's TaskProlog and
// TaskEpilog with their interpreters. Nothing of the user's.
std::vector<std::string> host_exec_allowed(PluginHost& host, const NodeConfig& c);

// slurmstepd of a VM job's step (not the extern step's), once, after its tasks
// are started: restricts what it still executes (a --task-epilog given with
// srun, which slurmstepd runs on the host as the user) to host_exec_allowed.
void guard_step(PluginHost& host, const PluginOptions& opt, const TaskIds& ids);

}  // namespace svm
