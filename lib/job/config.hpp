// The node configuration (JSON, schema in etc/slurm-vm.schema.json): where state
// lives, how guests are built and networked, site policy. One file per node
// (or one shared by all nodes: "%n" in paths is replaced by the node name).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "json.hpp"
#include "oci_image.hpp"
#include "site_catalogue.hpp"

namespace svm {

struct NetworkConfig {
    // Each job gets a segment of its own (lib/host/guest_net.hpp): a namespace per
    // job and node with a bridge and a VXLAN device whose peers are the job's
    // other nodes. Empty prefix = no guest network.
    std::string prefix;  // IPv4 /16 of every job's segment, e.g. "10.213.0.0/16"
    std::string netns;   // namespace of the node's underlay (VXLAN sockets); "" = the host's; %n expands
    // Every node's underlay address: a name template resolved with the
    // system resolver ("%n", "%n-mgmt", or an address), or an explicit map.
    std::string underlay = "%n";
    std::map<std::string, std::string> underlay_hosts;
    int vxlan_port = 4789;
    int mtu = 1450;  // the guests' MTU (underlay MTU less VXLAN's 50 bytes)
    // Where the job's own traffic between guests goes: "segment" (the NIC
    // above) or "ipoib" (IPoIB on the job's InfiniBand VF, addresses from
    // fabric_prefix; the segment then only carries the host's SSH to the guest).
    std::string fabric = "segment";
    std::string fabric_prefix;  // IPv4 /16, for "ipoib"
};

// Resumable VM jobs (lib/job/checkpoint.hpp): where a requeued job's guests
// are saved, and which jobs are resumable by default.
struct CheckpointConfig {
    std::string dir;  // shared by the nodes; empty: no job is resumable
    uint64_t max_bytes = uint64_t(64) << 30;
    uint64_t reserve_bytes = uint64_t(10) << 30;  // left free on dir's file system by every save
    int timeout_s = 120;
    std::string resume = "never";                   // "auto" or "never"
    std::map<std::string, std::string> partitions;  // partition -> "auto" or "never"
    // The job's --vm-resume: its own ("" = none given), else its partition's,
    // else the site's.
    std::string resume_of(const std::string& asked, const std::string& partition) const;
};

// The group the name service (getgrgid_r: /etc/group, SSSD, LDAP, ...)
// holds for gid: its name ("gid N" for one it cannot describe within 1 MiB),
// nullopt when none.
std::optional<std::string> group_of_gid(gid_t gid);
// The most job ids the guest groups cover (Slurm's default MaxJobId).
constexpr uint32_t kMaxJobGidSpan = 0x03ff0000u;

struct NodeConfig {
    std::string path;       // file it was read from
    std::string node_name;  // this node (for %n)
    std::string state_dir = "/run/slurm-vm";
    std::string libexec_dir = SVM_LIBEXECDIR;
    std::string domain_type = "kvm";  // "kvm" in production, "qemu" (TCG) where KVM is absent
    std::string emulator = "/usr/bin/qemu-system-x86_64";
    std::string qemu_img = "/usr/bin/qemu-img";
    // Each job's guest (QEMU) runs with a group of its own: job_gid_base +
    // the job id (Slurm's job ids are unique, so the group is the job's and
    // no one else's). The site keeps [job_gid_base, job_gid_base + MaxJobId]
    // free of other groups. Default 0x70000000: above systemd's container range.
    uint32_t job_gid_base = 0x70000000u;
    // The KVM device; when it exists, the job's group gets an ACL entry on it
    // for the job's lifetime (libvirt checks it even for TCG guests).
    std::string kvm_device = "/dev/kvm";
    int boot_timeout_s = 300;
    // The longest a --vm-save may take in the epilog (and never more than
    // Slurm's PrologEpilogTimeout leaves: vm_save.hpp save_bound_s); a save
    // past it fails, not the node.
    int save_timeout_s = 300;
    // The guest's console log lives in the state directory (often a tmpfs):
    // past this size the keeper cuts it to its last 64 KiB.
    int64_t console_max_kib = 16384;
    int64_t memory_overhead_mib = 256;  // left to QEMU itself out of the job's memory
    int64_t min_guest_memory_mib = 256;
    int64_t default_guest_memory_mib = 1024;  // when the job has no memory limit
    std::string sysfs_root = "/";             // tests point it at a fake tree
    // Guest memory on hugepages (hugepages.hpp): "off", "auto" (when the
    // guest's NUMA node has enough free ones) or "required"; page size in KiB,
    // 0 = the kernel's default hugepage size.
    std::string hugepages = "auto";
    int64_t hugepage_size_kib = 0;
    // Interrupt moderation profile for the guest's VF when the job names none
    // (irq_profile.hpp: default, latency, throughput).
    std::string irq_profile = "default";
    // Per-job logs an admin reads after the job: <log_dir>/<node>/job_<id>.log
    // (root, 0640), kept log_keep_days (pruned by `slurm-vm sweep`; 0 = never).
    std::string log_dir = "/var/log/slurm-vm";
    int log_keep_days = 30;
    std::string secret_file = SVM_SYSCONFDIR "/secret";  // root-only, same on every node
    std::string default_cmdline = "root=/dev/vda1 rw console=ttyS0";
    std::vector<std::string> allowed_image_dirs;  // empty: any directory
    // Where the jobs' overlays live (scratch space on disk, not the state
    // directory's tmpfs); "%n" = the node. An overlay never grows past its
    // image's virtual size, so max_image_virtual_size is the per-job cap.
    std::string overlay_dir = "/var/lib/slurm-vm/%n/overlays";
    uint64_t max_image_virtual_size = 1ULL << 40;  // 1 TiB
    NetworkConfig network;
    // Host directories shown in the guest at the same path, with the job
    // user's rights only: over virtio-fs (a virtiofsd per share running as
    // the user, virtiofs.hpp) or 9p (served by QEMU running as the user).
    // "%h" = the user's home, "%w" = the job's working directory. Empty: none
    // (the image mounts the site's network file system itself).
    std::vector<std::string> shares = {"%h", "%w"};
    // When set, shared directories must lie inside one of these (real paths).
    // Shares are always directories the user owns, never slurm-vm's own.
    std::vector<std::string> share_roots;
    // "virtiofs" (any current Linux guest: RHEL-family and Debian cloud
    // kernels have no 9p) or "9p" (no daemon, guest memory not shared).
    std::string shares_via = "virtiofs";
    std::string virtiofsd;  // its path; empty: the first of the usual places
    Json devices;           // the "devices" object (device layer), may be null
    // The site's images (--vm-image=NAME) and the partitions that run jobs in
    // a VM by default or always ("images", "partitions"; site_catalogue.hpp).
    SiteCatalogue site;
    // Registry images (--vm-image=docker://...): skopeo, the per-node cache
    // ("%n" = the node) and its bound, registries reached over plain HTTP.
    OciSettings oci;
    CheckpointConfig checkpoint;

    std::string job_dir(uint32_t job_id) const;
    gid_t job_gid(uint32_t job_id) const;
    // The job whose group gid is, if it is one (the inverse of job_gid).
    std::optional<uint32_t> job_of_gid(gid_t gid) const;  // the job's guest group (see job_gid_base)
    // The job's guest group when the name service (NSS: /etc/group, SSSD,
    // LDAP, ...) holds no group of that gid; else throws svm::UserError with
    // one sentence (the job fails, the node stays up: the site's range
    // overlaps its groups, which doctor reports).
    gid_t free_job_gid(uint32_t job_id) const;
    std::string ledger_dir() const;
    std::string job_overlay_dir(uint32_t job_id) const;  // <overlay_dir>/job_<id>
    std::string ledger_path(uint32_t job_id) const;
    std::string lease_dir() const;    // IP leases, shared by all nodes of one host
    std::string job_log_dir() const;  // <log_dir>/<node>
};

NodeConfig load_config(const std::string& path, const std::string& node_name);

// A node configuration document against etc/slurm-vm.schema.json with its
// devices part (compiled in): every rule on a single value, and the rules
// within one object; throws one sentence naming the first violation's key path.
void validate_node_config(const json_t* doc);
// Parses configuration text (tests and `slurm-vm doctor`): validates it
// (validate_node_config) before any value is read, then checks what the
// schema cannot say (an image a partition names is in the catalogue).
NodeConfig parse_config(const std::string& text, const std::string& node_name, const std::string& shown);

std::string expand_node(const std::string& s, const std::string& node_name);

}  // namespace svm
