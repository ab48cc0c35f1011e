// cgroup v1 helpers: the VM must live in the job's cgroups so that Slurm's
// limits and accounting cover it.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace svm {

// controller list ("cpu,cpuacct") -> path inside that hierarchy, from /proc/PID/cgroup.
std::map<std::string, std::string> cgroups_of(pid_t pid, const std::string& proc_root = "/proc");

// Moves process `pid` into every v1 cgroup that `model` is in (cgroup.procs of
// each hierarchy under cgroup_root). Hierarchies where `model` sits at the root
// are skipped. Throws naming the file on failure.
//
// With job_level_freezer, the freezer hierarchy (the one proctrack/cgroup
// signals and kills a step through) gets the job's cgroup instead of the
// step's: Slurm's signals to the extern step (a job-wide scancel --signal, the
// time limit's TERM) then miss the guest, while its CPU and memory stay
// counted and limited in the step. The epilog ends the guest
// (and remove_job_cgroups tidies up).
void join_cgroups_of(pid_t model, pid_t pid, const std::string& cgroup_root = "/sys/fs/cgroup",
                     bool job_level_freezer = false);

// "/slurm_n1/uid_1/job_42/step_extern/task_0" -> "/slurm_n1/uid_1/job_42"
// (unchanged when there is no job_ component).
std::string job_level_path(const std::string& path);

// Removes the job's leftover empty cgroup directories (.../job_<id> and
// below, deepest first) in every hierarchy under cgroup_root; cgroups with
// processes stay (rmdir refuses). Returns how many were removed.
int remove_job_cgroups(uint32_t job_id, const std::string& cgroup_root = "/sys/fs/cgroup");

// Directory of the hierarchy mounted for `controller` ("cpuset", "memory").
std::string cgroup_dir(pid_t pid, const std::string& controller, const std::string& cgroup_root = "/sys/fs/cgroup");

// The CPUs and memory limit that apply to pid (its cpuset and memory cgroups).
std::vector<int> cgroup_cpus(pid_t pid, const std::string& cgroup_root = "/sys/fs/cgroup");
std::optional<int64_t> cgroup_memory_limit(pid_t pid, const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace svm
