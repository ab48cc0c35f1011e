// slurm-vm-job-info's answer (lib/slurm/job_record.hpp): the job's fields as
// Slurm's API gave them, read by root's epilog (is the job requeued: save
// its guests) and the record's writers (its AdminComment). Properties:
// reading never throws; a state read is a short word; a comment read is at
// most the answer's size.
#include "fuzz.hpp"
#include "job_record.hpp"

using svm::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text = svm::fuzz::text(data, size), why;
    if (auto st = svm::job_status_of_json(text, 42, why))
        require(!st->state.empty() && st->state.size() <= 32, "a state is a short word");
    else require(!why.empty(), "a refusal says why");
    if (auto c = svm::admin_comment_of_json(text, 42, why))
        require(c->size() <= text.size(), "a comment is in the answer");
    return 0;
}
