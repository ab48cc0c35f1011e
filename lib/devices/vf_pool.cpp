#include "vf_pool.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "error.hpp"
#include "fs.hpp"
#include "pci_device.hpp"

namespace svm {

namespace {

std::vector<int> prefix_bytes(const DeviceConfig& cfg) {
    std::vector<int> out;
    for (size_t i = 0; i + 1 < cfg.guid_prefix.size() + 1; i += 3)
        out.push_back(std::stoi(cfg.guid_prefix.substr(i, 2), nullptr, 16));
    if (out.size() != 4) SVM_THROW("devices.guid_prefix '" + cfg.guid_prefix + "' is not 4 bytes");
    return out;
}

std::string hex_bytes(const std::vector<int>& b) {
    std::string out;
    char buf[4];
    for (size_t i = 0; i < b.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%02x", b[i] & 0xff);
        if (i) out += ":";
        out += buf;
    }
    return out;
}

std::string guid(const DeviceConfig& cfg, int node_id, int pf_ordinal, int index, int port) {
    if (index < 0 || index > 127)
        SVM_THROW("VF index " + std::to_string(index) + " is beyond the 128 VFs GUIDs are numbered for");
    auto b = prefix_bytes(cfg);
    b.push_back(node_id >> 8);
    b.push_back(node_id);
    b.push_back(pf_ordinal);
    b.push_back(index * 2 + port);
    return hex_bytes(b);
}

Json load_state(const std::string& path) {
    std::string text;
    if (!read_file_if_exists(path, text) || trim(text).empty()) return Json(json_object());
    Json j = json_parse(text, path);
    if (!json_is_object(j.get())) SVM_THROW(path + ": VF pool state must be a JSON object");
    return j;
}

}  // namespace

std::string vf_node_guid(const DeviceConfig& cfg, int node_id, int pf_ordinal, int index) {
    return guid(cfg, node_id, pf_ordinal, index, 0);
}
std::string vf_port_guid(const DeviceConfig& cfg, int node_id, int pf_ordinal, int index) {
    return guid(cfg, node_id, pf_ordinal, index, 1);
}
std::string vf_mac(const DeviceConfig& cfg, int node_id, int pf_ordinal, int index) {
    auto p = prefix_bytes(cfg);
    // Locally administered, unicast.
    return hex_bytes({(p[0] | 0x02) & 0xfe, p[1], node_id >> 8, node_id & 0xff, pf_ordinal, index});
}

int vf_node_id(const DeviceConfig& cfg, const std::string& hostname) {
    if (cfg.node_id) return *cfg.node_id;
    uint32_t h = 2166136261u;  // FNV-1a
    for (unsigned char c : hostname) {
        h ^= c;
        h *= 16777619u;
    }
    return static_cast<int>((h ^ (h >> 16)) & 0xffff);
}

Json VfAssignment::to_json() const {
    Json j(json_object());
    json_object_set_new(j.get(), "job", json_string(job.c_str()));
    json_object_set_new(j.get(), "pf", json_string(pf.str().c_str()));
    json_object_set_new(j.get(), "index", json_integer(index));
    json_object_set_new(j.get(), "vf", json_string(vf.str().c_str()));
    json_object_set_new(j.get(), "link_layer", json_string(link_layer.c_str()));
    json_object_set_new(j.get(), "numa_node", json_integer(numa_node));
    json_object_set_new(j.get(), "node_guid", json_string(node_guid.c_str()));
    json_object_set_new(j.get(), "port_guid", json_string(port_guid.c_str()));
    json_object_set_new(j.get(), "mac", json_string(mac.c_str()));
    return j;
}

Json VfReservationRecord::to_json() const {
    Json j(json_object());
    json_object_set_new(j.get(), "job", json_string(job.c_str()));
    return j;
}

VfReservationRecord VfReservationRecord::from_json(const json_t* j) {
    if (!json_is_object(j)) SVM_THROW("vf_reservation record: not a JSON object");
    VfReservationRecord r;
    auto job = json_get_string(j, "job");
    if (!job || job->empty()) SVM_THROW("vf_reservation record: \"job\" missing");
    r.job = *job;
    return r;
}

static json_t* string_map(const std::map<std::string, std::string>& m) {
    json_t* o = json_object();
    for (const auto& [k, v] : m) json_object_set_new(o, k.c_str(), json_string(v.c_str()));
    return o;
}

static std::map<std::string, std::string> get_string_map(const json_t* j, const char* key) {
    std::map<std::string, std::string> out;
    json_t* o = json_object_get(j, key);
    if (!o) return out;
    if (!json_is_object(o)) SVM_THROW(std::string("vf_config record: \"") + key + "\" must be an object");
    const char* k;
    json_t* v;
    json_object_foreach(o, k, v) {
        if (!json_is_string(v)) SVM_THROW(std::string("vf_config record: \"") + key + "." + k + "\" must be a string");
        out[k] = json_string_value(v);
    }
    return out;
}

Json VfConfigRecord::to_json() const {
    Json j(json_object());
    json_object_set_new(j.get(), "pf", json_string(pf.str().c_str()));
    json_object_set_new(j.get(), "index", json_integer(index));
    json_object_set_new(j.get(), "vf", json_string(vf.str().c_str()));
    json_object_set_new(j.get(), "link_layer", json_string(link_layer.c_str()));
    json_object_set_new(j.get(), "set", string_map(set));
    json_object_set_new(j.get(), "previous", string_map(previous));
    return j;
}

VfConfigRecord VfConfigRecord::from_json(const json_t* j) {
    if (!json_is_object(j)) SVM_THROW("vf_config record: not a JSON object");
    VfConfigRecord r;
    auto pf = json_get_string(j, "pf");
    auto vf = json_get_string(j, "vf");
    auto idx = json_get_int(j, "index");
    if (!pf || !vf || !idx) SVM_THROW("vf_config record: \"pf\", \"vf\" and \"index\" are required");
    r.pf = PciAddress::parse(*pf);
    r.vf = PciAddress::parse(*vf);
    r.index = static_cast<int>(*idx);
    r.link_layer = json_get_string(j, "link_layer").value_or("");
    r.set = get_string_map(j, "set");
    r.previous = get_string_map(j, "previous");
    for (const auto& [k, v] : r.set) {
        (void)v;
        if (k != "node" && k != "port" && k != "policy" && k != "mac")
            SVM_THROW("vf_config record: unknown attribute \"" + k + "\"");
    }
    return r;
}

VfPool::VfPool(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, std::string hostname)
    : root_(root), writer_(writer), cfg_(cfg), hostname_(std::move(hostname)) {
    if (hostname_.empty()) {
        char buf[256] = {};
        ::gethostname(buf, sizeof buf - 1);
        hostname_ = buf;
    }
}

std::string VfPool::lock_path() const { return path_join(cfg_.vf_state_dir, "pool.lock"); }
std::string VfPool::state_path() const { return path_join(cfg_.vf_state_dir, "pool.json"); }

std::string VfPool::link_layer_of(const VfProviderConfig& p) const {
    if (!p.link_layer.empty()) return p.link_layer;
    std::string ibdir = root_.pci_attr(p.pci, "infiniband");
    for (const auto& dev : list_dir(ibdir)) {
        auto ll = root_.read_attr(ibdir + "/" + dev + "/ports/1/link_layer");
        if (ll) return *ll == "Ethernet" ? "ethernet" : "infiniband";
    }
    auto cls = root_.read_attr(root_.pci_attr(p.pci, "class"));
    return cls && cls->compare(0, 6, "0x0207") == 0 ? "infiniband" : "ethernet";
}

std::map<std::string, std::string> VfPool::holders() const {
    mkdir_p(cfg_.vf_state_dir, 0700);
    FileLock lock(lock_path());
    Json st = load_state(state_path());
    std::map<std::string, std::string> out;
    const char* k;
    json_t* v;
    json_object_foreach(st.get(), k, v) out[k] = json_get_string(v, "job").value_or("");
    return out;
}

VfAssignment VfPool::reserve(const VfReservationRecord& r, std::optional<int> numa_node) {
    if (cfg_.vf_providers.empty()) SVM_THROW("no VF providers configured (devices.vf_providers is empty)");
    mkdir_p(cfg_.vf_state_dir, 0700);
    FileLock lock(lock_path());
    Json st = load_state(state_path());
    int node_id = vf_node_id(cfg_, hostname_);

    struct Candidate {
        VfAssignment a;
        bool near;
    };
    std::vector<Candidate> candidates;
    std::vector<std::string> empty_pfs;
    for (size_t ord = 0; ord < cfg_.vf_providers.size(); ++ord) {
        const auto& p = cfg_.vf_providers[ord];
        PciDevice pf = read_pci_device(root_, p.pci);
        if (!pf.sriov_capable)
            SVM_THROW(p.pci.str() + ": not SR-IOV capable (" + root_.pci_attr(p.pci, "sriov_totalvfs") + " missing)");
        if (pf.virtfns.empty()) {
            empty_pfs.push_back(p.pci.str() + " (sriov_numvfs is " + std::to_string(pf.sriov_numvfs) + " of " +
                                std::to_string(pf.sriov_totalvfs) + ")");
            continue;
        }
        std::string ll = link_layer_of(p);
        for (size_t i = 0; i < pf.virtfns.size(); ++i) {
            Candidate c;
            c.a.job = r.job;
            c.a.pf = p.pci;
            c.a.index = static_cast<int>(i);
            c.a.vf = pf.virtfns[i];
            c.a.pf_ordinal = static_cast<int>(ord);
            c.a.link_layer = ll;
            c.a.numa_node = pf.numa_node;
            c.a.node_guid = vf_node_guid(cfg_, node_id, c.a.pf_ordinal, c.a.index);
            c.a.port_guid = vf_port_guid(cfg_, node_id, c.a.pf_ordinal, c.a.index);
            c.a.mac = vf_mac(cfg_, node_id, c.a.pf_ordinal, c.a.index);
            c.near = numa_node && pf.numa_node == *numa_node;
            candidates.push_back(c);
        }
    }
    // Already holding one: the same answer again.
    for (const auto& c : candidates) {
        json_t* e = json_object_get(st.get(), c.a.vf.str().c_str());
        if (e && json_get_string(e, "job").value_or("") == r.job) return c.a;
    }
    if (candidates.empty()) {
        std::string msg = "no VFs to hand out: ";
        for (size_t i = 0; i < empty_pfs.size(); ++i) msg += (i ? ", " : "") + empty_pfs[i];
        SVM_THROW(msg + "; create them at boot, e.g. echo N > /sys/bus/pci/devices/<pf>/sriov_numvfs");
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& x, const Candidate& y) { return x.near && !y.near; });
    for (const auto& c : candidates) {
        if (json_object_get(st.get(), c.a.vf.str().c_str())) continue;
        json_t* e = json_object();
        json_object_set_new(e, "job", json_string(r.job.c_str()));
        json_object_set_new(e, "pf", json_string(c.a.pf.str().c_str()));
        json_object_set_new(e, "index", json_integer(c.a.index));
        json_object_set_new(st.get(), c.a.vf.str().c_str(), e);
        write_file_atomic(state_path(), json_dump(st.get(), true) + "\n", 0600);
        return c.a;
    }
    std::set<std::string> jobs;
    const char* k;
    json_t* v;
    json_object_foreach(st.get(), k, v) jobs.insert(json_get_string(v, "job").value_or("?"));
    std::string held;
    for (const auto& j : jobs) held += (held.empty() ? "" : ", ") + j;
    SVM_THROW("VF pool exhausted: all " + std::to_string(candidates.size()) + " VFs of " +
              [&] {
                  std::string s;
                  for (const auto& p : cfg_.vf_providers) s += (s.empty() ? "" : ", ") + p.pci.str();
                  return s;
              }() +
              " are held (by jobs " + held + "); job " + r.job + " gets none (state: " + state_path() + ")");
}

void VfPool::release(const VfReservationRecord& r) {
    mkdir_p(cfg_.vf_state_dir, 0700);
    FileLock lock(lock_path());
    Json st = load_state(state_path());
    std::vector<std::string> drop;
    const char* k;
    json_t* v;
    json_object_foreach(st.get(), k, v) {
        if (json_get_string(v, "job").value_or("") == r.job) drop.emplace_back(k);
    }
    if (drop.empty()) return;
    for (const auto& d : drop) json_object_del(st.get(), d.c_str());
    write_file_atomic(state_path(), json_dump(st.get(), true) + "\n", 0600);
}

VfConfigRecord VfPool::prepare_config(const VfAssignment& a) const {
    VfConfigRecord r;
    r.pf = a.pf;
    r.index = a.index;
    r.vf = a.vf;
    r.link_layer = a.link_layer;
    if (a.link_layer == "infiniband") {
        r.set = {{"node", a.node_guid}, {"port", a.port_guid}, {"policy", "Follow"}};
    } else {
        r.set = {{"mac", a.mac}};
    }
    std::string dir = root_.pci_attr(a.pf, "sriov/" + std::to_string(a.index));
    for (const auto& [attr, value] : r.set) {
        (void)value;
        auto cur = root_.read_attr(dir + "/" + attr);
        if (!cur)
            SVM_THROW(a.vf.str() + ": cannot set its " + attr + ": " + dir + "/" + attr +
                      " missing (the PF's driver does not offer per-VF settings; mlx5_core does)");
        r.previous[attr] = *cur;
    }
    return r;
}

static bool same_value(const std::string& attr, const std::string& a, const std::string& b) {
    if (attr == "policy") return a == b;
    std::string x = a, y = b;
    std::transform(x.begin(), x.end(), x.begin(), ::tolower);
    std::transform(y.begin(), y.end(), y.begin(), ::tolower);
    return x == y;
}

void VfPool::apply_config(const VfConfigRecord& r) {
    std::string dir = root_.pci_attr(r.pf, "sriov/" + std::to_string(r.index));
    try {
        // node and port before policy: the port comes up with its identity set.
        for (const char* attr : {"node", "port", "mac", "policy"}) {
            auto it = r.set.find(attr);
            if (it == r.set.end()) continue;
            auto cur = root_.read_attr(dir + "/" + attr);
            if (cur && same_value(attr, *cur, it->second)) continue;
            writer_.write(dir + "/" + attr, it->second);
        }
    } catch (Error& e) {
        SVM_CONTEXT(e, "configure VF " + r.vf.str() + " (" + r.pf.str() + " VF " + std::to_string(r.index) + ")");
        throw;
    }
}

void VfPool::undo_config(const VfConfigRecord& r) {
    std::string dir = root_.pci_attr(r.pf, "sriov/" + std::to_string(r.index));
    try {
        // policy first: the port goes down before it loses its identity.
        for (const char* attr : {"policy", "mac", "port", "node"}) {
            auto it = r.previous.find(attr);
            if (it == r.previous.end() || it->second.empty()) continue;
            auto cur = root_.read_attr(dir + "/" + attr);
            if (!cur) continue;  // VFs removed meanwhile: nothing to restore
            if (same_value(attr, *cur, it->second)) continue;
            writer_.write(dir + "/" + attr, it->second);
        }
    } catch (Error& e) {
        SVM_CONTEXT(e, "restore VF " + r.vf.str() + " (" + r.pf.str() + " VF " + std::to_string(r.index) + ")");
        throw;
    }
}

}  // namespace svm
