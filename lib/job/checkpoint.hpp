// Resumable VM jobs (--vm-resume=auto; the README's "Resumable jobs"). When
// Slurm requeues such a job (preemption, scontrol requeue, a drain with
// requeue), the epilog of each of its nodes has the keeper save the
// guest (libvirt's save image: memory and device state; the guest is paused
// first) and keeps the guest's disk overlay beside it, in the job's
// checkpoint directory on storage that every node shares:
//
//   <checkpoint.dir>/job_<id>/      root's, 0700: no user reads it
//     node<i>.save    guest i's state (i: the node's index in the job)
//     node<i>.qcow2   its overlay
//     node<i>.json    what they belong to (CheckpointEntry), written last
//     node<i>.failed  why node i's save failed (told to the user next run)
//
// The next run's prolog restores guest i on the job's i-th node when every
// index has its entry and each belongs to this job, its user and its image;
// otherwise the job starts afresh (and the user is told). The overlay is
// copied, not moved, on restore: a run that dies before it is saved again
// restores the same checkpoint. Removed when the job ends for good.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config.hpp"
#include "image_check.hpp"
#include "job_plan.hpp"

namespace svm {

struct CheckpointEntry {
    uint32_t job_id = 0;
    uid_t uid = 0;
    int node_index = 0, nodes = 0;
    // The node the guest was first prepared for: its names (hostname, host
    // key) stay those of that node wherever it is restored.
    std::string guest_node;
    FileIdentity image;  // the image it booted from
    int64_t bytes = 0;   // its state and overlay
    std::string to_json() const;
    static CheckpointEntry from_json(const std::string& text, const std::string& shown);
};

// <dir>/job_<id>
std::string checkpoint_job_dir(const std::string& dir, uint32_t job_id);
// <job_dir>/node<i>.<ext>: "save", "qcow2" or "json".
std::string checkpoint_file(const std::string& job_dir, int node_index, const char* ext);

// Every index's entry of job_dir when the checkpoint is whole and is job_id's
// with `nodes` nodes, run by uid; nullopt and why (for the user) otherwise
// (why is "" when there is no checkpoint at all).
std::optional<std::vector<CheckpointEntry>> whole_checkpoint(const std::string& job_dir, uint32_t job_id, uid_t uid,
                                                             int nodes, std::string& why);

// Why a job whose --vm-resume is "auto" cannot be resumed ("" = it can): no
// checkpoint space; devices passed through; shares over 9p (QEMU refuses to
// save a guest while one is mounted), or over virtio-fs with a QEMU before
// 8.2 (p.emulator's version; not asked when p.emulator is ""). virtio-fs
// shares move with the guest from QEMU 8.2 on, virtiofsd giving its state
// about open files, never data: the nodes must see the same directories,
// as a shared file system gives. A sentence's end.
std::string not_resumable_because(const CheckpointConfig& cfg, const JobPlan& p);

// EMULATOR --version's (major, minor); nullopt when it does not say.
std::optional<std::pair<int, int>> emulator_version(const std::string& emulator);

// The epilog of a resumable job's node (p.checkpoint_dir set). Requeued: the
// keeper saves the guest (asked with SIGUSR2, within cfg's timeout_s and
// `bound_s`), the overlay is kept beside it, the entry written last; nothing
// of the node's is kept when that fails (the job starts afresh). Not
// requeued (it ended for good): the job's checkpoint is removed. Returns what
// happened, in a sentence for the job's log; throws nothing.
std::string checkpoint_at_end(const NodeConfig& cfg, const JobPlan& p, bool requeued, int bound_s);

// A copy of root's own file (an overlay into or out of a checkpoint), holes
// kept, killed after timeout_ms; throws svm::Error with cp's reason.
void copy_sparse(const std::string& from, const std::string& to, int timeout_ms);

// Removes a job's checkpoint directory (its files are root's own).
void remove_checkpoint(const std::string& job_dir);

}  // namespace svm
