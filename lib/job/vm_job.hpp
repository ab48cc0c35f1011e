// The host side of a VM job on one node: prepare (prolog) and tear down
// (epilog, failed prolog, sweep). Everything is recorded in the ledger first.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cgroup.hpp"
#include "config.hpp"
#include "device_steps.hpp"
#include "job_plan.hpp"

namespace svm {

// What Slurm tells the prolog (its environment). The SPANK_* values come from
// the user and are untrusted.
struct JobRequest {
    uint32_t job_id = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string user;
    std::string workdir;
    std::string node;
    std::string nodelist;
    std::string image, kernel, initrd, cmdline;  // SPANK_SLURM_VM_*
    std::string irq_profile;                     // SPANK_SLURM_VM_IRQ_PROFILE ("" = the node's)
    std::string partition;                       // SLURM_JOB_PARTITION (the site's VM policy)
    std::string save;                            // SPANK_SLURM_VM_SAVE: --vm-save (vm_save.hpp)
    std::string resume;                          // SPANK_SLURM_VM_RESUME: --vm-resume ("" = the site's)
    std::vector<int> gpus;                       // SLURM_JOB_GPUS: indices into the node's GPUs (gres.conf order)
    std::string sluid;                           // SLURM_JOB_SLUID (26.05+; "" before or when not shaped as one)
};

// Reads a JobRequest from a prolog/epilog environment.
JobRequest job_request_from_env(char** envp);

// The prepared devices into the plan: every function passed through with its
// role ("gpu", "companion", "vf") and host NUMA node (the guest's PCIe layout
// groups them by node), the VF's identity (for the guest's interrupt
// moderation), the devices' NUMA node and CPUs.
void plan_devices_of_guest(JobPlan& p, const DevicePlan& plan, const PreparedDevices& pd);

enum class PrologStatus { not_a_vm_job, prepared, refused };

struct PrologResult {
    PrologStatus status = PrologStatus::not_a_vm_job;
    std::string reason;  // for refused: one sentence for the user
};

// Prepares the job's guest on this node: image intake as the user, address
// lease, keys, overlay, seed, plan. User-side problems give `refused` (the job
// fails, the node stays up); node-side problems throw (the node drains).
// Anything already done is undone before it returns or throws.
PrologResult prepare_job(const NodeConfig& cfg, const JobRequest& req);

// Undoes everything the ledger of job_id holds on this node, removes the
// job's directory and overlay directory if no ledger held them (a ledger lost
// at a power loss), then the job's empty cgroups Slurm left (any job: a plain one has no ledger;
// named by the job's SLUID too on 26.05's cgroup v2, when the caller has it).
// Idempotent; fine with no ledger. Returns the failures (empty = clean).
std::vector<std::string> teardown_job(const NodeConfig& cfg, const SlurmJob& job);

// The registry cache entries (oci_image.hpp) the node's jobs boot from.
std::set<std::string> oci_entries_in_use(const NodeConfig& cfg);

// Jobs with a ledger, a job directory or an overlay directory on this node
// (overlays are on disk: after a power loss they outlive the ledgers).
std::vector<uint32_t> jobs_on_node(const NodeConfig& cfg);

// A job group's entry on one of the node's device nodes (/dev/kvm,
// /dev/vfio/N): granted by the job's prolog, taken back with its ledger.
struct DeviceGrant {
    std::string path;
    uint32_t job_id = 0;
};
// The entries of job groups (job_gid_base and above) on the node's device
// nodes now. One whose job Slurm no longer runs anywhere, and which no ledger
// here takes back, is a leftover (`slurm-vm sweep` removes it).
std::vector<DeviceGrant> device_grants_on_node(const NodeConfig& cfg);

// What identifies job_id's keeper in its command line (for
// process_recorded_alive and stop_recorded_process, proc.hpp).
std::string keeper_mark(uint32_t job_id);

}  // namespace svm
