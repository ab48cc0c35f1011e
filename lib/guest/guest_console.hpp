// `slurm-vm console JOBID [NODE]`: the guest's serial console, for root and
// the job's owner. The console log is root:<job group> (the user never reads
// it directly); the owner gets it through a Slurm step of the job (`srun
// --jobid=JOBID --overlap --vm-console`: Slurm lets only the job's user and
// root start one), for which the plugin opens the log as root in the task,
// checks the step's user against the job's, and hands the task the
// descriptor; the task wrapper prints it, made printable.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace svm {

// Whether a step of `caller` may read the console of a job owned by `owner`.
bool console_allowed(uid_t caller, uid_t owner);

// The step `slurm-vm console` starts for a user: one task on NODE (or on the
// job's first node), sharing the job's resources.
std::vector<std::string> console_srun_argv(uint32_t job_id, const std::string& node);

// The last `max_bytes` of the console behind fd (read from its start),
// made printable (log::printable: no terminal escapes).
std::string read_console(int fd, size_t max_bytes = 4u << 20);

// The job id of `slurm-vm console JOBID`: digits only, a Slurm job id.
uint32_t parse_job_id(const std::string& s);

}  // namespace svm
