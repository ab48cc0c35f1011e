// The record relay's framing (lib/slurm/record_relay.hpp) on the fuzzer's
// bytes: what `unmunge` prints for a credential that another node (or, on
// the job's segment, anyone) sent to the head's keeper, which runs as root.
// The payload is the sender's, the status and UID lines are munged's.
// Properties: an entry is taken only from a successful credential of uid 0;
// the collector keeps only the job's nodes' objects, and the merged record
// writes as a JSON object.
#include "record_relay.hpp"
#include "fuzz.hpp"
#include "job_record.hpp"
#include "record_form.hpp"

using svm::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string out = svm::fuzz::text(data, size);
    auto e = svm::entry_of_unmunge(out);
    if (!e) return 0;
    require(out.rfind("STATUS:", 0) == 0, "an entry has a status");
    svm::RecordCollector c({"node0", "node1", "node2"});
    bool taken = c.add(e->node, e->fields);
    require(!taken || e->node == "node0" || e->node == "node1" || e->node == "node2", "only the job's nodes");
    require(c.count() == (taken ? 1u : 0u), "an entry taken is counted");
    svm::Json root = svm::parse_admin_comment(R"({"site":1,"slurm_vm":{"v":1,"nodes":{"node1":{"guest":"g"}}}})");
    c.merge_into(root.get());
    std::string text = svm::admin_comment_text(root.get());
    json_error_t err;
    svm::Json back(json_loads(text.c_str(), 0, &err));
    require(back && json_is_object(back.get()), "the merged record writes as an object");
    return 0;
}
