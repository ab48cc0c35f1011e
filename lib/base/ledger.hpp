// The per-node, per-job ledger of host changes. Every change the prolog makes
// is appended here (atomically, fsync'd) BEFORE it is made; the epilog, a
// failed prolog and `slurm-vm sweep` undo the entries in reverse order. The
// records and their undo: lib/job/host_changes.hpp (the device layer's
// records: lib/devices/vfio_binding.hpp, vf_pool.hpp). Undo actions must be
// idempotent: an entry may describe a change that was never made (crash right
// after recording) or that was already undone.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "json.hpp"

namespace svm {

struct LedgerEntry {
    std::string kind;  // "job_dir", "ip_lease", "domain", "vfio_bind", ...
    Json data;         // what is needed to undo it
};

class Ledger {
public:
    // Loads the ledger at path, or starts an empty one (nothing is written
    // until the first record()).
    static Ledger load(const std::string& path, uint32_t job_id);
    // The ledger in `text` (the file's content; path names it in errors):
    // what load() reads, without the file. Throws svm::Error.
    static Ledger parse(const std::string& text, const std::string& path, uint32_t job_id);

    void record(const std::string& kind, Json data);
    // A typed record (host_changes.hpp, the device layer's): its kind and its JSON form.
    template <class Change>
    void record(const Change& c) {
        record(Change::kind, c.to_json());
    }
    const std::vector<LedgerEntry>& entries() const { return entries_; }
    uint32_t job_id() const { return job_id_; }
    const std::string& path() const { return path_; }
    bool exists_on_disk() const;
    // Removes the file (after a complete undo).
    void erase();
    // For tests of the rollback: called once each record is durable, before
    // the change it describes is made; what it throws is that step's failure
    // (or, thrown past the prolog's rollback point, its crash). Empty: none.
    static void set_record_hook_for_tests(std::function<void(const LedgerEntry&)> hook);

private:
    void save() const;
    std::string path_;
    uint32_t job_id_ = 0;
    std::vector<LedgerEntry> entries_;
};

// A typed record read strictly (JsonIn): the keys its fields() names and
// the ledger's own "recorded_at"; any other key, a missing one or a wrong
// type is refused with a sentence naming it.
template <class Change>
Change read_record(const json_t* data) {
    JsonIn in(data, std::string("ledger record \"") + Change::kind + "\"");
    int64_t recorded_at = 0;
    in.optional("recorded_at", recorded_at);
    Change c;
    Change::fields(in, c);
    in.done();
    return c;
}

// Undoes every entry in reverse order with undo (which throws on failure).
// Errors do not stop the walk: every entry is tried; the messages of those that
// failed are returned (empty = clean). On success the ledger file is removed.
std::vector<std::string> undo_all(Ledger& ledger, const std::function<void(const LedgerEntry&)>& undo);

}  // namespace svm
