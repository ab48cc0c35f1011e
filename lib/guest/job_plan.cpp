#include "job_plan.hpp"

#include <iterator>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"

namespace svm {

static void set_str(json_t* o, const char* k, const std::string& v) {
    json_object_set_new(o, k, json_string(v.c_str()));
}
static void set_int(json_t* o, const char* k, int64_t v) { json_object_set_new(o, k, json_integer(v)); }

std::string JobPlan::to_json() const {
    Json o(json_object());
    json_t* j = o.get();
    set_int(j, "job_id", job_id);
    set_int(j, "uid", uid);
    set_int(j, "gid", gid);
    set_int(j, "guest_gid", guest_gid);
    set_str(j, "user", user);
    set_str(j, "group", group);
    set_str(j, "home", home);
    set_str(j, "workdir", workdir);
    set_str(j, "node", node);
    set_int(j, "node_index", node_index);
    json_t* arr = json_array();
    for (const auto& p : peers) {
        json_t* e = json_object();
        set_str(e, "node", p.node);
        set_str(e, "hostname", p.hostname);
        set_str(e, "ip", p.ip);
        set_str(e, "fabric_ip", p.fabric_ip);
        json_array_append_new(arr, e);
    }
    json_object_set_new(j, "peers", arr);
    set_str(j, "image", image);
    if (!image_source.empty()) set_str(j, "image_source", image_source);
    set_str(j, "image_format", image_format);
    set_int(j, "image_virtual_size", static_cast<int64_t>(image_virtual_size));
    set_str(j, "image_digest", image_digest);
    set_int(j, "image_dev", static_cast<int64_t>(image_identity.dev));
    set_int(j, "image_ino", static_cast<int64_t>(image_identity.ino));
    set_int(j, "image_size", static_cast<int64_t>(image_identity.size));
    set_int(j, "image_mtime_sec", image_identity.mtime_sec);
    set_int(j, "image_mtime_nsec", image_identity.mtime_nsec);
    set_str(j, "kernel", kernel);
    set_str(j, "initrd", initrd);
    set_str(j, "kernel_copy", kernel_copy);
    set_str(j, "overlay_dir", overlay_dir);
    set_str(j, "initrd_copy", initrd_copy);
    set_str(j, "cmdline", cmdline);
    set_str(j, "hostname", hostname);
    set_str(j, "domain_name", domain_name);
    set_str(j, "ip", ip);
    set_str(j, "mac", mac);
    set_str(j, "gateway", gateway);
    set_int(j, "prefix_len", prefix_len);
    set_str(j, "bridge", bridge);
    set_str(j, "netns", netns);
    set_int(j, "mtu", mtu);
    set_str(j, "domain_type", domain_type);
    set_str(j, "emulator", emulator);
    set_int(j, "boot_timeout_s", boot_timeout_s);
    json_t* sh = json_array();
    for (const auto& h : shares) json_array_append_new(sh, json_string(h.c_str()));
    json_object_set_new(j, "shares", sh);
    set_str(j, "shares_via", shares_via);
    set_str(j, "virtiofsd", virtiofsd);
    json_t* hd = json_array();
    for (const auto& h : hostdevs) {
        json_t* e = json_object();
        set_str(e, "address", h.address);
        set_str(e, "role", h.role);
        set_int(e, "numa_node", h.numa_node);
        json_array_append_new(hd, e);
    }
    json_object_set_new(j, "hostdevs", hd);
    set_int(j, "numa_node", numa_node);
    json_t* nn = json_array();
    for (int n : numa_nodes) json_array_append_new(nn, json_integer(n));
    json_object_set_new(j, "numa_nodes", nn);
    set_str(j, "placement", placement);
    set_str(j, "vf_link_layer", vf_link_layer);
    set_str(j, "vf_mac", vf_mac);
    set_str(j, "vf_port_guid", vf_port_guid);
    set_str(j, "fabric_ip", fabric_ip);
    set_int(j, "fabric_prefix_len", fabric_prefix_len);
    set_str(j, "irq_profile", irq_profile);
    if (!save_path.empty()) set_str(j, "save_path", save_path);
    set_str(j, "hugepages", hugepages);
    set_int(j, "hugepage_size_kib", hugepage_size_kib);
    set_str(j, "device_cpus", device_cpus);
    set_str(j, "devices_json", devices_json);
    set_int(j, "memory_overhead_mib", memory_overhead_mib);
    set_int(j, "min_guest_memory_mib", min_guest_memory_mib);
    set_int(j, "default_guest_memory_mib", default_guest_memory_mib);
    set_str(j, "dir", dir);
    return json_dump(j, true) + "\n";
}

JobPlan JobPlan::from_json(const std::string& text, const std::string& shown) {
    Json o = json_parse(text, shown);
    const json_t* j = o.get();
    JobPlan p;
    auto s = [&](const char* k) { return json_get_string(j, k).value_or(""); };
    auto i = [&](const char* k) { return json_get_int(j, k).value_or(0); };
    p.job_id = static_cast<uint32_t>(i("job_id"));
    p.uid = static_cast<uid_t>(i("uid"));
    p.gid = static_cast<gid_t>(i("gid"));
    p.guest_gid = static_cast<gid_t>(i("guest_gid"));
    p.user = s("user");
    p.group = s("group");
    p.home = s("home");
    p.workdir = s("workdir");
    p.node = s("node");
    p.node_index = static_cast<int>(i("node_index"));
    size_t idx;
    json_t* e;
    json_array_foreach(json_object_get(j, "peers"), idx, e) {
        p.peers.push_back({json_get_string(e, "node").value_or(""), json_get_string(e, "hostname").value_or(""),
                           json_get_string(e, "ip").value_or(""), json_get_string(e, "fabric_ip").value_or("")});
    }
    p.image = s("image");
    p.image_source = json_get_string(j, "image_source").value_or("");
    p.image_format = s("image_format");
    p.image_virtual_size = static_cast<uint64_t>(i("image_virtual_size"));
    p.image_digest = s("image_digest");
    p.image_identity.dev = static_cast<dev_t>(i("image_dev"));
    p.image_identity.ino = static_cast<ino_t>(i("image_ino"));
    p.image_identity.size = static_cast<uint64_t>(i("image_size"));
    p.image_identity.mtime_sec = i("image_mtime_sec");
    p.image_identity.mtime_nsec = static_cast<long>(i("image_mtime_nsec"));
    p.kernel = s("kernel");
    p.initrd = s("initrd");
    p.kernel_copy = s("kernel_copy");
    p.overlay_dir = s("overlay_dir");
    p.initrd_copy = s("initrd_copy");
    p.cmdline = s("cmdline");
    p.hostname = s("hostname");
    p.domain_name = s("domain_name");
    p.ip = s("ip");
    p.mac = s("mac");
    p.gateway = s("gateway");
    p.prefix_len = static_cast<int>(i("prefix_len"));
    p.bridge = s("bridge");
    p.netns = s("netns");
    if (json_get_int(j, "mtu")) p.mtu = static_cast<int>(*json_get_int(j, "mtu"));
    p.domain_type = s("domain_type");
    p.emulator = s("emulator");
    p.boot_timeout_s = static_cast<int>(i("boot_timeout_s"));
    p.shares = json_get_string_array(j, "shares");
    p.shares_via = json_get_string(j, "shares_via").value_or("9p");
    p.virtiofsd = s("virtiofsd");
    json_array_foreach(json_object_get(j, "hostdevs"), idx, e) {
        if (json_is_string(e)) {  // plans written before roles were recorded
            p.hostdevs.push_back({json_string_value(e), "", -1});
            continue;
        }
        p.hostdevs.push_back({json_get_string(e, "address").value_or(""), json_get_string(e, "role").value_or(""),
                              static_cast<int>(json_get_int(e, "numa_node").value_or(-1))});
    }
    p.numa_node = static_cast<int>(json_get_int(j, "numa_node").value_or(-1));
    {
        size_t k;
        json_t* n;
        json_array_foreach(json_object_get(j, "numa_nodes"), k, n) {
            if (json_is_integer(n)) p.numa_nodes.push_back(static_cast<int>(json_integer_value(n)));
        }
    }
    p.placement = json_get_string(j, "placement").value_or("");
    p.vf_link_layer = s("vf_link_layer");
    p.vf_mac = s("vf_mac");
    p.vf_port_guid = s("vf_port_guid");
    p.fabric_ip = s("fabric_ip");
    if (json_get_int(j, "fabric_prefix_len"))
        p.fabric_prefix_len = static_cast<int>(*json_get_int(j, "fabric_prefix_len"));
    p.irq_profile = json_get_string(j, "irq_profile").value_or("default");
    p.save_path = json_get_string(j, "save_path").value_or("");
    p.hugepages = json_get_string(j, "hugepages").value_or("off");
    p.hugepage_size_kib = i("hugepage_size_kib");
    p.device_cpus = s("device_cpus");
    p.devices_json = s("devices_json");
    p.memory_overhead_mib = i("memory_overhead_mib");
    p.min_guest_memory_mib = i("min_guest_memory_mib");
    p.default_guest_memory_mib = i("default_guest_memory_mib");
    p.dir = s("dir");
    return p;
}

JobPlan load_plan(const std::string& path) { return JobPlan::from_json(read_file(path), path); }

namespace {
const char* const kPhaseNames[] = {"", "prepared", "booting", "ready", "failed", "stopped", "login"};
}

GuestState GuestState::parse(const std::string& text) {
    std::string s = trim(text);
    std::string word = s.substr(0, s.find(':'));
    for (size_t i = 1; i < std::size(kPhaseNames); ++i) {
        if (word != kPhaseNames[i]) continue;
        auto phase = static_cast<Phase>(i);
        bool with_reason = phase == Phase::failed || phase == Phase::stopped;
        if (with_reason != (s.size() > word.size())) break;
        return {phase, with_reason ? trim(s.substr(word.size() + 1)) : ""};
    }
    return {};
}

std::string GuestState::text() const {
    std::string name = kPhaseNames[static_cast<size_t>(phase)];
    return ended() ? name + ": " + reason : name;
}

std::string GuestState::failure() const {
    if (phase == Phase::failed || (phase == Phase::stopped && reason != kJobEnded)) return reason;
    return "";
}

GuestState read_guest_state(const JobPlan& p) {
    std::string s;
    if (!read_file_if_exists(p.state_file(), s)) return {};
    return GuestState::parse(s);
}

void write_guest_state(const JobPlan& p, const GuestState& state) {
    replace_file(p.state_file(), state.text() + "\n", 0644);
}

}  // namespace svm
