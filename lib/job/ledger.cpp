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

Ledger Ledger::parse(const std::string& text, const std::string& path, uint32_t job_id) {
    Ledger l;
    l.path_ = path;
    l.job_id_ = job_id;
    Json root = json_parse(text, path);
    if (auto j = json_get_int(root.get(), "job_id"); j && static_cast<uint32_t>(*j) != job_id)
        SVM_THROW(path + " belongs to job " + std::to_string(*j) + ", not " + std::to_string(job_id));
    json_t* arr = json_object_get(root.get(), "entries");
    size_t i;
    json_t* e;
    json_array_foreach(arr, i, e) {
        auto kind = json_get_string(e, "kind");
        if (!kind) SVM_THROW(path + ": entry " + std::to_string(i) + " has no kind");
        json_t* d = json_object_get(e, "data");
        l.entries_.push_back({*kind, d ? json_ref(d) : Json(json_object())});
    }
    return l;
}

void Ledger::save() const {
    Json root(json_object());
    json_object_set_new(root.get(), "job_id", json_integer(job_id_));
    Json arr(json_array());
    for (auto& e : entries_) {
        json_t* o = json_object();
        json_object_set_new(o, "kind", json_string(e.kind.c_str()));
        json_object_set(o, "data", e.data.get());
        json_array_append_new(arr.get(), o);
    }
    json_object_set(root.get(), "entries", arr.get());
    write_file_atomic(path_, json_dump(root.get(), true) + "\n", 0600);
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
