#include "seed.hpp"

#include <algorithm>
#include <cctype>

#include "domain_xml.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_script.hpp"
#include "irq_profile.hpp"
#include "seed_iso.hpp"
#include "srun_relay.hpp"
#include "ssh_keys.hpp"

namespace svm {

std::string ready_marker(const JobPlan& p) {
    return "SLURM_VM_READY job=" + std::to_string(p.job_id) + " node=" + p.node;
}

std::string set_up_marker(const JobPlan& p) {
    return "SLURM_VM_SET_UP job=" + std::to_string(p.job_id) + " node=" + p.node;
}

std::string agent_marker(const JobPlan& p) {
    return "SLURM_VM_AGENT job=" + std::to_string(p.job_id) + " node=" + p.node;
}

std::string seed_meta_data(const JobPlan& p) {
    return "instance-id: slurm-vm-" + std::to_string(p.job_id) + "-" + p.node + "\n" + "local-hostname: " + p.hostname +
           "\n";
}

std::string seed_network_config(const JobPlan& p) {
    if (p.ip.empty()) return "version: 2\nethernets: {}\n";
    std::string s = "version: 2\nethernets:\n  job0:\n    match:\n      macaddress: \"" + p.mac + "\"\n";
    s += "    addresses: [\"" + p.ip + "/" + std::to_string(p.prefix_len) + "\"]\n";
    if (!p.gateway.empty()) s += "    gateway4: \"" + p.gateway + "\"\n";
    return s;
}
namespace {

// An interface address pattern for svm_netdevs (scripts/netdevs.sh), used there
// as an unquoted case pattern: hex digits, colons and '*' only.
void check_netdev_pattern(const std::string& pattern) {
    if (pattern.empty() || pattern.find_first_not_of("0123456789abcdefABCDEF:*") != std::string::npos)
        SVM_THROW("not an interface address pattern: \"" + pattern + "\"");
}

std::string lower(std::string v) {
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return v;
}

// A file's bytes for a here-document of the script: its last line break is
// the here-document's own (one is added when it has none).
std::string here_doc_text(const std::string& content) {
    if (!content.empty() && content.back() == '\n') return content.substr(0, content.size() - 1);
    return content;
}

}  // namespace

std::string seed_fabric_script(const JobPlan& p) {
    if (p.fabric_ip.empty()) return "";
    std::string guid = lower(p.vf_port_guid);
    if (guid.empty() || guid.find_first_not_of("0123456789abcdef:") != std::string::npos)
        SVM_THROW("the plan's VF port GUID \"" + p.vf_port_guid + "\" is not a GUID");
    return render_guest_script(
        "fabric.sh",
        {{"SVM_PORT_GUID", guid}, {"SVM_FABRIC_ADDRESS", p.fabric_ip + "/" + std::to_string(p.fabric_prefix_len)}});
}

std::string seed_irq_script(const JobPlan& p) {
    const IrqProfile* prof = find_irq_profile(p.irq_profile);
    if (!prof) SVM_THROW("unknown interrupt moderation profile \"" + p.irq_profile + "\" in the plan");
    if (prof->settings.empty() || p.vf_link_layer.empty()) return "";
    // What the VF's interface shows in /sys/class/net/*/address: its MAC, or
    // (IPoIB) 20 bytes ending with the port GUID. Used as an unquoted case
    // pattern, so only hex digits and colons pass.
    std::string pattern;
    if (p.vf_link_layer == "infiniband" && !p.vf_port_guid.empty()) pattern = "*" + lower(p.vf_port_guid);
    else if (!p.vf_mac.empty()) pattern = lower(p.vf_mac);
    if (pattern.find_first_not_of("0123456789abcdef:*") != std::string::npos) pattern.clear();
    std::string args;
    for (const auto& [k, v] : prof->settings) args += (args.empty() ? "" : " ") + k + " " + v;
    return render_guest_script("irq.sh",
                               {{"SVM_IRQ_PROFILE", prof->name}, {"SVM_IRQ_ARGS", args}, {"SVM_IRQ_PATTERN", pattern}});
}

std::string seed_mounts_script(const JobPlan& p, const std::string& filesystems) {
    if (p.shares.empty() && p.workdir.empty()) return "";
    std::string shares;
    for (const auto& s : p.shares) {
        if (s.find('\n') != std::string::npos) SVM_THROW("the share \"" + s + "\" holds a line break");
        shares += (shares.empty() ? "" : "\n") + s;
    }
    return render_guest_script("mounts.sh", {{"SVM_SHARES", shares, true},
                                             {"SVM_SHARES_VIA", p.shares_via == "virtiofs" ? "virtiofs" : "9p"},
                                             {"SVM_FILESYSTEMS", filesystems},
                                             {"SVM_WORKDIR", p.workdir},
                                             {"SVM_UID", std::to_string(p.uid)},
                                             {"SVM_GID", std::to_string(p.gid)}});
}

std::string seed_sshd_start_script(const JobPlan& p, const std::string& systemd_dir) {
    return render_guest_script("sshd.sh", {{"SVM_SYSTEMD_DIR", systemd_dir}, {"SVM_READY_MARKER", ready_marker(p)}});
}

std::string seed_no_motd_script(const std::string& pam_file) {
    return render_guest_script("no-motd.sh", {{"SVM_PAM_FILE", pam_file}});
}

std::string agent_script() { return guest_script_body("agent.sh"); }

std::string seed_agent_script(const JobPlan& p) {
    return render_guest_script("agent-start.sh", {{"SVM_AGENT_PORT", kAgentPortNames[0]},
                                                  {"SVM_AGENT_PORT_OUT", kAgentPortNames[1]},
                                                  {"SVM_AGENT_PORT_ERR", kAgentPortNames[2]},
                                                  {"SVM_USER", p.user},
                                                  {"SVM_FLAGS", kGuestFlagDir},
                                                  {"SVM_AGENT_MARKER", agent_marker(p)},
                                                  {"SVM_AGENT", agent_script(), true}});
}

namespace {

// What the job's commands need as SSH clients, and srun's shim (client.sh).
std::string ssh_client_script(const JobPlan& p, const SeedKeys& k) {
    return render_guest_script("client.sh", {{"SVM_UID", std::to_string(p.uid)},
                                             {"SVM_GID", std::to_string(p.gid)},
                                             {"SVM_KEX", kGuestKex},
                                             {"SVM_SRUN_DIR", kGuestSrunDir},
                                             {"SVM_KNOWN_HOSTS", k.known_hosts, true},
                                             {"SVM_USER_KEY", here_doc_text(k.user_private), true},
                                             {"SVM_SRUN", here_doc_text(guest_srun_shim()), true}});
}

// What sshd needs (ssh-server.sh).
std::string ssh_server_script(const JobPlan& p, const SeedKeys& k) {
    return render_guest_script("ssh-server.sh", {{"SVM_PEERS", std::to_string(p.peers.size())},
                                                 {"SVM_HOST_KEY", k.host_private, true},
                                                 {"SVM_HOST_PUBLIC", trim(k.host_public) + "\n", true},
                                                 {"SVM_AUTHORIZED_KEYS", trim(k.user_public) + "\n", true}});
}

// The guest's NIC, found by its MAC, gets the job's address (network.sh).
std::string network_script(const JobPlan& p) {
    if (p.ip.empty()) return "";
    check_netdev_pattern(p.mac);
    return render_guest_script(
        "network.sh",
        {{"SVM_MAC", p.mac}, {"SVM_ADDRESS", p.ip + "/" + std::to_string(p.prefix_len)}, {"SVM_GATEWAY", p.gateway}});
}

}  // namespace

std::string seed_user_script(const JobPlan& p, const std::string& etc) {
    // Fields of passwd and group lines: no separator, no line break.
    for (const std::string* f : {&p.user, &p.group, &p.home})
        if (f->find_first_of(":\n") != std::string::npos)
            SVM_THROW("the job's user, group or home \"" + *f + "\" cannot be a field of the guest's passwd");
    return render_guest_script("user.sh", {{"SVM_ETC", etc},
                                           {"SVM_USER", p.user},
                                           {"SVM_GROUP", p.group},
                                           {"SVM_HOME", p.home},
                                           {"SVM_UID", std::to_string(p.uid)},
                                           {"SVM_GID", std::to_string(p.gid)}});
}

std::string seed_hosts_script(const JobPlan& p, const std::string& files) {
    std::string hosts;
    for (const auto& peer : p.peers) {
        std::string line = (peer.fabric_ip.empty() ? peer.ip : peer.fabric_ip) + " " + peer.hostname + " # slurm-vm";
        sh_single_quote(line, "a peer's hosts line");  // no line break in it
        hosts += line + "\n";
    }
    return render_guest_script("hosts.sh", {{"SVM_HOSTS_FILES", files}, {"SVM_HOSTS", hosts, true}});
}

std::string seed_user_data(const JobPlan& p, const SeedKeys& k) {
    // A boothook: cloud-init runs it as root on every boot, early in its
    // network stage, before sshd and the image's other services start (a
    // user-data script would wait for all of them: about 12 s of a stock
    // image's boot under emulation). Later modules of that stage still run
    // after it: see the hosts and sshd parts. Under emulation every process
    // costs tens of milliseconds of the guest's one busy vCPU: what the job's
    // first command needs comes first, with the shell's builtins where they
    // do; what only sshd needs comes after the flag "ready". Its parts are
    // the scripts of lib/guest/scripts, each with the job's values above it.
    if (p.node.find('\n') != std::string::npos) SVM_THROW("the node's name holds a line break");
    std::string s = "#cloud-boothook\n#!/bin/sh\n";
    s += "# slurm-vm: per-boot settings of the guest of job " + std::to_string(p.job_id) + " on " + p.node + ".\n";
    s += "# Generated on the host; runs as root on every boot (a cloud-init boothook).\n";
    s += render_guest_script(
        "head.sh",
        {{"SVM_FLAGS", kGuestFlagDir}, {"SVM_HOSTNAME", p.hostname}, {"SVM_PEERS", std::to_string(p.peers.size())}});
    s += guest_script_body("netdevs.sh");
    // The shares and the working directory in the background (mounts.sh).
    s += seed_mounts_script(p);
    // The job's traffic goes where the peers' hostnames point: the IPoIB
    // addresses when the job has a fabric, else the bridge's. Also in
    // cloud-init's hosts templates, which an image with manage_etc_hosts
    // renders into /etc/hosts after this script.
    s += seed_hosts_script(p);
    s += seed_user_script(p);
    s += seed_agent_script(p);  // needs only the user
    s += ssh_client_script(p, k);
    s += network_script(p);
    s += seed_fabric_script(p);
    s += seed_irq_script(p);
    // The job's first command needs no daemon: it may start while the
    // daemon does. The marker (the keeper's readiness, then TCP 22) comes
    // after it.
    s += render_guest_script("ready.sh", {{"SVM_SET_UP_MARKER", set_up_marker(p)}});
    s += ssh_server_script(p, k);
    s += seed_no_motd_script();
    s += seed_sshd_start_script(p);
    return s;
}

void build_seed_iso(const JobPlan& p, const SeedKeys& k, const std::string& out) {
    replace_file(out,
                 iso9660_image("cidata", {{"user-data", seed_user_data(p, k)},
                                          {"meta-data", seed_meta_data(p)},
                                          {"network-config", seed_network_config(p)}}),
                 0600);
}

}  // namespace svm
