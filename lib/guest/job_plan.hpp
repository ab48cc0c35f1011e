// What the prolog decided for one job on one node, written to the job's
// directory for the keeper (which starts the guest) and the task wrapper
// (which runs the user's commands in it). Readable by the job's user.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "domain_xml.hpp"
#include "image_check.hpp"

namespace svm {

struct GuestPeer {
    std::string node;      // Slurm node name
    std::string hostname;  // guest hostname
    std::string ip;
    std::string fabric_ip;  // on the job's InfiniBand network (IPoIB over the VF); "" = none
};

struct JobPlan {
    uint32_t job_id = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    gid_t guest_gid = 0;  // QEMU's group: the job's own (NodeConfig::job_gid)
    std::string user, group, home, workdir;
    std::string node;              // this node
    int node_index = 0;            // position in the job's node list
    std::vector<GuestPeer> peers;  // every guest of the job, in node order
    std::string image, image_format;
    // What the job named when it is not the file booted: a name of the site's
    // catalogue (also a partition's default image) or a registry reference.
    std::string image_source;
    uint64_t image_virtual_size = 0;
    std::string image_digest;              // "sha256:<hex>" of the image's content, for accounting
    FileIdentity image_identity;           // the checked file: the keeper reopens it and compares
    std::string kernel, initrd, cmdline;   // as the user gave them (shown, recorded)
    std::string kernel_copy, initrd_copy;  // what QEMU boots: root's copies in the job directory
    std::string hostname, domain_name;
    std::string ip, mac, gateway;
    int prefix_len = 16;
    // The job's traffic between guests over IPoIB on the VF (network.fabric
    // "ipoib"): this guest's address there; the peers' hostnames resolve to
    // their fabric_ip. "" = the job's traffic uses the bridge.
    std::string fabric_ip;
    int fabric_prefix_len = 16;
    std::string bridge, netns;  // the job's bridge, in the job's namespace on this node
    int mtu = 0;                // the guest NIC's MTU (0: the default)
    std::string domain_type, emulator;
    int boot_timeout_s = 300;
    std::vector<std::string> shares;    // host directories mounted at the same path in the guest
    std::string shares_via = "9p";      // "virtiofs" or "9p" (NodeConfig::shares_via)
    std::string virtiofsd;              // its path, for "virtiofs"
    std::vector<HostdevSpec> hostdevs;  // PCI functions passed through (GPUs, companions, VF), with role and NUMA node
    int numa_node = -1;                 // the devices' NUMA node, -1 = none/unknown
    // The devices sit on several NUMA nodes: guest memory is interleaved over
    // them (and `placement` says so). Empty otherwise.
    std::vector<int> numa_nodes;
    std::string placement;  // what was done for locality, in words
    // The VF, when the guest has one: how the guest finds its interface(s).
    std::string vf_link_layer;         // "infiniband" or "ethernet"
    std::string vf_mac, vf_port_guid;  // given to the VF by the device steps
    // Interrupt moderation profile the guest applies to the VF (irq_profile.hpp):
    // the job's --vm-irq-profile, else the node's irq_profile. "default" = none.
    std::string irq_profile = "default";
    // --vm-save: where the epilog writes this guest's disk (overlay and base)
    // as a new image, as the user. Set on the job's first node only.
    std::string save_path;
    // --vm-resume=auto (lib/job/checkpoint.hpp): the job's checkpoint
    // directory, where this guest is saved when Slurm requeues the job ("" =
    // not resumable); restore_from: the saved guest this run restores
    // instead of booting; resume_note: what the batch step tells the user
    // (why the job is not resumable, or starts afresh).
    std::string checkpoint_dir, restore_from, resume_note;
    // The node's hugepage policy for the guest's memory (hugepages.hpp); the
    // keeper decides with the guest's size and records it in guest.json.
    std::string hugepages = "off";
    int64_t hugepage_size_kib = 0;  // 0 = the kernel's default size
    std::string device_cpus;        // CPUs of that node
    std::string devices_json;       // what was given (accounting): GPUs and VF
    int64_t memory_overhead_mib = 256, min_guest_memory_mib = 256, default_guest_memory_mib = 1024;

    // Files in the job directory.
    std::string dir;
    std::string overlay_dir;  // the job's directory on the node's overlay scratch space
    std::string overlay() const { return (overlay_dir.empty() ? dir : overlay_dir) + "/overlay.qcow2"; }
    std::string seed() const { return dir + "/seed.iso"; }
    std::string console_log() const { return dir + "/console.log"; }   // QEMU's (job group), capped by the keeper
    std::string console_copy() const { return dir + "/console.txt"; }  // for the user: filtered, when the guest failed
    std::string user_key() const { return dir + "/id_ed25519"; }
    std::string known_hosts() const { return dir + "/known_hosts"; }
    std::string ssh_socket() const { return dir + "/ssh.sock"; }
    // The guest's serial channels of the job's first command (root's ends,
    // the keeper's: kAgentPortNames of lib/guest/domain_xml.hpp, in order),
    // and the socket where that command takes them from the keeper.
    std::string agent_channel(size_t i) const {
        return dir + (i == 0 ? "/agent.sock" : i == 1 ? "/agent-out.sock" : "/agent-err.sock");
    }
    std::string agent_socket() const { return dir + "/agent-take.sock"; }
    std::string state_file() const { return dir + "/state"; }
    // The keeper has written this node's VM record into the job's
    // AdminComment (or tried, or publishes none): the batch step ends only
    // after it, since Slurm (24.11) takes no AdminComment of a finished job.
    std::string record_written() const { return dir + "/record.written"; }
    std::string embed_root() const { return dir + "/libvirt"; }
    std::string keeper_pid_file() const { return dir + "/keeper.pid"; }
    std::string plan_file() const { return dir + "/plan.json"; }
    // virtiofsd of share i: its socket (root:<job group> 0660), pid file, log.
    std::string share_socket(size_t i) const { return dir + "/share" + std::to_string(i) + ".sock"; }
    std::string share_pid_file(size_t i) const { return dir + "/share" + std::to_string(i) + ".pid"; }
    std::string share_log() const { return dir + "/virtiofsd.log"; }

    std::string to_json() const;
    static JobPlan from_json(const std::string& text, const std::string& shown);
};

JobPlan load_plan(const std::string& path);

// The guest's state as the prolog and the keeper report it to the task
// wrapper, the epilog and `slurm-vm status`, in the job directory's "state"
// file: "prepared", "booting", "login" (still setting itself up, but its
// agent takes the job's first command: see seed_agent_script), "ready", "failed:
// <reason>" (refused, or never ready) or "stopped: <reason>" (was up, then
// ended; kJobEnded is the normal end).
struct GuestState {
    enum class Phase { none, prepared, booting, ready, failed, stopped, login };
    Phase phase = Phase::none;
    std::string reason;  // of failed and stopped

    static GuestState parse(const std::string& text);  // unknown text: none
    std::string text() const;
    bool ended() const { return phase == Phase::failed || phase == Phase::stopped; }
    // Why the guest failed the job; "" when it did not (a normal end included).
    std::string failure() const;
};
inline constexpr const char* kJobEnded = "the job ended";

GuestState read_guest_state(const JobPlan& p);
void write_guest_state(const JobPlan& p, const GuestState& state);

}  // namespace svm
