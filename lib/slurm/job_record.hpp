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

#include "json.hpp"

namespace svm {

// The AdminComment value in `scontrol show job` output ("" when unset).
std::string admin_comment_of(const std::string& show_job_output);
// The AdminComment as a JSON object, the VM record one entry per node (a
// grouped record expanded: record_form.hpp); an empty object when unset or
// not JSON.
Json parse_admin_comment(const std::string& value);
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

// Merges `fields` (JSON object text) into this node's entry of the job's
// AdminComment with `scontrol update`, re-reading until it stays in place.
// Returns true when it was seen in place; logs (log.hpp) what went wrong.
// A job Slurm does not know is given up at once.
bool publish_node_record(uint32_t job_id, const std::string& node, const std::string& fields,
                         const PublishOptions& o = PublishOptions());

}  // namespace svm
