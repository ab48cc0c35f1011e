// cgroup helpers: the VM must live in the job's cgroups so that Slurm's
// limits and accounting cover it. Both cgroup versions, decided per node by
// what is mounted at cgroup_root (cgroup_unified); every function takes the
// roots as parameters so that tests run on fake trees.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace svm {

// Where the node's cgroup file system is mounted.
inline constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

// True when cgroup_root is the unified (v2) hierarchy, whose root has
// cgroup.controllers. A hybrid node (v1 controllers, cgroup2 only for
// systemd's own tracking) counts as v1, as it does for Slurm.
bool cgroup_unified(const std::string& cgroup_root = kCgroupRoot);

// v1: controller list ("cpu,cpuacct") -> path inside that hierarchy, from /proc/PID/cgroup.
std::map<std::string, std::string> cgroups_of(pid_t pid, const std::string& proc_root = "/proc");

// v2: pid's cgroup, the path of the "0::" line of /proc/PID/cgroup ("" when
// there is none).
std::string unified_cgroup_of(pid_t pid, const std::string& proc_root = "/proc");

// v2: the cgroup the guest gets, given the cgroup of the extern step's task
// (Slurm's .../job_<id>/step_extern/user/task_<n>): a leaf of its own below
// it, "<task>/slurm_vm" (cgroup.cpp says why there). When the model is
// slurmstepd itself (its leaf .../step_extern/slurm: Slurm 25.05+ runs no
// sleep in the extern step), the leaf goes beside the step's tasks instead
// ("<step>/user/slurm_vm"). Throws when the path is in no job's step.
std::string guest_cgroup_v2(const std::string& task_path);

// Moves process `pid` into the job cgroups that `model` is in. Throws naming
// the file on failure, or when `model` is in no job cgroup.
//
// v1: every hierarchy's cgroup.procs under cgroup_root (hierarchies where
// `model` sits at the root are skipped).
// v2: the one cgroup of `model`.
//
// With out_of_step_signals, `pid` is placed where Slurm's signals to the
// extern step (a job-wide scancel --signal, the time limit's TERM, the
// step's final KILL) do not reach it, while its CPU and memory stay counted
// and limited in the step: on v1 the freezer hierarchy (the one
// proctrack/cgroup signals and kills a step through) gets the job's cgroup
// instead of the step's; on v2 it gets guest_cgroup_v2(), created if needed.
// The epilog ends the guest (and remove_job_cgroups tidies up).
void join_cgroups_of(pid_t model, pid_t pid, const std::string& cgroup_root = kCgroupRoot,
                     bool out_of_step_signals = false, const std::string& proc_root = "/proc");

// Whether `name` has the shape of a SLUID, Slurm 26.05's unique job ID
// ("s" and 13 digits of Crockford's base 32), which names the job's cgroup
// on v2 (CgroupJobIdPaths=no, the default) and is given to the prolog and
// epilog as SLURM_JOB_SLUID.
bool is_sluid(const std::string& name);

// A job as its cgroups are named: job_<id>, or its SLUID on v2 from 26.05
// ("" before; anything not shaped as one is ignored).
struct SlurmJob {
    uint32_t id = 0;
    std::string sluid;
    SlurmJob(uint32_t job_id, std::string job_sluid = "") : id(job_id), sluid(std::move(job_sluid)) {}
};

// "/slurm_n1/uid_1/job_42/step_extern/task_0" -> "/slurm_n1/uid_1/job_42";
// ".../slurmstepd.scope/sEKNKTV3WPV500/step_0" -> ".../slurmstepd.scope/sEKNKTV3WPV500"
// (unchanged when there is no job component).
std::string job_level_path(const std::string& path);

// Removes the job's leftover empty cgroup directories (.../job_<id>, on v2
// also .../<sluid>, and below, deepest first); cgroups with processes stay (rmdir refuses).
// Returns how many were removed; never throws. v1: in every hierarchy under
// cgroup_root. v2: below slurmstepd's scope (system.slice/slurmstepd.scope,
// or <node>_slurmstepd.scope where several slurmd share a host; any of them
// when `node` is empty), holding the scope's lock as slurmstepd does; what
// is left in the guest's own leaves is ended first (for the epilog and
// sweep, which call this once the job is over).
// With a `wait`, a cgroup that stays is tried again (10 ms, doubling to
// 200 ms) until none stays or `wait` is over, then logged: the guest, the
// keeper and QEMU may still be exiting when the job's last record is undone.
int remove_job_cgroups(const SlurmJob& job, const std::string& cgroup_root = kCgroupRoot, const std::string& node = "",
                       std::chrono::milliseconds wait = std::chrono::milliseconds(0));

// Directory of pid's cgroup for `controller` ("cpuset", "memory"): v1, in
// the hierarchy mounted for it; v2, in the one hierarchy.
std::string cgroup_dir(pid_t pid, const std::string& controller, const std::string& cgroup_root = kCgroupRoot,
                       const std::string& proc_root = "/proc");

// The CPUs and memory limit that apply to pid. v1: its cpuset and memory
// cgroups. v2: cpuset.cpus.effective of its cgroup or the nearest ancestor
// that has the file; the tightest memory.max of its cgroup and ancestors
// ("max" is no limit). No limit: nullopt.
std::vector<int> cgroup_cpus(pid_t pid, const std::string& cgroup_root = kCgroupRoot,
                             const std::string& proc_root = "/proc");
std::optional<int64_t> cgroup_memory_limit(pid_t pid, const std::string& cgroup_root = kCgroupRoot,
                                           const std::string& proc_root = "/proc");
// How many processes the kernel's OOM killer ended in pid's memory cgroup
// and below (v1: memory.oom_control's oom_kill; v2: memory.events'); nullopt
// when the kernel does not say.
std::optional<int64_t> cgroup_oom_kills(pid_t pid, const std::string& cgroup_root = kCgroupRoot,
                                        const std::string& proc_root = "/proc");

}  // namespace svm
