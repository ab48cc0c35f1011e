#include "job_record.hpp"

#include <unistd.h>

#include <random>

#include "fs.hpp"
#include "log.hpp"
#include "proc.hpp"
#include "record_form.hpp"

namespace svm {

std::string admin_comment_of(const std::string& out) {
    // `scontrol show job` puts AdminComment on a line of its own.
    static const std::string key = "AdminComment=";
    size_t pos = 0;
    while ((pos = out.find(key, pos)) != std::string::npos) {
        size_t bol = out.rfind('\n', pos);
        bol = bol == std::string::npos ? 0 : bol + 1;
        if (trim(out.substr(bol, pos - bol)).empty()) {
            size_t b = pos + key.size(), e = out.find('\n', b);
            return trim(out.substr(b, e == std::string::npos ? std::string::npos : e - b));
        }
        pos += key.size();
    }
    return "";
}

static Json parse_object(const std::string& value) {
    json_error_t err;
    json_t* j = value.empty() ? nullptr : json_loads(value.c_str(), 0, &err);
    if (!j || !json_is_object(j)) {
        if (j) json_decref(j);
        j = json_object();
    }
    return Json(j);
}

Json parse_admin_comment(const std::string& value) {
    Json root = parse_object(value);
    expand_vm_record(root.get());
    return root;
}

std::optional<std::string> updated_admin_comment(const std::string& current,
                                                 const std::function<void(json_t*)>& merge) {
    Json root = parse_admin_comment(current);
    merge(root.get());
    std::string next = admin_comment_text(root.get());
    if (json_equal(parse_object(current).get(), parse_object(next).get())) return std::nullopt;
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

bool publish_node_record(uint32_t job_id, const std::string& node, const std::string& fields, const PublishOptions& o) {
    json_error_t err;
    Json want(json_loads(fields.c_str(), 0, &err));
    if (!want || !json_is_object(want.get())) {
        log::error("not a JSON object, not published: " + fields);
        return false;
    }
    RunOptions ro;
    ro.env = inherited_env({"PATH", "SLURM_CONF"});
    ro.timeout_ms = o.timeout_ms;
    std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ job_id);
    std::string job = std::to_string(job_id);
    for (int attempt = 0; attempt < o.attempts; ++attempt) {
        if (o.cancel && *o.cancel) return false;
        RunResult r = run({"scontrol", "show", "job", job}, ro);
        if (!r.ok()) {
            log::warn("AdminComment not updated: scontrol show job " + job + " failed (exit " +
                      std::to_string(r.status) + "): " + trim(r.err + r.out));
            return false;
        }
        auto next = updated_admin_comment(admin_comment_of(r.out),
                                          [&](json_t* root) { merge_node_record(root, node, want.get(), o.replace); });
        if (!next) {
            if (attempt >= o.settled) return true;  // seen in place after settling
        } else {
            RunResult w = run({"scontrol", "update", "jobid=" + job, "AdminComment=" + *next}, ro);
            if (!w.ok()) {
                log::warn("AdminComment not updated (exit " + std::to_string(w.status) + "): " + trim(w.err + w.out));
                if (job_takes_no_updates(w.err + w.out)) return false;
            } else {
                log::info("VM record published in AdminComment");
            }
            log::debug("this node's entry: " + fields);
        }
        if (attempt + 1 < o.attempts) {
            int span = std::max(1, o.pause_max_ms - o.pause_min_ms);
            ::usleep(static_cast<useconds_t>(o.pause_min_ms + static_cast<int>(rng() % static_cast<unsigned>(span))) *
                     1000);
        }
    }
    return false;
}

bool job_takes_no_updates(const std::string& scontrol_output) {
    return scontrol_output.find("Job has already finished") != std::string::npos;
}

}  // namespace svm
