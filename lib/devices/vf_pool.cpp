#include "vf_pool.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "error.hpp"
#include "fs.hpp"
#include "ledger.hpp"
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

// pool.json: VF address -> the job that holds it, read strictly.
struct PoolEntry {
    std::string job;
    PciAddress pf;
    int index = 0;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("job", t.job);
        v("pf", t.pf);
        v("index", t.index);
    }
};
using PoolState = std::map<std::string, PoolEntry>;

PoolState load_state(const std::string& path) {
    std::string text;
    PoolState out;
    if (!read_file_if_exists(path, text) || trim(text).empty()) return out;
    Json j = json_parse(text, path);
    if (!json_is_object(j.get())) SVM_THROW(path + ": VF pool state must be a JSON object");
    const char* vf;
    json_t* e;
    json_object_foreach(j.get(), vf, e) out[vf] = from_json_fields<PoolEntry>(e, path + ": " + vf);
    return out;
}

void save_state(const std::string& path, const PoolState& st) {
    JsonOut out;
    for (const auto& [vf, e] : st) out(vf.c_str(), json_of(e));
    write_file_atomic(path, json_dump(out.take().get(), true) + "\n", 0600);
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
    JsonOut o;
    o("job", job);
    o("pf", pf);
    o("index", index);
    o("vf", vf);
    o("link_layer", link_layer);
    o("numa_node", numa_node);
    o("node_guid", node_guid);
    o("port_guid", port_guid);
    o("mac", mac);
    return o.take();
}

Json VfReservationRecord::to_json() const { return json_of(*this); }

VfReservationRecord VfReservationRecord::from_json(const json_t* j) {
    auto r = read_record<VfReservationRecord>(j);
    if (r.job.empty()) SVM_THROW("vf_reservation record: \"job\" is empty");
    return r;
}

Json VfConfigRecord::to_json() const { return json_of(*this); }

VfConfigRecord VfConfigRecord::from_json(const json_t* j) {
    auto r = read_record<VfConfigRecord>(j);
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
    std::map<std::string, std::string> out;
    for (const auto& [vf, e] : load_state(state_path())) out[vf] = e.job;
    return out;
}

// Every VF of the providers, those of PFs on numa_node first; throws when
// no PF has any.
std::vector<VfAssignment> VfPool::candidates(const std::string& job, std::optional<int> numa_node) const {
    int node_id = vf_node_id(cfg_, hostname_);
    std::vector<VfAssignment> near, far;
    std::string empty_pfs;
    for (size_t ord = 0; ord < cfg_.vf_providers.size(); ++ord) {
        const auto& p = cfg_.vf_providers[ord];
        PciDevice pf = read_pci_device(root_, p.pci);
        if (!pf.sriov_capable)
            SVM_THROW(p.pci.str() + ": not SR-IOV capable (" + root_.pci_attr(p.pci, "sriov_totalvfs") + " missing)");
        if (pf.virtfns.empty()) {
            empty_pfs += (empty_pfs.empty() ? "" : ", ") + p.pci.str() + " (sriov_numvfs is " +
                         std::to_string(pf.sriov_numvfs) + " of " + std::to_string(pf.sriov_totalvfs) + ")";
            continue;
        }
        std::string ll = link_layer_of(p);
        for (size_t i = 0; i < pf.virtfns.size(); ++i) {
            VfAssignment a;
            a.job = job;
            a.pf = p.pci;
            a.index = static_cast<int>(i);
            a.vf = pf.virtfns[i];
            a.pf_ordinal = static_cast<int>(ord);
            a.link_layer = ll;
            a.numa_node = pf.numa_node;
            a.node_guid = vf_node_guid(cfg_, node_id, a.pf_ordinal, a.index);
            a.port_guid = vf_port_guid(cfg_, node_id, a.pf_ordinal, a.index);
            a.mac = vf_mac(cfg_, node_id, a.pf_ordinal, a.index);
            (numa_node && pf.numa_node == *numa_node ? near : far).push_back(a);
        }
    }
    if (near.empty() && far.empty())
        SVM_THROW("no VFs to hand out: " + empty_pfs +
                  "; create them at boot, e.g. echo N > /sys/bus/pci/devices/<pf>/sriov_numvfs");
    near.insert(near.end(), far.begin(), far.end());
    return near;
}

VfAssignment VfPool::reserve(const VfReservationRecord& r, std::optional<int> numa_node) {
    if (cfg_.vf_providers.empty()) SVM_THROW("no VF providers configured (devices.vf_providers is empty)");
    mkdir_p(cfg_.vf_state_dir, 0700);
    FileLock lock(lock_path());
    PoolState st = load_state(state_path());
    std::vector<VfAssignment> all = candidates(r.job, numa_node);
    // Already holding one: the same answer again.
    for (const auto& a : all) {
        auto it = st.find(a.vf.str());
        if (it != st.end() && it->second.job == r.job) return a;
    }
    for (const auto& a : all) {
        if (st.count(a.vf.str())) continue;
        st[a.vf.str()] = {r.job, a.pf, a.index};
        save_state(state_path(), st);
        return a;
    }
    std::set<std::string> jobs;
    for (const auto& [vf, e] : st) jobs.insert(e.job);
    std::string held, pfs;
    for (const auto& j : jobs) held += (held.empty() ? "" : ", ") + j;
    for (const auto& p : cfg_.vf_providers) pfs += (pfs.empty() ? "" : ", ") + p.pci.str();
    SVM_THROW("VF pool exhausted: all " + std::to_string(all.size()) + " VFs of " + pfs + " are held (by jobs " + held +
              "); job " + r.job + " gets none (state: " + state_path() + ")");
}

void VfPool::release(const VfReservationRecord& r) {
    mkdir_p(cfg_.vf_state_dir, 0700);
    FileLock lock(lock_path());
    PoolState st = load_state(state_path());
    size_t before = st.size();
    for (auto it = st.begin(); it != st.end();) it = it->second.job == r.job ? st.erase(it) : std::next(it);
    if (st.size() != before) save_state(state_path(), st);
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
