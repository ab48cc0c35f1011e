#include "config.hpp"

#include <grp.h>

#include <cerrno>

#include "config_schemas.hpp"  // generated: etc/slurm-vm.schema.json as a string
#include "device_config.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "json_schema.hpp"

namespace svm {

// Slurm's job ids stay below MaxJobId, at most 0x03ff0000 (67043328).

std::string expand_node(const std::string& s, const std::string& node_name) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 1 < s.size() && s[i + 1] == 'n') {
            out += node_name;
            ++i;
        } else {
            out += s[i];
        }
    }
    return out;
}

std::string NodeConfig::job_dir(uint32_t job_id) const { return path_join(state_dir, "job_" + std::to_string(job_id)); }
gid_t NodeConfig::job_gid(uint32_t job_id) const {
    if (job_id > kMaxJobGidSpan) SVM_THROW("job id " + std::to_string(job_id) + " is above the guest groups' range");
    return static_cast<gid_t>(job_gid_base + job_id);
}
std::optional<std::string> group_of_gid(gid_t gid) {
    std::vector<char> buf(16384);
    for (;;) {
        struct group g {};
        struct group* out = nullptr;
        int rc = ::getgrgid_r(gid, &g, buf.data(), buf.size(), &out);
        if (rc == ERANGE && buf.size() < (1u << 20)) {
            buf.resize(buf.size() * 4);
            continue;
        }
        if (rc == ERANGE) return "gid " + std::to_string(gid);
        // Not found (or a name service that cannot answer: then the job's
        // group is not known to be free, but nothing says it is taken).
        if (rc != 0 || !out) return std::nullopt;
        return std::string(out->gr_name ? out->gr_name : "");
    }
}

gid_t NodeConfig::free_job_gid(uint32_t job_id) const {
    gid_t gid = job_gid(job_id);
    if (auto name = group_of_gid(gid))
        SVM_REFUSE("job " + std::to_string(job_id) + "'s guest group, gid " + std::to_string(gid) +
                   " (job_gid_base + job id), is the group \"" + *name + "\" of this site's name service on " +
                   node_name +
                   ", so the site's job_gid_base overlaps its groups (its admins' to move; slurm-vm "
                   "doctor shows it): resubmit the job, a later job id may be free");
    return gid;
}

std::optional<uint32_t> NodeConfig::job_of_gid(gid_t gid) const {
    if (gid < job_gid_base || gid - job_gid_base > kMaxJobGidSpan) return std::nullopt;
    return static_cast<uint32_t>(gid - job_gid_base);
}
std::string NodeConfig::job_overlay_dir(uint32_t job_id) const {
    return path_join(overlay_dir, "job_" + std::to_string(job_id));
}
std::string NodeConfig::ledger_dir() const { return path_join(state_dir, "ledger"); }
std::string NodeConfig::ledger_path(uint32_t job_id) const {
    return path_join(ledger_dir(), "job_" + std::to_string(job_id) + ".json");
}
std::string NodeConfig::job_log_dir() const { return path_join(log_dir, node_name); }
std::string NodeConfig::lease_dir() const {
    // Leases must be shared by every node that uses the same bridge; state_dir
    // is per node, so they live beside it.
    auto pos = state_dir.rfind('/');
    std::string parent = (pos == std::string::npos || pos == 0) ? "/run" : state_dir.substr(0, pos);
    return path_join(parent, "leases-" + (network.prefix.empty() ? std::string("none") : std::string("segment")));
}

namespace {

// Keys a former version read: refused with what replaced them, before the
// schema would call them unknown.
void refuse_retired_keys(const json_t* root) {
    const json_t* net = json_object_get(root, "network");
    for (const char* gone : {"bridge", "gateway", "isolate_jobs"})
        if (json_is_object(net) && json_object_get(net, gone))
            SVM_THROW(std::string("network.") + gone +
                      " is gone: every job gets a network segment of its own "
                      "(network.prefix, network.underlay; see the README)");
}

uint64_t gib_bytes(const json_t* obj, const char* key, uint64_t fallback) {
    const json_t* v = json_object_get(obj, key);
    return v ? static_cast<uint64_t>(json_integer_value(v)) << 30 : fallback;
}

// Where things are and which programs run.
void read_host(const json_t* root, NodeConfig& c) {
    read_valid(root, "state_dir", c.state_dir);
    c.state_dir = expand_node(c.state_dir, c.node_name);
    read_valid(root, "libexec_dir", c.libexec_dir);
    read_valid(root, "domain_type", c.domain_type);
    read_valid(root, "emulator", c.emulator);
    read_valid(root, "qemu_img", c.qemu_img);
    read_valid(root, "secret_file", c.secret_file);
    read_valid(root, "kvm_device", c.kvm_device);
    read_valid(root, "overlay_dir", c.overlay_dir);
    c.overlay_dir = expand_node(c.overlay_dir, c.node_name);
    read_valid(root, "sysfs_root", c.sysfs_root);
    read_valid(root, "log_dir", c.log_dir);
    read_valid(root, "log_keep_days", c.log_keep_days);
    int64_t gid_base = c.job_gid_base;
    read_valid(root, "job_gid_base", gid_base);
    c.job_gid_base = static_cast<uint32_t>(gid_base);
}

// How each job's guest is built.
void read_guest(const json_t* root, NodeConfig& c) {
    read_valid(root, "boot_timeout_s", c.boot_timeout_s);
    read_valid(root, "save_timeout_s", c.save_timeout_s);
    read_valid(root, "memory_overhead_mib", c.memory_overhead_mib);
    read_valid(root, "min_guest_memory_mib", c.min_guest_memory_mib);
    read_valid(root, "default_guest_memory_mib", c.default_guest_memory_mib);
    read_valid(root, "default_cmdline", c.default_cmdline);
    read_valid(root, "console_max_kib", c.console_max_kib);
    read_valid(root, "hugepages", c.hugepages);
    read_valid(root, "hugepage_size_kib", c.hugepage_size_kib);
    read_valid(root, "irq_profile", c.irq_profile);
    read_valid(root, "allowed_image_dirs", c.allowed_image_dirs);
    c.max_image_virtual_size = gib_bytes(root, "max_image_virtual_size_gib", c.max_image_virtual_size);
    read_valid(root, "shares", c.shares);
    read_valid(root, "share_roots", c.share_roots);
    read_valid(root, "shares_via", c.shares_via);
    read_valid(root, "virtiofsd", c.virtiofsd);
}

void read_network(const json_t* n, NetworkConfig& net, const std::string& node_name) {
    read_valid(n, "netns", net.netns);
    net.netns = expand_node(net.netns, node_name);
    read_valid(n, "prefix", net.prefix);
    const json_t* u = json_object_get(n, "underlay");
    const char* k;
    json_t* v;
    json_object_foreach(const_cast<json_t*>(u), k, v) net.underlay_hosts[k] = json_string_value(v);
    read_valid(n, "underlay", net.underlay);
    read_valid(n, "vxlan_port", net.vxlan_port);
    read_valid(n, "mtu", net.mtu);
    read_valid(n, "fabric", net.fabric);
    read_valid(n, "fabric_prefix", net.fabric_prefix);
}

void read_oci(const json_t* o, OciSettings& oci, const std::string& node_name) {
    read_valid(o, "skopeo", oci.skopeo);
    read_valid(o, "cache_dir", oci.cache_dir);
    oci.cache_dir = expand_node(oci.cache_dir, node_name);
    oci.cache_max_bytes = gib_bytes(o, "cache_max_gib", oci.cache_max_bytes);
    read_valid(o, "insecure_registries", oci.insecure_registries);
    read_valid(o, "timeout_s", oci.timeout_s);
    oci.max_layer_bytes = gib_bytes(o, "max_layer_gib", oci.max_layer_bytes);
    int64_t entries = static_cast<int64_t>(oci.max_layer_entries);
    read_valid(o, "max_layer_entries", entries);
    oci.max_layer_entries = static_cast<size_t>(entries);
    oci.reserve_bytes = gib_bytes(o, "reserve_gib", oci.reserve_bytes);
}

void read_checkpoint(const json_t* o, CheckpointConfig& cp) {
    read_valid(o, "dir", cp.dir);
    cp.max_bytes = gib_bytes(o, "max_gib", cp.max_bytes);
    cp.reserve_bytes = gib_bytes(o, "reserve_gib", cp.reserve_bytes);
    read_valid(o, "timeout_s", cp.timeout_s);
    read_valid(o, "resume", cp.resume);
    const char* k;
    json_t* v;
    json_object_foreach(json_object_get(o, "partitions"), k, v) cp.partitions[k] = json_string_value(v);
}

}  // namespace

std::string CheckpointConfig::resume_of(const std::string& asked, const std::string& partition) const {
    if (!asked.empty()) return asked;
    auto it = partitions.find(partition);
    return it != partitions.end() ? it->second : resume;
}

void validate_node_config(const json_t* doc) {
    static const Json node = json_parse(kNodeSchema, "slurm-vm.schema.json");
    validate_json(doc, node.get(), [](const std::string& name) -> const json_t* {
        return name == "slurm-vm.devices.schema.json" ? device_config_schema() : nullptr;
    });
}

NodeConfig parse_config(const std::string& text, const std::string& node_name, const std::string& shown) {
    Json root = json_parse(text, shown);
    NodeConfig c;
    c.path = shown;
    c.node_name = node_name;
    try {
        // etc/slurm-vm.schema.json states every rule on a single value: once
        // it holds, values are read as they are; only rules across parts of
        // the configuration are checked here (the site catalogue's).
        refuse_retired_keys(root.get());
        validate_node_config(root.get());
        read_host(root.get(), c);
        read_guest(root.get(), c);
        read_network(json_object_get(root.get(), "network"), c.network, node_name);
        read_oci(json_object_get(root.get(), "oci"), c.oci, node_name);
        read_checkpoint(json_object_get(root.get(), "checkpoint"), c.checkpoint);
        if (json_t* d = json_object_get(root.get(), "devices")) c.devices = json_ref(d);
        c.site = parse_site_catalogue(json_object_get(root.get(), "images"), json_object_get(root.get(), "partitions"));
    } catch (Error& e) {
        SVM_CONTEXT(e, shown);
        throw;
    }
    return c;
}

NodeConfig load_config(const std::string& path, const std::string& node_name) {
    return parse_config(read_file(path), node_name, path);
}

}  // namespace svm
