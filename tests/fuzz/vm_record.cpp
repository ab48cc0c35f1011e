// The VM record's parser (lib/slurm/job_record.hpp, record_form.hpp) on the
// fuzzer's text as a job's AdminComment: what every root writer of the
// record reads back from Slurm, which a user can forge. Properties: reading
// never throws and gives an object; writing it back (plain, or grouped under
// a small budget) gives a JSON object, as does a node's entry merged in the
// way the writers do.
#include "fuzz.hpp"
#include "job_record.hpp"
#include "record_form.hpp"

using svm::fuzz::require;

namespace {

bool json_object_text(const std::string& s) {
    json_error_t err;
    svm::Json j(json_loads(s.c_str(), 0, &err));
    return j && json_is_object(j.get());
}

void read_and_write(const std::string& value) {
    svm::Json root = svm::parse_admin_comment(value);
    require(root && json_is_object(root.get()), "a record reads as an object");
    require(json_object_text(svm::admin_comment_text(root.get())), "a record writes as an object");
    require(json_object_text(svm::admin_comment_text(root.get(), 200)), "a grouped record writes as an object");
    svm::Json fields(json_pack("{s:s, s:s, s:i}", "image", "/img/a.qcow2", "guest", "vm-1", "ready_ms", 9120));
    auto next =
        svm::updated_admin_comment(value, [&](json_t* r) { svm::merge_node_record(r, "node1", fields.get(), false); });
    if (next) require(json_object_text(*next), "a merged record writes as an object");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    read_and_write(svm::fuzz::text(data, size));
    return 0;
}
