#include "config.hpp"

#include <grp.h>

#include <cerrno>
#include <map>
#include <set>

#include "config_schemas.hpp"  // generated: the schemas of etc/ as strings
#include "error.hpp"
#include "fs.hpp"
#include "guest_net.hpp"
#include "hugepages.hpp"
#include "irq_profile.hpp"
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

const std::set<std::string>& config_keys(const std::string& section) {
    static const std::map<std::string, std::set<std::string>> keys = {
        {"",
         {"state_dir",
          "libexec_dir",
          "domain_type",
          "emulator",
          "qemu_img",
          "boot_timeout_s",
          "save_timeout_s",
          "memory_overhead_mib",
          "min_guest_memory_mib",
          "default_guest_memory_mib",
          "default_cmdline",
          "secret_file",
          "job_gid_base",
          "kvm_device",
          "console_max_kib",
          "overlay_dir",
          "share_roots",
          "sysfs_root",
          "log_dir",
          "log_keep_days",
          "hugepages",
          "hugepage_size_kib",
          "irq_profile",
          "allowed_image_dirs",
          "max_image_virtual_size_gib",
          "network",
          "shares",
          "shares_via",
          "virtiofsd",
          "devices",
          "images",
          "partitions",
          "oci",
          "$schema",
          "comment"}},
        {"network", {"netns", "prefix", "underlay", "vxlan_port", "mtu", "fabric", "fabric_prefix"}},
        {"oci",
         {"skopeo", "cache_dir", "cache_max_gib", "insecure_registries", "timeout_s", "max_layer_gib",
          "max_layer_entries", "reserve_gib", "comment"}},
    };
    return keys.at(section);
}

static void reject_unknown(const json_t* obj, const std::set<std::string>& known, const std::string& where) {
    const char* key;
    json_t* v;
    json_object_foreach(const_cast<json_t*>(obj), key, v) {
        (void)v;
        if (!known.count(key)) SVM_THROW(where + ": unknown key \"" + key + "\"");
    }
}

static NetworkConfig parse_network(const json_t* n, const std::string& node_name) {
    if (!json_is_object(n)) SVM_THROW("\"network\" must be an object");
    for (const char* gone : {"bridge", "gateway", "isolate_jobs"})
        if (json_object_get(n, gone))
            SVM_THROW(std::string("network.") + gone +
                      " is gone: every job gets a network segment of its own "
                      "(network.prefix, network.underlay; see the README)");
    reject_unknown(n, config_keys("network"), "network");
    NetworkConfig net;
    net.netns = expand_node(json_get_string(n, "netns").value_or(""), node_name);
    net.prefix = json_get_string(n, "prefix").value_or("");
    if (!net.prefix.empty()) segment_address(net.prefix, 0);  // validates it
    if (const json_t* u = json_object_get(n, "underlay"); u && json_is_object(u)) {
        const char* k;
        json_t* v;
        json_object_foreach(const_cast<json_t*>(u), k, v) {
            if (!json_is_string(v)) SVM_THROW("network.underlay." + std::string(k) + " must be an IPv4 address");
            net.underlay_hosts[k] = json_string_value(v);
        }
    } else if (u) {
        if (!json_is_string(u)) SVM_THROW("network.underlay must be a name template or an object of addresses");
        net.underlay = json_string_value(u);
    }
    net.vxlan_port = static_cast<int>(json_get_int(n, "vxlan_port").value_or(4789));
    if (net.vxlan_port < 1 || net.vxlan_port > 65535) SVM_THROW("network.vxlan_port must be a UDP port");
    net.mtu = static_cast<int>(json_get_int(n, "mtu").value_or(1450));
    if (net.mtu < 576 || net.mtu > 9000) SVM_THROW("network.mtu must be between 576 and 9000");
    net.fabric = json_get_string(n, "fabric").value_or("segment");
    if (net.fabric == "bridge") net.fabric = "segment";  // its former name
    net.fabric_prefix = json_get_string(n, "fabric_prefix").value_or("");
    if (net.fabric != "segment" && net.fabric != "ipoib")
        SVM_THROW("network.fabric must be \"segment\" or \"ipoib\", not \"" + net.fabric + "\"");
    if (net.fabric == "ipoib") {
        if (net.fabric_prefix.empty())
            SVM_THROW("network.fabric \"ipoib\" needs network.fabric_prefix (an IPv4 /16 for the IPoIB addresses)");
        fabric_address(net.fabric_prefix, 1, 0);  // validates it
        if (net.prefix.empty())
            SVM_THROW("network.fabric \"ipoib\" needs network.prefix too: the host reaches each guest's SSH over it");
    }
    return net;
}

void validate_node_config(const json_t* doc) {
    static const Json node = json_parse(kNodeSchema, "slurm-vm.schema.json");
    static const Json devices = json_parse(kDevicesSchema, "slurm-vm.devices.schema.json");
    validate_json(doc, node.get(), [](const std::string& name) -> const json_t* {
        return name == "slurm-vm.devices.schema.json" ? devices.get() : nullptr;
    });
}

NodeConfig parse_config(const std::string& text, const std::string& node_name, const std::string& shown) {
    Json root = json_parse(text, shown);
    if (!json_is_object(root.get())) SVM_THROW(shown + ": the configuration must be a JSON object");
    NodeConfig c;
    c.path = shown;
    c.node_name = node_name;
    try {
        reject_unknown(root.get(), config_keys(""), "top level");
        if (auto v = json_get_string(root.get(), "state_dir")) c.state_dir = expand_node(*v, node_name);
        if (auto v = json_get_string(root.get(), "libexec_dir")) c.libexec_dir = *v;
        if (auto v = json_get_string(root.get(), "domain_type")) c.domain_type = *v;
        if (c.domain_type != "kvm" && c.domain_type != "qemu")
            SVM_THROW("\"domain_type\" must be \"kvm\" or \"qemu\", not \"" + c.domain_type + "\"");
        if (auto v = json_get_string(root.get(), "emulator")) c.emulator = *v;
        if (auto v = json_get_string(root.get(), "qemu_img")) c.qemu_img = *v;
        if (auto v = json_get_int(root.get(), "boot_timeout_s")) c.boot_timeout_s = static_cast<int>(*v);
        if (c.boot_timeout_s < 5) SVM_THROW("\"boot_timeout_s\" must be at least 5");
        if (auto v = json_get_int(root.get(), "save_timeout_s")) c.save_timeout_s = static_cast<int>(*v);
        if (c.save_timeout_s < 1 || c.save_timeout_s > 86400) SVM_THROW("\"save_timeout_s\" must be 1 to 86400");
        if (auto v = json_get_int(root.get(), "memory_overhead_mib")) c.memory_overhead_mib = *v;
        if (auto v = json_get_int(root.get(), "min_guest_memory_mib")) c.min_guest_memory_mib = *v;
        if (auto v = json_get_int(root.get(), "default_guest_memory_mib")) c.default_guest_memory_mib = *v;
        if (auto v = json_get_string(root.get(), "default_cmdline")) c.default_cmdline = *v;
        if (auto v = json_get_string(root.get(), "secret_file")) c.secret_file = *v;
        if (auto v = json_get_int(root.get(), "job_gid_base")) {
            if (*v < 1000 || *v + kMaxJobGidSpan > 0x7fffffffLL)
                SVM_THROW(
                    "\"job_gid_base\" must be at least 1000 and leave room for every job id below 2^31 (at most " +
                    std::to_string(0x7fffffffLL - kMaxJobGidSpan) + ")");
            c.job_gid_base = static_cast<uint32_t>(*v);
        }
        if (auto v = json_get_string(root.get(), "kvm_device")) c.kvm_device = *v;
        if (auto v = json_get_int(root.get(), "console_max_kib")) c.console_max_kib = *v;
        if (auto v = json_get_string(root.get(), "overlay_dir")) c.overlay_dir = *v;
        c.overlay_dir = expand_node(c.overlay_dir, node_name);
        if (c.overlay_dir.empty() || c.overlay_dir[0] != '/') SVM_THROW("\"overlay_dir\" must be an absolute path");
        if (c.console_max_kib < 128) SVM_THROW("\"console_max_kib\" must be at least 128");
        if (c.kvm_device.empty() || c.kvm_device[0] != '/') SVM_THROW("\"kvm_device\" must be an absolute path");
        if (auto v = json_get_string(root.get(), "sysfs_root")) c.sysfs_root = *v;
        if (auto v = json_get_string(root.get(), "log_dir")) c.log_dir = *v;
        if (c.log_dir.empty() || c.log_dir[0] != '/') SVM_THROW("\"log_dir\" must be an absolute path");
        if (auto v = json_get_int(root.get(), "log_keep_days")) c.log_keep_days = static_cast<int>(*v);
        if (c.log_keep_days < 0) SVM_THROW("\"log_keep_days\" must be 0 (keep forever) or more");
        if (auto v = json_get_string(root.get(), "hugepages")) c.hugepages = *v;
        check_hugepage_mode(c.hugepages);
        if (auto v = json_get_int(root.get(), "hugepage_size_kib")) c.hugepage_size_kib = *v;
        if (c.hugepage_size_kib < 0 ||
            (c.hugepage_size_kib != 0 &&
             (c.hugepage_size_kib < 64 || (c.hugepage_size_kib & (c.hugepage_size_kib - 1)))))
            SVM_THROW(
                "\"hugepage_size_kib\" must be a hugepage size in KiB (2048 or 1048576 on x86), or 0 for the "
                "kernel's default");
        if (auto v = json_get_string(root.get(), "irq_profile")) c.irq_profile = *v;
        require_irq_profile(c.irq_profile, "\"irq_profile\"");
        c.allowed_image_dirs = json_get_string_array(root.get(), "allowed_image_dirs");
        for (auto& d : c.allowed_image_dirs)
            if (d.empty() || d[0] != '/') SVM_THROW("\"allowed_image_dirs\" entries must be absolute paths");
        if (json_object_get(root.get(), "shares")) c.shares = json_get_string_array(root.get(), "shares");
        c.share_roots = json_get_string_array(root.get(), "share_roots");
        if (auto v = json_get_string(root.get(), "shares_via")) c.shares_via = *v;
        if (c.shares_via != "virtiofs" && c.shares_via != "9p")
            SVM_THROW("\"shares_via\" must be \"virtiofs\" or \"9p\", not \"" + c.shares_via + "\"");
        if (auto v = json_get_string(root.get(), "virtiofsd")) c.virtiofsd = *v;
        if (!c.virtiofsd.empty() && c.virtiofsd[0] != '/') SVM_THROW("\"virtiofsd\" must be an absolute path");
        for (auto& d : c.share_roots)
            if (d.empty() || d[0] != '/') SVM_THROW("\"share_roots\" entries must be absolute paths");
        if (auto v = json_get_int(root.get(), "max_image_virtual_size_gib"))
            c.max_image_virtual_size = static_cast<uint64_t>(*v) << 30;
        if (json_t* n = json_object_get(root.get(), "network")) c.network = parse_network(n, node_name);
        if (json_t* d = json_object_get(root.get(), "devices")) c.devices = json_ref(d);
        c.oci.cache_dir = expand_node(c.oci.cache_dir, node_name);
        if (json_t* o = json_object_get(root.get(), "oci")) {
            if (!json_is_object(o)) SVM_THROW("\"oci\" must be an object");
            reject_unknown(o, config_keys("oci"), "oci");
            if (auto v = json_get_string(o, "skopeo")) c.oci.skopeo = *v;
            if (auto v = json_get_string(o, "cache_dir")) c.oci.cache_dir = expand_node(*v, node_name);
            if (auto v = json_get_int(o, "cache_max_gib")) {
                if (*v < 0) SVM_THROW("oci.cache_max_gib must be 0 (keep only what jobs use) or more");
                c.oci.cache_max_bytes = static_cast<uint64_t>(*v) << 30;
            }
            c.oci.insecure_registries = json_get_string_array(o, "insecure_registries");
            if (auto v = json_get_int(o, "timeout_s")) c.oci.timeout_s = static_cast<int>(*v);
            if (c.oci.timeout_s < 10) SVM_THROW("oci.timeout_s must be at least 10");
            if (auto v = json_get_int(o, "max_layer_gib")) {
                if (*v < 1) SVM_THROW("oci.max_layer_gib must be at least 1");
                c.oci.max_layer_bytes = static_cast<uint64_t>(*v) << 30;
            }
            if (auto v = json_get_int(o, "max_layer_entries")) {
                if (*v < 1) SVM_THROW("oci.max_layer_entries must be at least 1");
                c.oci.max_layer_entries = static_cast<size_t>(*v);
            }
            if (auto v = json_get_int(o, "reserve_gib")) {
                if (*v < 0) SVM_THROW("oci.reserve_gib must be 0 or more");
                c.oci.reserve_bytes = static_cast<uint64_t>(*v) << 30;
            }
            if (c.oci.skopeo.empty() || c.oci.skopeo[0] != '/') SVM_THROW("oci.skopeo must be an absolute path");
            if (c.oci.cache_dir.empty() || c.oci.cache_dir[0] != '/')
                SVM_THROW("oci.cache_dir must be an absolute path");
        }
        c.site = parse_site_catalogue(json_object_get(root.get(), "images"), json_object_get(root.get(), "partitions"));
        // The schema in etc/ states the same rules for admins and editors;
        // what the parser above let through, the schema may still refuse.
        validate_node_config(root.get());
    } catch (Error& e) {
        SVM_CONTEXT(e, shown);
        throw;
    }
    if (c.state_dir.empty() || c.state_dir[0] != '/') SVM_THROW(shown + ": \"state_dir\" must be an absolute path");
    return c;
}

NodeConfig load_config(const std::string& path, const std::string& node_name) {
    return parse_config(read_file(path), node_name, path);
}

}  // namespace svm
