// The ledger of host changes (lib/job/ledger.hpp, host_changes.hpp) on the
// fuzzer's text: the file root's epilog and `slurm-vm sweep` read to undo
// a job's changes. Properties: a ledger and each of its records read or
// are refused with svm::Error, and a record read, written and read again
// is written the same.
#include <optional>

#include "error.hpp"
#include "fuzz.hpp"
#include "host_changes.hpp"
#include "ledger.hpp"
#include "vf_pool.hpp"
#include "vfio_binding.hpp"

using svm::fuzz::require;

namespace {

template <class Record>
void reread(const json_t* d) {
    std::string once, twice;
    try {
        once = svm::json_dump(Record::from_json(d).to_json().get());
    } catch (const svm::Error&) {
        return;  // refused: the undo fails, the node drains
    }
    try {
        svm::Json back = svm::json_parse(once, "record");
        twice = svm::json_dump(Record::from_json(back.get()).to_json().get());
    } catch (const svm::Error&) {
        require(false, "a written record reads");
    }
    require(once == twice, "a record read and written is written the same again");
}

void read_record(const svm::LedgerEntry& e) {
    const json_t* d = e.data.get();
    if (e.kind == svm::JobDirChange::kind) reread<svm::JobDirChange>(d);
    if (e.kind == svm::DevAclChange::kind) reread<svm::DevAclChange>(d);
    if (e.kind == svm::OverlayDirChange::kind) reread<svm::OverlayDirChange>(d);
    if (e.kind == svm::JobCgroupsChange::kind) reread<svm::JobCgroupsChange>(d);
    if (e.kind == svm::DomainChange::kind) reread<svm::DomainChange>(d);
    if (e.kind == svm::JobNetChange::kind) reread<svm::JobNetChange>(d);
    if (e.kind == svm::BindRecord::kind) reread<svm::BindRecord>(d);
    if (e.kind == svm::VfReservationRecord::kind) reread<svm::VfReservationRecord>(d);
    if (e.kind == svm::VfConfigRecord::kind) reread<svm::VfConfigRecord>(d);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::optional<svm::Ledger> ledger;
    try {
        ledger = svm::Ledger::parse(svm::fuzz::text(data, size), "job_4242.json", 4242);
    } catch (const svm::Error&) {
        return 0;  // refused
    }
    for (const auto& e : ledger->entries()) read_record(e);
    return 0;
}
