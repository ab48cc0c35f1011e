#include "job_record.hpp"

#include <unistd.h>

#include <cctype>
#include <cstring>
#include <mutex>
#include <random>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "hostlist.hpp"
#include "json_schema.hpp"
#include "log.hpp"
#include "proc.hpp"
#include "record_form.hpp"
#include "record_schema.hpp"  // generated: etc/slurm-vm.record.schema.json

namespace svm {

std::optional<std::string> admin_comment_of_json(std::string_view text, uint32_t job_id, std::string& why) {
    if (text.size() > kMaxShowJobBytes) {
        why = "the job's JSON is larger than " + std::to_string(kMaxShowJobBytes >> 20) + " MiB";
        return std::nullopt;
    }
    json_error_t err;
    Json doc(json_loadb(text.data(), text.size(), JSON_REJECT_DUPLICATES, &err));
    json_t* jobs = json_object_get(doc.get(), "jobs");
    if (!json_is_array(jobs)) {
        why = "the job's JSON is not an object with a list of jobs";
        return std::nullopt;
    }
    size_t i;
    json_t* job;
    json_array_foreach(jobs, i, job) {
        json_t* id = json_object_get(job, "job_id");
        if (!json_is_integer(id) || json_integer_value(id) != static_cast<json_int_t>(job_id)) continue;
        json_t* c = json_object_get(job, "admin_comment");
        if (!c || json_is_null(c)) return std::string();
        if (!json_is_string(c)) {
            why = "the job's admin_comment is not a string";
            return std::nullopt;
        }
        return std::string(json_string_value(c), json_string_length(c));
    }
    why = "job " + std::to_string(job_id) + " is not in Slurm's answer";
    return std::nullopt;
}

namespace {

std::mutex g_job_info_m;
std::string g_job_info;

std::string job_info_program() {
    std::lock_guard<std::mutex> l(g_job_info_m);
    if (!g_job_info.empty()) return g_job_info;
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        std::string dir(self, static_cast<size_t>(n));
        dir = dir.substr(0, dir.rfind('/'));
        if (path_exists(path_join(dir, "slurm-vm-job-info"))) return path_join(dir, "slurm-vm-job-info");
    }
    return path_join(SVM_LIBEXECDIR, "slurm-vm-job-info");
}

}  // namespace

void set_job_info_program(const std::string& path) {
    std::lock_guard<std::mutex> l(g_job_info_m);
    g_job_info = path;
}

namespace {

// slurm-vm-job-info's answer for job_id, bounded in time and size.
std::optional<std::string> run_job_info(uint32_t job_id, int timeout_ms, std::string& why) {
    RunOptions ro;
    ro.env = inherited_env({"PATH", "SLURM_CONF"});
    ro.timeout_ms = timeout_ms;
    ro.max_output_bytes = kMaxShowJobBytes;
    std::string prog = job_info_program();
    RunResult r = run({prog, std::to_string(job_id)}, ro);
    if (r.ok()) return r.out;
    why = r.truncated   ? prog + " wrote more than " + std::to_string(kMaxShowJobBytes >> 20) + " MiB"
          : r.timed_out ? prog + " did not answer within " + std::to_string(timeout_ms / 1000) + " s"
                        : prog + " " + std::to_string(job_id) + " failed (exit " + std::to_string(r.status) +
                              "): " + trim(r.err + r.out).substr(0, 300);
    return std::nullopt;
}

}  // namespace

std::optional<std::string> read_admin_comment(uint32_t job_id, int timeout_ms, std::string& why) {
    std::optional<std::string> out = run_job_info(job_id, timeout_ms, why);
    if (!out) return std::nullopt;
    return admin_comment_of_json(*out, job_id, why);
}

std::optional<JobStatus> job_status_of_json(std::string_view text, uint32_t job_id, std::string& why) {
    if (text.size() > kMaxShowJobBytes) {
        why = "the job's JSON is larger than " + std::to_string(kMaxShowJobBytes >> 20) + " MiB";
        return std::nullopt;
    }
    Json doc(json_loadb(text.data(), text.size(), JSON_REJECT_DUPLICATES, nullptr));
    json_t* jobs = json_object_get(doc.get(), "jobs");
    size_t i;
    json_t* job;
    json_array_foreach(jobs, i, job) {
        json_t* id = json_object_get(job, "job_id");
        if (!json_is_integer(id) || json_integer_value(id) != static_cast<json_int_t>(job_id)) continue;
        try {
            JobStatus st;
            st.state = json_get_string(job, "state").value_or("");
            st.requeue = json_get_bool(job, "requeue").value_or(false);
            st.preempt_time = json_get_int(job, "preempt_time").value_or(0);
            st.restart_cnt = json_get_int(job, "restart_cnt").value_or(0);
            if (st.state.empty() || st.state.size() > 32) SVM_THROW("no state");
            return st;
        } catch (const Error& e) {
            why = "the job's state is not understood: " + e.reason();
            return std::nullopt;
        }
    }
    why = "job " + std::to_string(job_id) + " is not in Slurm's answer";
    return std::nullopt;
}

std::optional<JobStatus> read_job_status(uint32_t job_id, int timeout_ms, std::string& why) {
    std::optional<std::string> out = run_job_info(job_id, timeout_ms, why);
    if (!out) return std::nullopt;
    return job_status_of_json(*out, job_id, why);
}

namespace {

Json empty_object() { return Json(json_object()); }

const Json& record_schema() {
    static const Json schema = json_parse(kRecordSchema, "slurm-vm.record.schema.json");
    return schema;
}

bool is_node_name(const char* n) {
    size_t len = std::strlen(n);
    if (len == 0 || len > kMaxHostName) return false;
    for (size_t i = 0; i < len; ++i)
        if (!std::isalnum(static_cast<unsigned char>(n[i])) && !std::strchr("._-", n[i])) return false;
    return true;
}

// Checks root["slurm_vm"] and expands it; throws svm::Error when it is not ours.
void check_vm_record(json_t* root, size_t max_names) {
    json_t* vm = json_object_get(root, "slurm_vm");
    if (!vm) return;
    validate_json(vm, record_schema().get(), nullptr);
    expand_vm_record(root, max_names);
    const char* node;
    json_t* entry;
    size_t count = 0;
    json_object_foreach(json_object_get(json_object_get(root, "slurm_vm"), "nodes"), node, entry) {
        if (!is_node_name(node)) SVM_THROW("\"" + std::string(node).substr(0, 100) + "\" is not a node name");
        if (++count > max_names) SVM_THROW("the record names more than " + std::to_string(max_names) + " nodes");
    }
}

}  // namespace

RecordRead parse_record(std::string_view value, size_t max_names) {
    RecordRead r{empty_object(), ""};
    if (value.empty()) return r;
    if (value.size() > kMaxAdminCommentBytes) {
        r.refused = "the AdminComment is " + std::to_string(value.size()) + " bytes, more than " +
                    std::to_string(kMaxAdminCommentBytes) + ": replaced";
        return r;
    }
    json_error_t err;
    Json j(json_loadb(value.data(), value.size(), JSON_REJECT_DUPLICATES, &err));
    if (!j || !json_is_object(j.get())) {
        r.refused = "the AdminComment is not a JSON object: replaced";
        return r;
    }
    try {
        check_vm_record(j.get(), max_names);
    } catch (const Error& e) {
        // Not ours: dropped whole, never merged into.
        Json again(json_loadb(value.data(), value.size(), JSON_REJECT_DUPLICATES, &err));
        json_object_del(again.get(), "slurm_vm");
        std::string what = e.what();
        if (what.rfind("the configuration", 0) == 0)
            what.replace(0, 17, "slurm_vm");  // json_schema's name for the root
        r.refused = "the VM record in the AdminComment is not slurm-vm's (" + what.substr(0, 300) + "): replaced";
        r.root = std::move(again);
        return r;
    }
    r.root = std::move(j);
    return r;
}

Json parse_admin_comment(const std::string& value) { return parse_record(value).root; }

std::optional<std::string> updated_admin_comment(const std::string& current,
                                                 const std::function<void(json_t*)>& merge) {
    RecordRead read = parse_record(current);
    if (!read.refused.empty()) log::warn(read.refused);
    merge(read.root.get());
    std::string next = admin_comment_text(read.root.get());
    if (read.refused.empty() && current == next) return std::nullopt;
    json_error_t err;
    Json was(json_loadb(current.data(), current.size(), 0, &err));
    if (read.refused.empty() && was && json_equal(was.get(), json_parse(next, "record").get())) return std::nullopt;
    return next;
}

bool merge_node_record(json_t* root, const std::string& node, const json_t* fields, bool replace) {
    bool changed = false;
    auto object_at = [&](json_t* parent, const char* key) {
        json_t* o = json_object_get(parent, key);
        if (!json_is_object(o)) {
            o = json_object();
            json_object_set_new(parent, key, o);
            changed = true;
        }
        return o;
    };
    json_t* vm = object_at(root, "slurm_vm");
    json_t* v = json_object_get(vm, "v");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        json_object_set_new(vm, "v", json_integer(1));
        changed = true;
    }
    json_t* nodes = object_at(vm, "nodes");
    if (replace) {
        json_t* have = json_object_get(nodes, node.c_str());
        if (have && json_equal(have, fields)) return changed;
        json_object_set_new(nodes, node.c_str(), json_deep_copy(fields));
        return true;
    }
    json_t* entry = object_at(nodes, node.c_str());
    const char* key;
    json_t* val;
    json_object_foreach(const_cast<json_t*>(fields), key, val) {
        json_t* have = json_object_get(entry, key);
        if (have && json_equal(have, val)) continue;
        json_object_set_new(entry, key, json_deep_copy(val));
        changed = true;
    }
    return changed;
}

std::string error_record(const std::string& reason) {
    std::string r = reason.size() > 1000 ? reason.substr(0, 1000) : reason;
    // Cut on a UTF-8 boundary (jansson refuses invalid UTF-8).
    while (!r.empty() && r.size() < reason.size() && (static_cast<unsigned char>(r.back()) & 0xC0) == 0x80)
        r.pop_back();
    if (!r.empty() && r.size() < reason.size() && (static_cast<unsigned char>(r.back()) & 0xC0) == 0xC0) r.pop_back();
    Json o(json_object());
    json_t* s = json_string(r.c_str());
    if (!s) s = json_string("(the reason is not valid UTF-8)");
    json_object_set_new(o.get(), "error", s);
    return json_dump(o.get());
}

CommentUpdate update_admin_comment(uint32_t job_id, const std::function<void(json_t*)>& merge, const PublishOptions& o,
                                   const std::function<std::string()>& published) {
    RunOptions ro;
    ro.env = inherited_env({"PATH", "SLURM_CONF"});
    ro.timeout_ms = o.timeout_ms;
    std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ job_id);
    std::string job = std::to_string(job_id);
    for (int attempt = 0; attempt < o.attempts; ++attempt) {
        if (o.cancel && *o.cancel) return CommentUpdate::failed;
        std::string why;
        auto current = read_admin_comment(job_id, o.timeout_ms, why);
        if (!current) {
            log::warn("AdminComment not updated: " + why);
            return CommentUpdate::failed;
        }
        auto next = updated_admin_comment(*current, merge);
        if (!next) {
            if (attempt >= o.settled) return CommentUpdate::in_place;  // seen in place after settling
        } else {
            RunResult w = run({"scontrol", "update", "jobid=" + job, "AdminComment=" + *next}, ro);
            if (!w.ok()) {
                log::warn("AdminComment not updated (exit " + std::to_string(w.status) + "): " + trim(w.err + w.out));
                if (job_takes_no_updates(w.err + w.out)) return CommentUpdate::finished;
            } else {
                log::info("VM record published in AdminComment" + (published ? published() : std::string()));
            }
        }
        if (attempt + 1 < o.attempts && o.pause_max_ms > 0) {
            int span = std::max(1, o.pause_max_ms - o.pause_min_ms);
            pause_for(Milliseconds(o.pause_min_ms + static_cast<int>(rng() % static_cast<unsigned>(span))));
        }
    }
    return CommentUpdate::failed;
}

bool publish_node_record(uint32_t job_id, const std::string& node, const std::string& fields, const PublishOptions& o) {
    json_error_t err;
    Json want(json_loads(fields.c_str(), 0, &err));
    if (!want || !json_is_object(want.get())) {
        log::error("not a JSON object, not published: " + fields);
        return false;
    }
    log::debug("this node's entry: " + fields);
    auto merge = [&](json_t* root) { merge_node_record(root, node, want.get(), o.replace); };
    return update_admin_comment(job_id, merge, o) == CommentUpdate::in_place;
}

bool job_takes_no_updates(const std::string& scontrol_output) {
    return scontrol_output.find("Job has already finished") != std::string::npos;
}

}  // namespace svm
