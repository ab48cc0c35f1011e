#include "record_form.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "error.hpp"
#include "hostlist.hpp"

namespace svm {

namespace {

// The keys whose values differ from node to node in a healthy job.
const std::set<std::string> kPerNode = {"create_ms", "ready_ms", "guest", "ip", "fabric_ip"};

struct Group {
    std::string hosts;               // host list of its nodes
    std::vector<std::string> order;  // its expansion: the arrays' order
    Json entry;                      // grouped entry
};

// Whether a node's entry can be grouped: its key one host name, which a
// host list writes as itself (hostlist.hpp), and its value an object. Any
// other (a key empty, too long or in host-list syntax, a value not an
// object: a record read back that is not ours) is left out of the grouped
// form.
bool groupable(const std::string& n, const json_t* entry) {
    return !n.empty() && n.size() <= kMaxHostName && n.find_first_of("[],") == std::string::npos &&
           json_is_object(entry);
}

// Nodes with equal entries apart from kPerNode's values (but with the same
// keys) share a group.
std::vector<Group> group_nodes(json_t* nodes) {
    std::map<std::string, std::vector<std::string>> by_signature;
    const char* node;
    json_t* entry;
    json_object_foreach(nodes, node, entry) {
        if (!groupable(node, entry)) continue;
        Json rest(json_deep_copy(entry));
        std::string keys;
        for (const auto& k : kPerNode) {
            if (!json_object_get(rest.get(), k.c_str())) continue;
            keys += k + ",";
            json_object_del(rest.get(), k.c_str());
        }
        by_signature[json_dump(rest.get()) + "|" + keys].push_back(node);
    }
    std::vector<Group> groups;
    for (auto& [sig, names] : by_signature) {
        Group g;
        g.hosts = compress_hostlist(names);
        g.order = expand_hostlist(g.hosts, names.size());  // as many as it was written from
        g.entry = Json(json_deep_copy(json_object_get(nodes, g.order.front().c_str())));
        for (const auto& k : kPerNode) {
            if (!json_object_get(g.entry.get(), k.c_str())) continue;
            Json values(json_array());
            bool same = true;
            for (const auto& n : g.order) {
                json_t* v = json_object_get(json_object_get(nodes, n.c_str()), k.c_str());
                same = same && json_equal(v, json_object_get(g.entry.get(), k.c_str()));
                json_array_append(values.get(), v);
            }
            if (!same) json_object_set(g.entry.get(), k.c_str(), values.get());
        }
        groups.push_back(std::move(g));
    }
    // The largest groups first: they are what the job mostly was.
    std::stable_sort(groups.begin(), groups.end(),
                     [](const Group& a, const Group& b) { return a.order.size() > b.order.size(); });
    return groups;
}

// Per-node arrays as {"min","max","mean"} (numbers) or left out (strings);
// errors cut to 200 bytes. Adds what was summarized to `summarized`.
void summarize(Group& g, std::set<std::string>& summarized) {
    for (const auto& k : kPerNode) {
        json_t* a = json_object_get(g.entry.get(), k.c_str());
        if (!json_is_array(a)) continue;
        summarized.insert(k);
        if (!json_is_integer(json_array_get(a, 0))) {
            json_object_del(g.entry.get(), k.c_str());
            continue;
        }
        json_int_t lo = json_integer_value(json_array_get(a, 0)), hi = lo, sum = 0;
        size_t i;
        json_t* v;
        json_array_foreach(a, i, v) {
            json_int_t x = json_integer_value(v);
            lo = std::min(lo, x);
            hi = std::max(hi, x);
            sum += x;
        }
        Json s(json_object());
        json_object_set_new(s.get(), "min", json_integer(lo));
        json_object_set_new(s.get(), "max", json_integer(hi));
        json_object_set_new(s.get(), "mean", json_integer(sum / static_cast<json_int_t>(json_array_size(a))));
        json_object_set(g.entry.get(), k.c_str(), s.get());
    }
    json_t* e = json_object_get(g.entry.get(), "error");
    std::string err = json_is_string(e) ? json_string_value(e) : "";
    if (err.size() > 200) {
        size_t cut = 200;
        while (cut > 0 && (static_cast<unsigned char>(err[cut]) & 0xC0) == 0x80) --cut;  // a UTF-8 boundary
        json_object_set_new(g.entry.get(), "error", json_string((err.substr(0, cut) + "...").c_str()));
    }
}

// root with its "slurm_vm" replaced by the grouped form of `groups`; the
// groups past the budget are named in "omitted" (and `omitted` set).
std::string grouped_text(const json_t* root, const json_t* vm, const std::vector<Group>& groups,
                         const std::set<std::string>& summarized, const std::vector<std::string>& gone, size_t budget,
                         bool& omitted) {
    // Shallow copies (only their own keys change): a deep copy of every
    // node's entry, thrown away at once, took most of the time of a large
    // record (fuzz-vm_record: 90,000 nodes).
    Json out(json_copy(const_cast<json_t*>(root)));
    json_t* gvm = json_copy(const_cast<json_t*>(vm));
    json_object_set_new(out.get(), "slurm_vm", gvm);
    json_object_set_new(gvm, "form", json_string("grouped"));
    if (!summarized.empty()) {
        json_t* s = json_array();
        for (const auto& k : summarized) json_array_append_new(s, json_string(k.c_str()));
        json_object_set_new(gvm, "summarized", s);
    }
    json_t* nodes = json_object();
    json_object_set_new(gvm, "nodes", nodes);
    size_t used = json_dump(out.get()).size(), kept = 0;
    for (const auto& g : groups) {
        used += json_dump(g.entry.get()).size() + g.hosts.size() + 4;
        if (used > budget) break;
        json_object_set(nodes, g.hosts.c_str(), g.entry.get());
        ++kept;
    }
    omitted = kept < groups.size();
    for (;;) {
        std::vector<std::string> left = gone;
        for (size_t i = kept; i < groups.size(); ++i)
            left.insert(left.end(), groups[i].order.begin(), groups[i].order.end());
        if (!left.empty()) json_object_set_new(gvm, "omitted", json_string(compress_hostlist(left).c_str()));
        std::string text = json_dump(out.get());
        if (text.size() <= budget || kept == 0) return text;
        json_object_del(nodes, groups[--kept].hosts.c_str());
        omitted = true;
    }
}

}  // namespace

void expand_vm_record(json_t* root, size_t max_names) {
    json_t* vm = json_object_get(root, "slurm_vm");
    json_t* form = json_object_get(vm, "form");
    json_t* grouped = json_object_get(vm, "nodes");
    if (!json_is_string(form) || std::string(json_string_value(form)) != "grouped" || !json_is_object(grouped)) return;
    Json nodes(json_object());
    size_t names = 0, bytes = 0;
    const char* hosts;
    json_t* entry;
    json_object_foreach(grouped, hosts, entry) {
        if (!json_is_object(entry))
            SVM_THROW("the grouped entry of \"" + std::string(hosts).substr(0, 200) + "\" is not an object");
        // Bounded before anything is copied: the names (all groups together)
        // and the bytes of the entries they expand to.
        std::vector<std::string> order = expand_hostlist(hosts, max_names - names);
        names += order.size();
        // What every node's entry shares (the per-node arrays left out), and
        // the per-node values put back one at a time.
        Json base(json_deep_copy(entry));
        for (const auto& k : kPerNode)
            if (json_is_array(json_object_get(base.get(), k.c_str()))) json_object_del(base.get(), k.c_str());
        bytes += order.size() * (json_dump(base.get()).size() + 64);
        if (bytes > kMaxExpandedRecordBytes)
            SVM_THROW("the grouped record expands to more than " + std::to_string(kMaxExpandedRecordBytes >> 20) +
                      " MiB");
        for (size_t i = 0; i < order.size(); ++i) {
            Json e(json_deep_copy(base.get()));
            for (const auto& k : kPerNode) {
                json_t* a = json_object_get(entry, k.c_str());
                if (!json_is_array(a)) continue;
                // An array that does not match the host list is kept as it is (as before).
                json_object_set(e.get(), k.c_str(), json_array_size(a) == order.size() ? json_array_get(a, i) : a);
            }
            json_object_set(nodes.get(), order[i].c_str(), e.get());
        }
    }
    json_object_set(vm, "nodes", nodes.get());
    json_object_del(vm, "form");  // "summarized" and "omitted" stay true of it
}

std::string admin_comment_text(const json_t* root, size_t budget) {
    Json copy(json_deep_copy(root));
    json_t* vm = json_object_get(copy.get(), "slurm_vm");
    json_t* nodes = json_object_get(vm, "nodes");
    // Nodes an earlier write left out and nobody wrote since stay left out.
    std::vector<std::string> gone;
    if (json_t* o = json_object_get(vm, "omitted"); json_is_string(o)) {
        try {
            for (const auto& n : expand_hostlist(json_string_value(o)))
                if (!json_object_get(nodes, n.c_str())) gone.push_back(n);
        } catch (const std::exception&) {
        }
        if (gone.empty()) json_object_del(vm, "omitted");
        else json_object_set_new(vm, "omitted", json_string(compress_hostlist(gone).c_str()));
    }
    std::string plain = json_dump(copy.get());
    if (plain.size() <= budget || !json_is_object(nodes) || json_object_size(nodes) == 0) return plain;
    std::vector<Group> groups = group_nodes(nodes);
    std::set<std::string> summarized;
    size_t i;
    json_t* k;
    json_array_foreach(json_object_get(vm, "summarized"), i, k) if (json_is_string(k))
        summarized.insert(json_string_value(k));
    bool omitted = false;
    std::string text = grouped_text(copy.get(), vm, groups, summarized, gone, budget, omitted);
    if (!omitted) return text;
    for (auto& g : groups) summarize(g, summarized);
    return grouped_text(copy.get(), vm, groups, summarized, gone, budget, omitted);
}

}  // namespace svm
