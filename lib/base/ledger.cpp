#include "ledger.hpp"

#include <time.h>

#include "error.hpp"
#include "fs.hpp"
#include "log.hpp"

namespace svm {

namespace {
std::function<void(const LedgerEntry&)>& record_hook() {
    static std::function<void(const LedgerEntry&)> hook;
    return hook;
}
}  // namespace

void Ledger::set_record_hook_for_tests(std::function<void(const LedgerEntry&)> hook) {
    record_hook() = std::move(hook);
}

Ledger Ledger::load(const std::string& path, uint32_t job_id) {
    std::string text;
    if (!read_file_if_exists(path, text)) {
        Ledger l;
        l.path_ = path;
        l.job_id_ = job_id;
        return l;
    }
    return parse(text, path, job_id);
}

// Strict, like every record in it: {"job_id", "entries": [{"kind", "data"}]}.
Ledger Ledger::parse(const std::string& text, const std::string& path, uint32_t job_id) {
    Ledger l;
    l.path_ = path;
    l.job_id_ = job_id;
    Json root = json_parse(text, path);
    JsonIn in(root.get(), path);
    uint32_t owner = 0;
    in("job_id", owner);
    if (owner != job_id)
        SVM_THROW(path + " belongs to job " + std::to_string(owner) + ", not " + std::to_string(job_id));
    in.objects("entries", l.entries_, [](JsonIn& e, LedgerEntry& entry) {
        e("kind", entry.kind);
        const json_t* d = e.raw("data");
        if (!d) e.fail("data", "is missing");
        if (!json_is_object(d)) e.fail("data", "must be an object");
        entry.data = json_ref(const_cast<json_t*>(d));
    });
    in.done();
    return l;
}

void Ledger::save() const {
    JsonOut out;
    out("job_id", job_id_);
    out.objects("entries", entries_, [](JsonOut& o, const LedgerEntry& e) {
        o("kind", e.kind);
        o("data", json_ref(e.data.get()));
    });
    write_file_atomic(path_, json_dump(out.take().get(), true) + "\n", 0600);
}

void Ledger::record(const std::string& kind, Json data) {
    json_object_set_new(data.get(), "recorded_at", json_integer(static_cast<json_int_t>(::time(nullptr))));
    entries_.push_back({kind, std::move(data)});
    save();
    if (record_hook()) record_hook()(entries_.back());
}

bool Ledger::exists_on_disk() const { return path_exists(path_); }

void Ledger::erase() {
    remove_tree(path_);
    entries_.clear();
}

std::vector<std::string> undo_all(Ledger& ledger, const std::function<void(const LedgerEntry&)>& undo) {
    std::vector<std::string> failures;
    const auto& es = ledger.entries();
    for (auto it = es.rbegin(); it != es.rend(); ++it) {
        try {
            log::Steps step;
            undo(*it);
            step.done("undone: " + it->kind);
        } catch (const Error& e) {
            failures.push_back("undo " + it->kind + ": " + e.chain());
        } catch (const std::exception& e) {
            failures.push_back("undo " + it->kind + ": " + e.what());
        }
    }
    if (failures.empty()) ledger.erase();
    return failures;
}

}  // namespace svm
