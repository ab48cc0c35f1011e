// The VM record's size (job_record.hpp). slurmdbd keeps the AdminComment in
// a text column (64 KiB); a record of a few hundred bytes per node outgrows
// it past about 150 nodes. So a record over the budget is written grouped:
// the nodes whose entries agree share one entry under a host list, and what
// differs from node to node (create_ms, ready_ms, guest, ip, fabric_ip) is an
// array in the host list's order, or one value when all agree:
//   {"slurm_vm":{"v":1,"form":"grouped","nodes":{"node[1-1000]":
//     {"image":...,"ready_ms":[9120,9340,...],"guest":[...],...}}}}
// Nothing is lost that way (about 40 bytes a node: some 1,400 nodes fit).
// Past that, the per-node values become {"min","max","mean"} (numbers) or
// are left out (names and addresses, which the node's index gives), named in
// "summarized"; errors are cut to 200 bytes; and if still over, the nodes
// whose entries do not fit are named in "omitted" (the largest groups are
// kept). Reading a record expands the grouped form back into one entry per
// node; "summarized" and "omitted" stay with it, so a record read and
// written again is the same.
#pragma once
#include <cstddef>
#include <string>

#include "json.hpp"

namespace svm {

// What the AdminComment may take (64 KiB less room for a site's own keys).
constexpr size_t kRecordBudget = 60000;

// The most nodes a record may name (grouped host lists together), and the
// most bytes its grouped form may expand to, when it is read back.
constexpr size_t kMaxRecordNodes = 100000;
constexpr size_t kMaxExpandedRecordBytes = size_t(128) << 20;

// root["slurm_vm"] in the grouped form, written back one entry per node
// (a summarized value stays as it is in every node's entry). Throws
// svm::Error, with root unchanged, when a host list is not one, names more
// than max_names nodes in all, or the entries would take more than
// kMaxExpandedRecordBytes (expand_hostlist's bounds: hostlist.hpp).
void expand_vm_record(json_t* root, size_t max_names = kMaxRecordNodes);
// The AdminComment text of root (whose "slurm_vm" has one entry per node):
// as it is when it fits the budget, else with "slurm_vm" grouped as above.
std::string admin_comment_text(const json_t* root, size_t budget = kRecordBudget);

}  // namespace svm
