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
void join_cgroups_of(pid_t model, pid_t pid, const std::string& cgroup_root = "/sys/fs/cgroup");

// Directory of the hierarchy mounted for `controller` ("cpuset", "memory").
std::string cgroup_dir(pid_t pid, const std::string& controller, const std::string& cgroup_root = "/sys/fs/cgroup");

// The CPUs and memory limit that apply to pid (its cpuset and memory cgroups).
std::vector<int> cgroup_cpus(pid_t pid, const std::string& cgroup_root = "/sys/fs/cgroup");
std::optional<int64_t> cgroup_memory_limit(pid_t pid, const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace svm
