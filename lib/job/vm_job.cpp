#include "vm_job.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <optional>
#include <set>

#include "cgroup.hpp"
#include "checkpoint.hpp"
#include "dev_acl.hpp"
#include "device_steps.hpp"
#include "embed_root.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_net.hpp"
#include "host_changes.hpp"
#include "hostlist.hpp"
#include "hugepages.hpp"
#include "image_check.hpp"
#include "irq_profile.hpp"
#include "job_keys.hpp"
#include "kernel_cmdline.hpp"
#include "ledger.hpp"
#include "log.hpp"
#include "oci_image.hpp"
#include "pci_device.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "sha256.hpp"
#include "site_catalogue.hpp"
#include "user_open.hpp"
#include "virtiofs.hpp"
#include "vm_save.hpp"

namespace svm {

namespace {

std::string env_get(char** envp, const char* name) {
    size_t n = std::strlen(name);
    for (char** e = envp; e && *e; ++e)
        if (!std::strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return "";
}

uint32_t parse_u32(const std::string& s, const char* what) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 10)
        SVM_THROW(std::string(what) + " is missing or not a number (\"" + s + "\")");
    unsigned long v = std::stoul(s);
    if (v > 0xffffffffUL) SVM_THROW(std::string(what) + " is out of range");
    return static_cast<uint32_t>(v);
}

void chown_mode(const std::string& path, uid_t uid, gid_t gid, mode_t mode) {
    if (::chown(path.c_str(), uid, gid) != 0) SVM_THROW_ERRNO("chown " + path);
    if (::chmod(path.c_str(), mode) != 0) SVM_THROW_ERRNO("chmod " + path);
}

// Gives the job's group read/write on a device node for the job's lifetime
// (recorded first; the epilog takes it back). Absent devices are skipped.
void grant_device(Ledger& ledger, const std::string& path, gid_t gid) {
    if (!path_exists(path)) return;
    ledger.record(DevAclChange{path, gid});
    grant_group_rw(path, gid);
}

// The job's directory: root's, 0700, and the job's user may only pass
// through it (an ACL entry "user:<uid>:--x") to the files the task wrapper
// needs: no other user sees the plan, and the user creates, renames or
// removes nothing in it.
void make_job_dir(const std::string& dir, uid_t uid) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) SVM_THROW_ERRNO("mkdir " + dir);
    chown_mode(dir, 0, 0, 0700);
    if (uid != 0) grant_user(dir, uid, 1);
}

// The IOMMU groups of the functions given to the guest (each once).
std::vector<int> vfio_groups_of(const SysfsRoot& root, const std::vector<PciAddress>& functions) {
    std::vector<int> groups;
    for (const auto& a : functions) {
        auto g = read_pci_device(root, a).iommu_group;
        if (!g) SVM_THROW(a.str() + " has no IOMMU group: the node's IOMMU is off");
        if (std::find(groups.begin(), groups.end(), *g) == groups.end()) groups.push_back(*g);
    }
    return groups;
}

// A directory shown in the guest: looked at as the user (its owner and where
// it really is), it must be the user's own, inside the site's share_roots
// when set, and never one of slurm-vm's own directories. Else the job fails
// with one sentence.
void check_share(const std::string& dir, const Credentials& who, const NodeConfig& cfg) {
    std::vector<UserOpen> f(1);
    f[0].path = dir;
    f[0].kind = UserOpen::Kind::directory;
    if (!open_as_user(who, f, 20000) || !f[0].fd)
        SVM_REFUSE(dir + " cannot be opened by user " + who.user +
                   ", so it cannot be shown in the guest; submit "
                   "from a directory of yours");
    std::string owner = std::to_string(f[0].st.st_uid), real = fd_real_path(f[0].fd.get());
    // Neither inside slurm-vm's own directories nor holding one of them.
    std::vector<std::string> ours = {cfg.state_dir, cfg.overlay_dir, cfg.log_dir, cfg.lease_dir()};
    bool holds = std::any_of(ours.begin(), ours.end(), [&](const std::string& o) { return path_inside(o, {real}); });
    if (path_inside(real, ours) || holds)
        SVM_REFUSE(dir + " is or holds one of slurm-vm's own directories (" + real +
                   "); submit from a directory of yours");
    if (owner != std::to_string(who.uid))
        SVM_REFUSE(dir + " is not yours (it belongs to uid " + owner +
                   "): slurm-vm shows the guest only directories "
                   "you own; submit from one of yours");
    if (!cfg.share_roots.empty() && !path_inside(real, cfg.share_roots))
        SVM_REFUSE(dir + " lies outside the directories this site shares with guests (" + [&] {
            std::string l;
            for (const auto& d : cfg.share_roots) l += (l.empty() ? "" : ", ") + d;
            return l;
        }() + "); submit from a directory inside them");
}

ImagePolicy policy_of(const NodeConfig& cfg) {
    ImagePolicy p;
    p.max_virtual_size = cfg.max_image_virtual_size;
    p.allowed_dirs = cfg.allowed_image_dirs;
    p.qemu_img = cfg.qemu_img;
    p.verdict_cache_dir = path_join(cfg.state_dir, "image-checks");
    return p;
}

// QEMU boots copies of the kernel and initrd, at most this large each.
constexpr off_t kMaxBootFile = off_t(512) << 20;

// A kernel or initrd the user gave, opened once as the user: checked here,
// copied later from this very descriptor (copy_boot_file), never reopened.
// st: the opener's fstat (root's own could wait on the user's file system).
UniqueFd open_boot_file_as_user(const std::string& path, const Credentials& who, const char* what, struct stat& st) {
    UniqueFd fd = open_file_as_user(path, who, 30000, &st);
    if (st.st_size == 0) SVM_THROW(path + " (" + what + ") is empty");
    if (st.st_size > kMaxBootFile)
        SVM_THROW(path + " (" + what + ") is larger than " + std::to_string(kMaxBootFile >> 20) + " MiB");
    return fd;
}

// How long a boot file's copy may take: it reads at most kMaxBootFile from
// a user's file system, which may stop answering.
constexpr int kBootCopyMs = 60000;

// Copies in to out, at most kMaxBootFile + 1 bytes; in the kernel where it
// can (sendfile). 0: copied; 2: in is larger; 1 (and errno): failed.
int copy_boot_bytes(int in, int out) {
    off_t off_in = 0;
    while (off_in <= kMaxBootFile) {
        ssize_t n = ::sendfile(out, in, &off_in, static_cast<size_t>(kMaxBootFile + 1 - off_in));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EINVAL || errno == ENOSYS)) break;
        if (n < 0) return 1;
        if (n == 0) break;
    }
    char buf[1 << 16];
    while (off_in <= kMaxBootFile) {  // what sendfile could not do
        ssize_t n = ::pread(in, buf, sizeof buf, off_in);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 1;
        if (n == 0) break;
        off_in += n;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = ::write(out, buf + off, static_cast<size_t>(n - off));
            if (w < 0) return 1;
            off += w;
        }
    }
    return off_in > kMaxBootFile ? 2 : 0;
}

// Copies an opened boot file to a new file of root's, readable by all (see
// provide_boot_file for who can reach it). A child of root's copies, killed
// after kBootCopyMs: the user's file system may stop answering. Returns
// the child's fstat of in after the copy.
struct stat copy_boot_file(int in, const std::string& path, const std::string& dst) {
    UniqueFd out(::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) SVM_THROW_ERRNO("create " + dst);
    RunResult r = run_function(
        [&](int result) {
            int rc = copy_boot_bytes(in, out.get());
            if (rc == 1) std::perror("copy");
            struct stat after;
            if (rc == 0 && (::fstat(in, &after) != 0 || ::write(result, &after, sizeof after) != sizeof after)) rc = 1;
            return rc;
        },
        kBootCopyMs);
    if (r.timed_out)
        SVM_REFUSE(path + " could not be read within " + std::to_string(kBootCopyMs / 1000) +
                   " s; check that its file system responds");
    if (r.status == 2)
        SVM_REFUSE(path + " grew past " + std::to_string(kMaxBootFile >> 20) +
                   " MiB while the job started; leave it unchanged");
    if (r.status != 0 || r.out.size() != sizeof(struct stat))
        SVM_THROW("copy " + path + " to " + dst + ": " + trim(r.err));
    if (::fchmod(out.get(), 0444) != 0) SVM_THROW_ERRNO("chmod " + dst);
    struct stat after;
    std::memcpy(&after, r.out.data(), sizeof after);
    return after;
}

// Drops the least recently used files of dir past `keep` (a use touches a
// file's mtime), and what a failed prolog left half made.
void prune_least_used(const std::string& dir, size_t keep) {
    std::vector<std::pair<int64_t, std::string>> by_use;
    for (const auto& name : list_dir(dir)) {
        struct stat st;
        std::string path = path_join(dir, name);
        if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
            by_use.emplace_back(int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, path);
    }
    if (by_use.size() <= keep) return;
    std::sort(by_use.begin(), by_use.end());
    for (size_t i = 0; i + keep < by_use.size(); ++i) ::unlink(by_use[i].second.c_str());
}

constexpr size_t kKeptBootFiles = 8;  // kept by the node: the most recently used

// QEMU's copy of a kernel or initrd the user gave, at dst in the job's
// directory. The node keeps one copy of each version of a file it was given
// (device, inode, size, mtime and ctime: writing the file changes its ctime),
// root's and readable by all but in root's 0700 directory; a job's copy is a
// hard link to it in the job's directory, which only root and the job's user
// pass through. So a version is copied once per node rather than once per
// job, and reaches only jobs whose users opened that very version. A version
// that changes while it is copied is not kept.
void provide_boot_file(const NodeConfig& cfg, int in, const struct stat& st, const std::string& path,
                       const std::string& dst) {
    std::string dir = path_join(cfg.state_dir, "boot-files");
    std::string kept = path_join(dir, sha256_hex(file_version_key(st)).substr(0, 32));
    if (::link(kept.c_str(), dst.c_str()) == 0) {
        ::utimensat(AT_FDCWD, kept.c_str(), nullptr, 0);  // recently used
        return;
    }
    if (errno != ENOENT) SVM_THROW_ERRNO("link " + kept + " to " + dst);
    mkdir_p(dir, 0700);
    std::string made = kept + ".new." + std::to_string(::getpid());
    ::unlink(made.c_str());
    struct stat after;
    try {
        after = copy_boot_file(in, path, made);
        if (::link(made.c_str(), dst.c_str()) != 0) SVM_THROW_ERRNO("link " + made + " to " + dst);
    } catch (...) {
        ::unlink(made.c_str());
        throw;
    }
    bool same = file_version_key(after) == file_version_key(st);
    if (!same || ::rename(made.c_str(), kept.c_str()) != 0) ::unlink(made.c_str());
    prune_least_used(dir, kKeptBootFiles);
}

}  // namespace

std::string keeper_mark(uint32_t job_id) { return "slurm-vm-keeper\t --job " + std::to_string(job_id) + " "; }

JobRequest job_request_from_env(char** envp) {
    JobRequest r;
    r.job_id = parse_u32(env_get(envp, "SLURM_JOB_ID"), "SLURM_JOB_ID");
    r.uid = parse_u32(env_get(envp, "SLURM_JOB_UID"), "SLURM_JOB_UID");
    std::string gid = env_get(envp, "SLURM_JOB_GID");
    r.gid = gid.empty() ? static_cast<gid_t>(-1) : parse_u32(gid, "SLURM_JOB_GID");
    r.user = env_get(envp, "SLURM_JOB_USER");
    r.workdir = env_get(envp, "SLURM_JOB_WORK_DIR");
    r.node = env_get(envp, "SLURMD_NODENAME");
    r.nodelist = env_get(envp, "SLURM_NODELIST");
    if (r.nodelist.empty()) r.nodelist = env_get(envp, "SLURM_JOB_NODELIST");
    r.image = env_get(envp, "SPANK_SLURM_VM_IMAGE");
    r.kernel = env_get(envp, "SPANK_SLURM_VM_KERNEL");
    r.initrd = env_get(envp, "SPANK_SLURM_VM_INITRD");
    r.cmdline = env_get(envp, "SPANK_SLURM_VM_CMDLINE");
    r.irq_profile = env_get(envp, "SPANK_SLURM_VM_IRQ_PROFILE");
    r.partition = env_get(envp, "SLURM_JOB_PARTITION");
    r.save = env_get(envp, "SPANK_SLURM_VM_SAVE");
    r.resume = env_get(envp, "SPANK_SLURM_VM_RESUME");
    r.sluid = env_get(envp, "SLURM_JOB_SLUID");
    if (!is_sluid(r.sluid)) r.sluid.clear();
    std::string gpus = env_get(envp, "SLURM_JOB_GPUS");
    size_t pos = 0;
    while (!gpus.empty() && pos <= gpus.size()) {
        size_t comma = gpus.find(',', pos);
        std::string t = gpus.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (!t.empty()) r.gpus.push_back(static_cast<int>(parse_u32(t, "SLURM_JOB_GPUS")));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return r;
}

void plan_devices_of_guest(JobPlan& p, const DevicePlan& plan, const PreparedDevices& pd) {
    p.hostdevs.clear();
    for (const auto& a : pd.hostdevs) {
        HostdevSpec h{a.str(), "", -1};
        for (const auto& d : plan.devices)
            if (d.address == a) h = {a.str(), d.role, d.numa_node};
        if (pd.vf && pd.vf->vf == a) h = {a.str(), "vf", pd.vf->numa_node};
        p.hostdevs.push_back(h);
    }
    p.vf_link_layer = pd.vf ? pd.vf->link_layer : "";
    p.vf_mac = pd.vf ? pd.vf->mac : "";
    p.vf_port_guid = pd.vf ? pd.vf->port_guid : "";
    p.numa_node = pd.numa_node.value_or(-1);
    p.device_cpus = pd.cpus;
    // Locality, and what was done for it, in words (log and VM record).
    p.numa_nodes.clear();
    std::string nodes;
    for (int n : plan.numa_nodes) nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
    if (p.numa_node >= 0) {
        p.placement = "guest memory bound to NUMA node " + std::to_string(p.numa_node) +
                      ", the devices' node; vCPUs on its CPUs first";
    } else if (plan.numa_nodes.size() > 1) {
        p.numa_nodes = plan.numa_nodes;
        p.placement = "the devices sit on NUMA nodes " + nodes +
                      ": guest memory interleaved over them, vCPUs on their CPUs first";
    } else {
        p.placement = "the devices' NUMA node is unknown: guest memory and vCPUs as Slurm placed the job";
    }
}

// Every node's underlay address, in the job's node order (site configuration:
// a node the configuration cannot place is the node's fault).
static std::vector<std::string> underlay_addresses(const NetworkConfig& net, const std::vector<std::string>& nodes) {
    std::vector<std::string> out;
    out.reserve(nodes.size());
    for (const auto& n : nodes) {
        if (net.underlay_hosts.empty()) {
            out.push_back(resolve_underlay(net.underlay, n));
            continue;
        }
        auto it = net.underlay_hosts.find(n);
        if (it == net.underlay_hosts.end()) SVM_THROW("network.underlay has no address for node " + n);
        out.push_back(it->second);
    }
    return out;
}

// The job's own network segment on this node (lib/host/guest_net.hpp),
// planned and recorded before it is made; the guest's address and its peers
// into the plan. Nothing when the site gives guests no network of their own.
static std::optional<JobSegment> plan_network(const NodeConfig& cfg, const JobRequest& req,
                                              const std::vector<std::string>& nodes,
                                              const std::vector<std::string>& guest_nodes, JobPlan& p, Ledger& ledger) {
    const NetworkConfig& net = cfg.network;
    if (net.prefix.empty()) {
        p.peers.push_back({guest_nodes.at(static_cast<size_t>(p.node_index)), p.hostname, ""});
        return std::nullopt;
    }
    JobSegment s = plan_segment(req.job_id, p.node_index, nodes, underlay_addresses(net, nodes), net.prefix, net.netns,
                                net.vxlan_port, net.mtu);
    for (size_t i = 0; i < nodes.size(); ++i) {
        std::string fabric_ip;
        if (net.fabric == "ipoib") fabric_ip = fabric_address(net.fabric_prefix, req.job_id, static_cast<int>(i)).ip;
        p.peers.push_back({guest_nodes[i], guest_nodes[i] + "-vm", s.peers[i].guest.ip, fabric_ip});
        if (static_cast<int>(i) == p.node_index) p.fabric_ip = fabric_ip;
    }
    p.ip = s.self().guest.ip;
    p.mac = s.self().guest.mac;
    p.prefix_len = s.prefix_len;
    p.bridge = s.bridge;
    p.netns = s.netns;
    p.mtu = s.mtu;
    ledger.record(JobNetChange{s.netns, s.underlay_netns, s.vxlan});
    return s;
}

// Makes the planned segment, on a thread of its own: its namespace, links,
// entries and guard take 10-15 ms (requests of this process's own), and no
// other step of the prolog needs the segment made, only planned. The
// future's end is awaited before the plan is written, and also when a step
// fails first (the destructor of std::async's future waits), so that undoing
// never races the making.
static std::future<void> make_network(const std::optional<JobSegment>& planned) {
    return std::async(std::launch::async, [planned] {
        if (!planned) return;
        log::Steps t;
        try {
            setup_segment(*planned);
        } catch (const VniInUse& e) {
            // Another live job's, on this node: no fault of the node's.
            SVM_REFUSE(e.message + "; resubmit the job");
        }
        t.done("prolog: the job's network segment, made beside the other steps");
    });
}

namespace {

// What the prolog's steps share while they prepare one job's guest.
struct Preparation {
    const NodeConfig& cfg;
    JobRequest req;                  // with the site's choice applied
    VmChoice choice;                 // the partition's policy for the job
    Ledger ledger;                   // every host change, recorded before it is made
    std::vector<std::string> nodes;  // the job's nodes, in order
    // The nodes its guests were first prepared for (their names and host
    // keys): `nodes`, or those of the checkpoint this run restores.
    std::vector<std::string> guest_nodes;
    std::optional<std::vector<CheckpointEntry>> saved;  // the job's whole checkpoint, if any
    std::string saved_why;                              // why a checkpoint there is not used
    JobPlan p;
    Credentials who;                // the job's user
    UniqueFd kernel_fd, initrd_fd;  // opened as the user
    struct stat kernel_st {
    }, initrd_st{};  // their fstat by the user's opener
    std::string secret, known_hosts;
    KeyPair user_key, host_key;
    gid_t qgid = 0;  // the guest's group: the job's own
    log::Steps steps;
};

// The site's policy for the partition the job runs in: its default image,
// a catalogue name resolved, or a refusal (--vm-image=none where a VM is
// required). The user's own kernel, initrd and command line win.
void apply_choice(JobRequest& req, const VmChoice& choice) {
    req.image = choice.image;
    if (req.kernel.empty() && req.initrd.empty()) {
        req.kernel = choice.kernel;
        req.initrd = choice.initrd;
    }
    if (req.cmdline.empty()) req.cmdline = choice.cmdline;
}

// The job's ledger on this node, empty: what an earlier prolog of the same
// job id left (requeue, crash) is undone first.
Ledger fresh_ledger(const NodeConfig& cfg, uint32_t job_id) {
    mkdir_p(cfg.state_dir, 0755);
    mkdir_p(cfg.ledger_dir(), 0700);
    Ledger ledger = Ledger::load(cfg.ledger_path(job_id), job_id);
    if (ledger.entries().empty()) return ledger;
    auto failures = teardown_job(cfg, job_id);  // its records name the earlier run's cgroups
    if (!failures.empty())
        SVM_THROW("leftovers of an earlier run of job " + std::to_string(job_id) +
                  " could not be removed: " + failures.front());
    return Ledger::load(cfg.ledger_path(job_id), job_id);
}

// The plan's first facts: the job, this node and its place in the job.
void place_node(Preparation& s) {
    JobPlan& p = s.p;
    p.job_id = s.req.job_id;
    p.node = s.req.node;
    p.dir = s.cfg.job_dir(s.req.job_id);
    p.boot_timeout_s = s.cfg.boot_timeout_s;
    s.nodes = expand_hostlist(s.req.nodelist.empty() ? s.req.node : s.req.nodelist);
    p.node_index = -1;
    for (size_t i = 0; i < s.nodes.size(); ++i)
        if (s.nodes[i] == s.req.node) p.node_index = static_cast<int>(i);
    if (p.node_index < 0) SVM_THROW("node " + s.req.node + " is not in the job's node list " + s.req.nodelist);
    s.guest_nodes = s.nodes;
}

// A resumable job's checkpoint, when Slurm requeued it and it was saved
// whole: its guests keep the names they were first prepared with.
void find_checkpoint(Preparation& s) {
    const CheckpointConfig& cp = s.cfg.checkpoint;
    if (cp.dir.empty() || cp.resume_of(s.req.resume, s.req.partition) != "auto") return;
    std::string dir = checkpoint_job_dir(cp.dir, s.req.job_id);
    s.saved = whole_checkpoint(dir, s.req.job_id, s.req.uid, static_cast<int>(s.nodes.size()), s.saved_why);
    if (!s.saved) return;
    for (size_t i = 0; i < s.nodes.size(); ++i) s.guest_nodes[i] = (*s.saved)[i].guest_node;
}

// --vm-resume=auto: where the guest is saved when Slurm requeues the job,
// and the saved guest this run restores (the image must be the one it
// booted from); what the user is told otherwise.
void plan_resume(Preparation& s) {
    JobPlan& p = s.p;
    const CheckpointConfig& cp = s.cfg.checkpoint;
    if (cp.resume_of(s.req.resume, s.req.partition) != "auto") return;
    std::string why = not_resumable_because(cp, p);
    if (!why.empty()) {
        p.resume_note = "this job is not resumable: " + why + "; if Slurm requeues it, its script starts again";
        return;
    }
    p.checkpoint_dir = checkpoint_job_dir(cp.dir, p.job_id);
    if (s.saved && !((*s.saved)[static_cast<size_t>(p.node_index)].image == p.image_identity))
        s.saved_why = "the job's saved state is not usable (its image " + p.image + " changed since)";
    if (s.saved && s.saved_why.empty()) p.restore_from = checkpoint_file(p.checkpoint_dir, p.node_index, "save");
    else if (!s.saved_why.empty()) p.resume_note = s.saved_why + ": the job starts afresh";
}

// A refused VM job must never run on the host: leave a plan (so the plugin
// still wraps every task) whose state carries the reason; the task wrapper
// prints it and fails, the keeper does nothing. The epilog removes the job's
// directory and cgroups as any VM job's: Slurm may leave the cgroups behind
// (seen with 24.11 on v1: the extern step's x11 shutdown, run in another
// thread for every step, drops the whole stepd's privileges while the step
// moves itself out of them, which then fails).
PrologResult refused(const NodeConfig& cfg, const JobPlan& p, const std::string& sluid, const std::string& why) {
    Ledger ledger = Ledger::load(cfg.ledger_path(p.job_id), p.job_id);
    ledger.record(JobCgroupsChange{kCgroupRoot, sluid});
    ledger.record(JobDirChange{p.dir});
    make_job_dir(p.dir, p.uid);
    replace_file(path_join(p.dir, "state"), GuestState{GuestState::Phase::failed, why}.text() + "\n", 0644);
    JobPlan stub;
    stub.job_id = p.job_id;
    stub.node = p.node;
    stub.node_index = p.node_index;
    stub.dir = p.dir;
    stub.boot_timeout_s = p.boot_timeout_s;
    replace_file(stub.plan_file(), stub.to_json(), 0644);
    return {PrologStatus::refused, why};
}

// The job directory and who the job's user is. The job's cgroups are
// recorded before anything but the network (whose removal waits for no
// process), so that they are undone once the keeper and the guest are gone
// and every other undo has given their exit time.
void make_job_dir_for_user(Preparation& s) {
    JobPlan& p = s.p;
    s.ledger.record(JobCgroupsChange{kCgroupRoot, s.req.sluid});
    s.ledger.record(JobDirChange{p.dir});
    remove_tree(p.dir);
    s.who = credentials_for(s.req.uid,
                            s.req.gid == static_cast<gid_t>(-1) ? std::nullopt : std::optional<gid_t>(s.req.gid));
    make_job_dir(p.dir, s.who.uid);
    p.uid = s.who.uid;
    p.gid = s.who.gid;
    p.user = s.who.user;
    if (!s.req.user.empty() && s.req.user != s.who.user)
        SVM_THROW("SLURM_JOB_USER " + s.req.user + " does not match uid " + std::to_string(s.req.uid));
    struct passwd* pw = ::getpwuid(s.who.uid);
    p.home = pw && pw->pw_dir ? pw->pw_dir : "/";
    struct group* g = ::getgrgid(s.who.gid);
    p.group = g ? g->gr_name : p.user;
    p.workdir = s.req.workdir;
}

// Shares: expanded, absolute, deduplicated, none inside another, each
// checked against the user's rights.
void plan_shares(Preparation& s) {
    JobPlan& p = s.p;
    std::vector<std::string> want;
    for (const auto& share : s.cfg.shares) {
        std::string d = share == "%h" ? p.home : share == "%w" ? p.workdir : share;
        while (d.size() > 1 && d.back() == '/') d.pop_back();
        if (d.empty() || d[0] != '/' || d == "/" || d.find("/../") != std::string::npos) continue;
        want.push_back(d);
    }
    std::sort(want.begin(), want.end());
    for (const auto& d : want) {
        bool inside = false;
        for (const auto& k : p.shares)
            if (d == k || d.rfind(k + "/", 0) == 0) inside = true;
        if (!inside) p.shares.push_back(d);
    }
    for (const auto& d : p.shares) check_share(d, s.who, s.cfg);
    p.shares_via = s.cfg.shares_via;
    if (!p.shares.empty() && p.shares_via == "virtiofs") p.virtiofsd = find_virtiofsd(s.cfg.virtiofsd);
}

// The image (pulled first when it is a registry's), kernel and initrd,
// opened and checked with the user's credentials only; every failure here
// is about what the user gave.
void check_request_as_user(Preparation& s) {
    JobRequest& req = s.req;
    ImageInfo info;
    std::string digest, image_source = s.choice.image_name;
    try {
        ImagePolicy policy = policy_of(s.cfg);
        std::string oci_digest;
        if (is_registry_ref(req.image)) {
            // Into the node's cache (shared by jobs, by digest), then checked like any image.
            image_source = req.image;
            CachedOciImage oci = pull_oci_disk(s.cfg.oci, req.image, oci_entries_in_use(s.cfg));
            req.image = oci.path;
            oci_digest = oci.digest;
            if (!policy.allowed_dirs.empty()) policy.allowed_dirs.push_back(s.cfg.oci.cache_dir);
        }
        CheckedImage ci = open_image_as_user(req.image, s.who, policy);
        info = ci.info;
        // bench/run reads this step's time from the job's log: keep its words.
        s.steps.done("prolog: image opened and checked as the user");
        // A registry image's is its manifest's; a file's is read once per
        // job, by the head node's keeper as the user (keeper.hpp), not here.
        digest = oci_digest;
        if (!req.kernel.empty()) s.kernel_fd = open_boot_file_as_user(req.kernel, s.who, "kernel", s.kernel_st);
        if (!req.initrd.empty()) s.initrd_fd = open_boot_file_as_user(req.initrd, s.who, "initrd", s.initrd_st);
        if (!req.initrd.empty() && req.kernel.empty()) SVM_THROW("--vm-initrd needs --vm-kernel as well");
        if (!req.irq_profile.empty()) require_irq_profile(req.irq_profile, "--vm-irq-profile");
        require_kernel_cmdline(req.cmdline);
        if (!req.save.empty()) check_save_path(req.save);
    } catch (const Error& e) {
        throw UserError(e);
    }
    JobPlan& p = s.p;
    p.image = req.image;
    p.image_source = image_source;
    p.image_format = format_name(info.format);
    p.image_virtual_size = info.virtual_size;
    p.image_digest = digest;
    p.image_identity = info.identity;
    p.kernel = req.kernel;
    p.initrd = req.initrd;
    p.kernel_copy = req.kernel.empty() ? "" : path_join(p.dir, "kernel");
    p.initrd_copy = req.initrd.empty() ? "" : path_join(p.dir, "initrd");
    p.cmdline = req.cmdline.empty() ? s.cfg.default_cmdline : req.cmdline;
    p.irq_profile = req.irq_profile.empty() ? s.cfg.irq_profile : req.irq_profile;
    if (p.node_index == 0) p.save_path = req.save;  // the head guest's disk
}

// The guest's names and the node's settings it runs with.
void name_guest(Preparation& s) {
    JobPlan& p = s.p;
    const NodeConfig& cfg = s.cfg;
    // A restored guest keeps the names it was saved with (libvirt requires
    // the domain's).
    const std::string& as = s.guest_nodes.at(static_cast<size_t>(p.node_index));
    p.hostname = as + "-vm";
    p.domain_name = "slurm-vm-" + std::to_string(s.req.job_id) + "-" + as;
    p.domain_type = cfg.domain_type;
    p.emulator = cfg.emulator;
    p.boot_timeout_s = cfg.boot_timeout_s;
    p.memory_overhead_mib = cfg.memory_overhead_mib;
    p.min_guest_memory_mib = cfg.min_guest_memory_mib;
    p.default_guest_memory_mib = cfg.default_guest_memory_mib;
}

// Keys, derived from the site secret: the same on every node of the job, so
// guests trust each other's host keys and the job's user key. Then the
// guest's identity: the user (the shares give the guest the user's rights)
// with the job's own group, which no other job and no login session has: the
// overlay, seed and libvirt's files are the job's group's, and so is the
// guest's access to host devices.
void make_keys_and_identity(Preparation& s) {
    JobPlan& p = s.p;
    s.secret = read_site_secret(s.cfg.secret_file);
    s.user_key = job_user_key(s.secret, s.req.job_id, p.uid);
    s.host_key = guest_host_key(s.secret, s.req.job_id, s.guest_nodes.at(static_cast<size_t>(p.node_index)));
    // Root's file; the user (ssh, in the task wrapper) may read it.
    replace_file(p.user_key(), s.user_key.private_key, 0600);
    grant_user(p.user_key(), p.uid, 4);
    for (const auto& peer : p.peers) {
        std::string names = peer.hostname + (peer.ip.empty() ? "" : "," + peer.ip) +
                            (peer.fabric_ip.empty() ? "" : "," + peer.fabric_ip);
        s.known_hosts += names + " " + trim(guest_host_key(s.secret, s.req.job_id, peer.node).public_key) + "\n";
    }
    replace_file(p.known_hosts(), s.known_hosts, 0644);
    s.qgid = s.cfg.free_job_gid(s.req.job_id);
    p.guest_gid = s.qgid;
    grant_device(s.ledger, s.cfg.kvm_device, s.qgid);
}

// The host PCI functions of the GPUs Slurm allocated, by gres.conf index.
std::vector<PciAddress> allocated_gpus(const Preparation& s, const DeviceConfig& dc) {
    std::vector<PciAddress> allocated;
    for (int i : s.req.gpus) {
        if (i < 0 || static_cast<size_t>(i) >= dc.gpus.size())
            SVM_THROW("Slurm allocated GPU index " + std::to_string(i) + " but devices.gpus of " + s.cfg.path +
                      " lists only " + std::to_string(dc.gpus.size()) + " (list them in gres.conf order)");
        allocated.push_back(dc.gpus[static_cast<size_t>(i)].pci);
    }
    return allocated;
}

// Devices: exactly the GPUs Slurm gave the job here (and what must travel
// with them), plus a VF when the node provides them; their VFIO groups to
// the job's group alone.
void prepare_guest_devices(Preparation& s) {
    if (!s.req.gpus.empty() && !s.cfg.devices)
        SVM_REFUSE("node " + s.req.node +
                   " is not configured for GPU passthrough; submit VM jobs with GPUs to "
                   "nodes whose slurm-vm configuration lists them");
    if (!s.cfg.devices) return;
    DeviceConfig dc = parse_device_config(s.cfg.devices.get());
    std::vector<PciAddress> allocated = allocated_gpus(s, dc);
    if (allocated.empty() && dc.vf_providers.empty()) return;
    SysfsRoot root(s.cfg.sysfs_root);
    DevicePlan plan = plan_devices_for(root, dc, allocated);
    auto w = device_writer(root, dc);
    DeviceStepOptions o;
    o.job = std::to_string(s.req.job_id);
    o.want_vf = !dc.vf_providers.empty();
    o.hostname = s.req.node;
    PreparedDevices pd = prepare_devices(root, *w, dc, plan, o, s.ledger);
    plan_devices_of_guest(s.p, plan, pd);
    for (int g : vfio_groups_of(root, pd.hostdevs)) grant_device(s.ledger, root.dev_vfio(g), s.qgid);
    JsonOut acct;
    acct("plan", plan.to_json());
    if (pd.vf) acct("vf", pd.vf->to_json());
    s.p.devices_json = json_dump(acct.take().get());
}

// The job's traffic over IPoIB needs this guest's InfiniBand VF. Hugepages:
// the keeper decides with the guest's size; a node that "requires" them but
// has none set up fails here (the node's fault).
void check_fabric_and_hugepages(Preparation& s) {
    JobPlan& p = s.p;
    const NodeConfig& cfg = s.cfg;
    if (!p.fabric_ip.empty() && (p.vf_link_layer != "infiniband" || p.vf_port_guid.empty()))
        SVM_THROW("network.fabric is \"ipoib\" but the guest on " + s.req.node +
                  " gets no InfiniBand VF (list an InfiniBand physical function in devices.vf_providers)");
    p.hugepages = cfg.hugepages;
    if (cfg.hugepages == "off") return;
    SysfsRoot root(cfg.sysfs_root);
    p.hugepage_size_kib = cfg.hugepage_size_kib > 0 ? cfg.hugepage_size_kib : default_hugepage_kib(root);
    if (cfg.hugepages != "required") return;
    std::string problem = hugepage_setup_problem(root, p.hugepage_size_kib, p.numa_node);
    if (!problem.empty())
        SVM_THROW("node " + s.req.node + " requires hugepages for guests (\"hugepages\": \"required\" in " + cfg.path +
                  ") but " + problem);
}

constexpr size_t kOverlayTemplates = 64;  // kept by the node: the most recently used

// A new overlay's bytes. qemu-img writes the same bytes for the same
// arguments (no name, time or random number in a new qcow2 file): the node
// keeps the overlay of each backing path, format, size and qemu-img (root's,
// in state_dir), made on first use, and a job's overlay is a copy of it,
// which costs no program's start.
std::string overlay_bytes(const NodeConfig& cfg, const JobPlan& p) {
    std::string size = std::to_string(p.image_virtual_size);
    std::string key = cfg.qemu_img + '\0' + p.image_format + '\0' + p.image + '\0' + size;
    std::string dir = path_join(cfg.state_dir, "overlays");
    std::string tmpl = path_join(dir, sha256_hex(key).substr(0, 32));
    std::string bytes;
    try {
        if (read_file_if_exists(tmpl, bytes)) {
            ::utimensat(AT_FDCWD, tmpl.c_str(), nullptr, 0);  // recently used
            return bytes;
        }
    } catch (const Error&) {  // unreadable: made again
    }
    mkdir_p(dir, 0700);
    std::string made = tmpl + ".new." + std::to_string(::getpid());
    run_checked({cfg.qemu_img, "create", "-q", "-f", "qcow2", "-u", "-F", p.image_format, "-b", p.image, made, size});
    bytes = read_file(made);
    if (::rename(made.c_str(), tmpl.c_str()) != 0) ::unlink(made.c_str());
    prune_least_used(dir, kOverlayTemplates);
    return bytes;
}

// A restored guest's overlay, copied back from the checkpoint (which stays).
// A copy that fails is the job's, never the node's: the node's scratch space
// filled up (the job's checkpoint holds as much as its share), the copy was
// too slow, the checkpoint went (the job was cancelled and another of its
// nodes removed it). The guest then starts afresh, and the user is told.
bool restore_overlay(JobPlan& p, int timeout_s) {
    try {
        copy_sparse(checkpoint_file(p.checkpoint_dir, p.node_index, "qcow2"), p.overlay(), timeout_s * 1000);
        return true;
    } catch (const Error& e) {
        log::warn("the overlay was not copied back from the job's checkpoint: " + e.chain());
        ::unlink(p.overlay().c_str());
        p.restore_from.clear();
        p.resume_note = "the job's saved state could not be copied back on " + p.node + " (" +
                        trim(log::tail_lines(log::printable(e.reason()), 1)) + "): the job starts afresh";
        return false;
    }
}

// The overlay: root-owned, backing format pinned, the user's image never
// opened by root (-u: qemu-img does not open the backing file). On the
// node's scratch space, in a directory of the job's own (recorded first,
// removed by the epilog).
void make_overlay(Preparation& s) {
    JobPlan& p = s.p;
    p.overlay_dir = s.cfg.job_overlay_dir(s.req.job_id);
    s.ledger.record(OverlayDirChange{p.overlay_dir});
    mkdir_p(s.cfg.overlay_dir, 0711);
    remove_tree(p.overlay_dir);
    if (::mkdir(p.overlay_dir.c_str(), 0710) != 0) SVM_THROW_ERRNO("mkdir " + p.overlay_dir);
    chown_mode(p.overlay_dir, 0, s.qgid, 0710);
    if (p.restore_from.empty() || !restore_overlay(p, s.cfg.checkpoint.timeout_s))
        write_new_file(p.overlay(), overlay_bytes(s.cfg, p), 0600);
    chown_mode(p.overlay(), 0, s.qgid, 0660);
}

// The seed and the console log. QEMU appends to the console through the
// job's group; the user never writes it (the keeper reads it as root, caps
// its size and gives the user a filtered copy when the guest fails).
void make_seed_and_console(Preparation& s) {
    JobPlan& p = s.p;
    SeedKeys sk{s.user_key.public_key, s.user_key.private_key, s.host_key.private_key, s.host_key.public_key,
                s.known_hosts};
    build_seed_iso(p, sk, p.seed());
    chown_mode(p.seed(), 0, s.qgid, 0640);
    replace_file(p.console_log(), "", 0660);
    chown_mode(p.console_log(), 0, s.qgid, 0660);
}

// The embedded libvirt root the keeper will use (recorded first); only root
// and the guest's group reach libvirt's files for the guest.
void make_libvirt_root(Preparation& s) {
    JobPlan& p = s.p;
    DomainChange guest{p.embed_root(), p.domain_name, p.keeper_pid_file()};
    if (!p.virtiofsd.empty()) {
        guest.job_dir = p.dir;
        guest.share_servers = static_cast<int64_t>(p.shares.size());
    }
    s.ledger.record(guest);
    mkdir_p(p.embed_root(), 0710);
    chown_mode(p.embed_root(), 0, s.qgid, 0710);
    write_embed_qemu_conf(p.embed_root(), EmbedSettings{p.uid, s.qgid});
    seed_capabilities_cache(p.embed_root(), path_join(s.cfg.state_dir, "libvirt-caps"), EmbedSettings{p.uid, s.qgid},
                            p.emulator, path_join(s.cfg.libexec_dir, "slurm-vm-keeper"));
}

// Every step of a guest's preparation, in order; each records what it
// changes on the host before it changes it.
void prepare_guest(Preparation& s) {
    // The network first: its thread is the longest step of a guest's
    // preparation (its programs), and nothing before needs it.
    name_guest(s);
    std::future<void> network;
    if (s.choice.refusal.empty())
        network = make_network(plan_network(s.cfg, s.req, s.nodes, s.guest_nodes, s.p, s.ledger));
    make_job_dir_for_user(s);
    plan_shares(s);
    if (!s.choice.refusal.empty()) SVM_REFUSE(s.choice.refusal);
    s.steps.done("prolog: network planned, job directory, shares checked");
    check_request_as_user(s);
    s.steps.done("prolog: kernel and initrd opened as the user, the request's other fields checked");
    make_keys_and_identity(s);
    s.steps.done("prolog: keys and known_hosts");
    prepare_guest_devices(s);
    check_fabric_and_hugepages(s);
    plan_resume(s);
    s.steps.done("prolog: /dev/kvm, devices, hugepages");
    if (s.kernel_fd) provide_boot_file(s.cfg, s.kernel_fd.get(), s.kernel_st, s.p.kernel, s.p.kernel_copy);
    if (s.initrd_fd) provide_boot_file(s.cfg, s.initrd_fd.get(), s.initrd_st, s.p.initrd, s.p.initrd_copy);
    s.steps.done("prolog: kernel and initrd (the node's copies of their versions)");
    make_overlay(s);
    s.steps.done("prolog: overlay");
    make_seed_and_console(s);
    make_libvirt_root(s);
    s.steps.done("prolog: seed, console log, libvirt root, capabilities cache");
    network.get();
    replace_file(s.p.plan_file(), s.p.to_json(), 0644);
    s.steps.done("prolog: the network segment awaited, plan");
    write_guest_state(s.p, {GuestState::Phase::prepared, ""});
}

}  // namespace

PrologResult prepare_job(const NodeConfig& cfg, const JobRequest& request) {
    VmChoice choice = choose_vm(cfg.site, request.image, {request.partition});
    if (!choice.vm && choice.refusal.empty()) return {};  // a plain job: nothing to do
    log::debug("preparing the guest");
    Preparation s{cfg, request, choice, fresh_ledger(cfg, request.job_id)};
    apply_choice(s.req, choice);
    place_node(s);
    find_checkpoint(s);
    // The one place where a failure is classified, and the one rollback point.
    try {
        prepare_guest(s);
        return {PrologStatus::prepared, ""};
    } catch (const UserError& e) {
        // The user's: the job fails with the sentence, the node stays up
        // (unless undoing fails: then the node is at fault after all).
        auto failures = teardown_job(cfg, {request.job_id, request.sluid});
        if (!failures.empty()) {
            Error n(e.reason(), __FILE__, __LINE__, __func__);
            for (const auto& f : failures) SVM_CONTEXT(n, "and while undoing: " + f);
            throw n;
        }
        return refused(cfg, s.p, request.sluid, e.reason());
    } catch (Error& e) {
        // Anything else is the node's: undo, and the prolog drains it.
        auto failures = teardown_job(cfg, {request.job_id, request.sluid});
        for (const auto& f : failures) SVM_CONTEXT(e, "and while undoing: " + f);
        throw;
    }
}

std::vector<std::string> teardown_job(const NodeConfig& cfg, const SlurmJob& job) {
    const uint32_t job_id = job.id;
    Ledger ledger = Ledger::load(cfg.ledger_path(job_id), job_id);
    std::vector<std::string> failures = undo_ledger(ledger, cfg);
    // A job directory no ledger holds goes the same way: one left by a
    // version whose refused jobs recorded none (every path that makes one
    // records it first now).
    std::string dir = cfg.job_dir(job_id);
    if (failures.empty() && path_exists(dir)) {
        try {
            JobDirChange{dir}.undo(UndoScope{cfg, job_id});
        } catch (const Error& e) {
            failures.push_back(e.chain());
        }
    }
    // The job's overlay directory, found by its name: the ledger that
    // recorded it lives in state_dir (a tmpfs) and is lost with the node's
    // power, while the overlay stays on disk (overlay_dir).
    std::string overlays = cfg.job_overlay_dir(job_id);
    if (failures.empty() && path_exists(overlays)) {
        try {
            OverlayDirChange{overlays}.undo(UndoScope{cfg, job_id});
            log::info("removed the job's overlay directory " + overlays + ", which no ledger held");
        } catch (const Error& e) {
            failures.push_back(e.chain());
        }
    }
    // Slurm's own cgroups of the job, VM job or not, once its steps have
    // ended: Slurm 24.11 before 24.11.6 can leave them (a step's X11 thread
    // drops privileges while the step removes them; SchedMD ticket 22736).
    // Only empty ones go (rmdir refuses the others). A step that could not
    // leave them stays in them until it exits, which slurmd may not wait for
    // (its socket is closed already): hence a short wait.
    if (failures.empty()) {
        int removed = remove_job_cgroups(job, kCgroupRoot, cfg.node_name, std::chrono::seconds(2));
        if (removed > 0) log::info("removed " + std::to_string(removed) + " empty cgroups that Slurm left of the job");
    }
    return failures;
}

std::set<std::string> oci_entries_in_use(const NodeConfig& cfg) {
    std::set<std::string> out;
    for (uint32_t id : jobs_on_node(cfg)) {
        std::string text;
        try {
            if (!read_file_if_exists(path_join(cfg.job_dir(id), "plan.json"), text)) continue;
            std::string e = oci_cache_entry_of(cfg.oci, JobPlan::from_json(text, "plan").image);
            if (!e.empty()) out.insert(e);
        } catch (const Error&) {
        }
    }
    return out;
}

std::vector<DeviceGrant> device_grants_on_node(const NodeConfig& cfg) {
    std::vector<std::string> paths{cfg.kvm_device};
    std::string vfio = SysfsRoot(cfg.sysfs_root).path("dev/vfio");
    for (const auto& n : list_dir(vfio))
        if (n.find_first_not_of("0123456789") == std::string::npos) paths.push_back(path_join(vfio, n));
    std::vector<DeviceGrant> out;
    for (const auto& path : paths)
        for (gid_t g : group_entries(path))
            if (auto job = cfg.job_of_gid(g)) out.push_back({path, *job});
    return out;
}

std::vector<uint32_t> jobs_on_node(const NodeConfig& cfg) {
    std::vector<uint32_t> out;
    auto add = [&](const std::string& name, const std::string& suffix) {
        if (name.rfind("job_", 0) != 0) return;
        std::string num = name.substr(4);
        if (!suffix.empty()) {
            if (num.size() <= suffix.size() || num.substr(num.size() - suffix.size()) != suffix) return;
            num = num.substr(0, num.size() - suffix.size());
        }
        if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) return;
        uint32_t id = static_cast<uint32_t>(std::stoul(num));
        for (auto j : out)
            if (j == id) return;
        out.push_back(id);
    };
    for (const auto& n : list_dir(cfg.ledger_dir())) add(n, ".json");
    for (const auto& n : list_dir(cfg.state_dir)) add(n, "");
    for (const auto& n : list_dir(cfg.overlay_dir)) add(n, "");
    return out;
}

}  // namespace svm
