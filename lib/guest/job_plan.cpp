#include "job_plan.hpp"

#include <iterator>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"

namespace svm {

namespace {

// The plan's fields, listed once for writing (JsonOut) and for reading
// (JsonIn, strict: a key missing or unknown refuses the plan with a sentence
// naming it). P is JobPlan or const JobPlan. Plans are written by root's
// prolog and read by root (keeper, epilog, plugin) and by the job's task
// wrapper; every key is always written but image_source and save_path.
template <class V, class P>
void who_fields(V& v, P& p) {
    v("job_id", p.job_id);
    v("uid", p.uid);
    v("gid", p.gid);
    v("guest_gid", p.guest_gid);
    v("user", p.user);
    v("group", p.group);
    v("home", p.home);
    v("workdir", p.workdir);
    v("node", p.node);
    v("node_index", p.node_index);
    v.objects("peers", p.peers, [](auto& e, auto& peer) {
        e("node", peer.node);
        e("hostname", peer.hostname);
        e("ip", peer.ip);
        e("fabric_ip", peer.fabric_ip);
    });
    v("dir", p.dir);
    v("overlay_dir", p.overlay_dir);
    v.optional("save_path", p.save_path);
    v.optional("checkpoint_dir", p.checkpoint_dir);
    v.optional("restore_from", p.restore_from);
    v.optional("resume_note", p.resume_note);
}

template <class V, class P>
void image_fields(V& v, P& p) {
    v("image", p.image);
    v.optional("image_source", p.image_source);
    v("image_format", p.image_format);
    v("image_virtual_size", p.image_virtual_size);
    v("image_digest", p.image_digest);
    image_identity_fields(v, p.image_identity);
    v("kernel", p.kernel);
    v("initrd", p.initrd);
    v("kernel_copy", p.kernel_copy);
    v("initrd_copy", p.initrd_copy);
    v("cmdline", p.cmdline);
    v("domain_type", p.domain_type);
    v("emulator", p.emulator);
    v("boot_timeout_s", p.boot_timeout_s);
    v("shares", p.shares);
    v("shares_via", p.shares_via);
    v("virtiofsd", p.virtiofsd);
    v("hugepages", p.hugepages);
    v("hugepage_size_kib", p.hugepage_size_kib);
    v("memory_overhead_mib", p.memory_overhead_mib);
    v("min_guest_memory_mib", p.min_guest_memory_mib);
    v("default_guest_memory_mib", p.default_guest_memory_mib);
}

template <class V, class P>
void net_and_device_fields(V& v, P& p) {
    v("hostname", p.hostname);
    v("domain_name", p.domain_name);
    v("ip", p.ip);
    v("mac", p.mac);
    v("gateway", p.gateway);
    v("prefix_len", p.prefix_len);
    v("bridge", p.bridge);
    v("netns", p.netns);
    v("mtu", p.mtu);
    v("fabric_ip", p.fabric_ip);
    v("fabric_prefix_len", p.fabric_prefix_len);
    v.objects("hostdevs", p.hostdevs, [](auto& e, auto& h) {
        e("address", h.address);
        e("role", h.role);
        e("numa_node", h.numa_node);
    });
    v("numa_node", p.numa_node);
    v("numa_nodes", p.numa_nodes);
    v("placement", p.placement);
    v("vf_link_layer", p.vf_link_layer);
    v("vf_mac", p.vf_mac);
    v("vf_port_guid", p.vf_port_guid);
    v("irq_profile", p.irq_profile);
    v("device_cpus", p.device_cpus);
    v("devices_json", p.devices_json);
}

template <class V, class P>
void plan_fields(V& v, P& p) {
    who_fields(v, p);
    image_fields(v, p);
    net_and_device_fields(v, p);
}

}  // namespace

std::string JobPlan::to_json() const {
    JsonOut out;
    plan_fields(out, *this);
    return json_dump(out.take().get(), true) + "\n";
}

JobPlan JobPlan::from_json(const std::string& text, const std::string& shown) {
    Json o = json_parse(text, shown);
    JsonIn in(o.get(), shown);
    JobPlan p;
    plan_fields(in, p);
    in.done();
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
