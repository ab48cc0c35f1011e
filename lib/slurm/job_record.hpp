// The job's VM record in Slurm: one compact JSON document in the job's
// AdminComment, shown by `scontrol show job` and kept by sacct:
//   {"slurm_vm":{"v":1,"nodes":{"node1":{"image":...,"digest":...,...}}}}
// Each node has its own entry under "nodes"; a node whose guest could not
// run has {"error": "<one sentence>"} there. Other keys of the AdminComment
// (a site's own) are kept. The merge is pure. The job's head node writes
// every node's entry at once (record_relay.hpp); publish_node_record, one
// node's read-merge-write through `scontrol` that re-checks because Slurm
// keeps the last writer's value, remains for single nodes' failure paths.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "json.hpp"
#include "record_form.hpp"

namespace svm {

// Everything read back from Slurm is untrusted: a job's name, comment and
// other fields are the user's, and `scontrol show job`'s text prints them raw
// (a name with a newline in it forges any line). So the job is read through
// Slurm's API (the thin adapter slurm-vm-job-info, printing JSON: the fields
// apart), bounded in size, and the record in it is checked against
// etc/slurm-vm.record.schema.json before anything is merged into it.

// The most bytes of `scontrol --json show job ID` read, and of an
// AdminComment taken (slurmdbd keeps 64 KiB).
constexpr size_t kMaxShowJobBytes = size_t(16) << 20;
constexpr size_t kMaxAdminCommentBytes = 256 * 1024;

// The AdminComment of job_id in the output of `scontrol --json show job ID`
// ("" when unset): the "admin_comment" string of the entry of "jobs" whose
// "job_id" is job_id (Slurm 22.05's openapi v0.0.38 and the data_parser
// versions of 23.02 and later print both alike). nullopt, and `why`, when
// the bytes are not such an answer, the job is not in it, or it is larger
// than kMaxShowJobBytes. Pure: a fuzzing target.
std::optional<std::string> admin_comment_of_json(std::string_view scontrol_json, uint32_t job_id, std::string& why);

// A job's AdminComment as read back, checked.
struct RecordRead {
    Json root;            // an object: the site's keys and "slurm_vm", one entry per node
    std::string refused;  // why what was read was not all taken ("" when it was)
};
// The AdminComment as a JSON object, the VM record one entry per node (a
// grouped record expanded: record_form.hpp, at most max_names nodes). What
// is not ours to keep is replaced, never merged into, and said in `refused`:
// a comment longer than kMaxAdminCommentBytes or that is not a JSON object
// (an empty object instead); a "slurm_vm" that fails the record's schema, a
// host list that fails expansion, or a node name that is not one (dropped;
// the site's other keys stay). Pure: a fuzzing target.
RecordRead parse_record(std::string_view admin_comment, size_t max_names = kMaxRecordNodes);
// parse_record(value).root.
Json parse_admin_comment(const std::string& value);
// Reads job_id's AdminComment through slurm-vm-job-info (libexec/job_info.cpp:
// Slurm's API, printed in the shape of `scontrol --json show job`, which
// Slurm 22.05 lacks); nullopt (and `why`) when Slurm cannot be asked or its
// answer is not understood.
std::optional<std::string> read_admin_comment(uint32_t job_id, int timeout_ms, std::string& why);
// A job's state as slurmctld tells it (slurm-vm-job-info): its base state
// ("RUNNING", "PENDING", ...), Slurm's requeue flag, when its preemption
// began (0: never) and how often it was requeued.
struct JobStatus {
    std::string state;
    bool requeue = false;
    int64_t preempt_time = 0;
    int64_t restart_cnt = 0;
    // Requeued: pending again while its end is under way (scontrol
    // requeue, a preemption that requeues, a node failure with --requeue).
    bool requeued() const { return state == "PENDING" || requeue; }
};
// The entry of job_id in slurm-vm-job-info's answer. Pure: a fuzzing target.
std::optional<JobStatus> job_status_of_json(std::string_view text, uint32_t job_id, std::string& why);
// Asks slurmctld through slurm-vm-job-info; nullopt (and `why`) when it
// cannot be asked or its answer is not understood.
std::optional<JobStatus> read_job_status(uint32_t job_id, int timeout_ms, std::string& why);
// The adapter's path: set by the prolog and epilog from their configuration's
// libexec_dir; by default the program's own directory when the adapter is
// there (the keeper), else the installed one.
void set_job_info_program(const std::string& path);
// The AdminComment to write after `merge` changed the record read from
// `current` (given to it parsed as above); written grouped when it outgrows
// slurmdbd's column. nullopt when `current` already says it all.
std::optional<std::string> updated_admin_comment(const std::string& current, const std::function<void(json_t*)>& merge);
// Merges `fields` (an object) into root["slurm_vm"]["nodes"][node], creating
// what is missing and setting "v": 1. Keys of the node's entry that `fields`
// does not name are kept, unless `replace` (the entry becomes `fields`: a
// guest's record drops what an earlier run of a requeued job left). Returns
// false when root already held it all (nothing to write).
bool merge_node_record(json_t* root, const std::string& node, const json_t* fields, bool replace = false);
// {"error": reason}, the reason cut to 1000 bytes.
std::string error_record(const std::string& reason);

struct PublishOptions {
    int attempts = 8;        // reads (and writes when needed)
    int settled = 2;         // return once the entry was seen in place after this many attempts
    int pause_min_ms = 300;  // random pause between attempts
    int pause_max_ms = 1500;
    int timeout_ms = 20000;                     // per scontrol call
    bool replace = false;                       // see merge_node_record
    const std::atomic<bool>* cancel = nullptr;  // checked between attempts
    // For a failure: the job is about to end, so fewer and shorter re-checks.
    static PublishOptions for_error() {
        PublishOptions o;
        o.attempts = 4;
        o.settled = 1;
        o.pause_min_ms = 200;
        o.pause_max_ms = 800;
        return o;
    }
};

// Whether scontrol's error says that the job takes no more updates (it has
// ended: "Job has already finished"); trying again is then pointless.
bool job_takes_no_updates(const std::string& scontrol_output);

// How update_admin_comment ended.
enum class CommentUpdate {
    in_place,  // read back (after `settled` attempts) with nothing left to merge
    finished,  // the job takes no more updates (job_takes_no_updates)
    failed,    // Slurm could not be asked, or the attempts ran out
};

// The one read-modify-write of a job's AdminComment: reads it, lets `merge`
// change the record (updated_admin_comment), writes it back with `scontrol
// update` when it changed, and reads again until it stays in place. Uses
// o.attempts, o.settled, the pauses, o.timeout_ms and o.cancel (o.replace is
// the merge's); `published` (optional) adds to the log line of each write.
CommentUpdate update_admin_comment(uint32_t job_id, const std::function<void(json_t*)>& merge, const PublishOptions& o,
                                   const std::function<std::string()>& published = nullptr);

// Merges `fields` (JSON object text) into this node's entry of the job's
// AdminComment (update_admin_comment). Returns true when it was seen in
// place; logs (log.hpp) what went wrong. A job Slurm does not know is given
// up at once.
bool publish_node_record(uint32_t job_id, const std::string& node, const std::string& fields,
                         const PublishOptions& o = PublishOptions());

}  // namespace svm
