// The job's plan (lib/guest/job_plan.hpp) on the fuzzer's text: plan.json
// in the job's directory, readable by the job's user, read back by the
// keeper, the task wrapper and the epilog; and the guest's state file
// beside it. Properties: a plan reads or is refused with svm::Error; a plan
// read and written once is written the same again; a state read and
// written reads back the same.
#include "job_plan.hpp"
#include "error.hpp"
#include "fuzz.hpp"

using svm::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string in = svm::fuzz::text(data, size);
    svm::GuestState st = svm::GuestState::parse(in);
    if (st.phase != svm::GuestState::Phase::none) {
        svm::GuestState again = svm::GuestState::parse(st.text());
        require(again.phase == st.phase && again.reason == st.reason, "a state reads back the same");
    }
    std::string once;
    try {
        once = svm::JobPlan::from_json(in, "plan.json").to_json();
    } catch (const svm::Error&) {
        return 0;  // refused
    }
    std::string twice;
    try {
        twice = svm::JobPlan::from_json(once, "plan.json").to_json();
    } catch (const svm::Error&) {
        require(false, "a written plan reads");
    }
    require(once == twice, "a plan read and written is written the same again");
    return 0;
}
