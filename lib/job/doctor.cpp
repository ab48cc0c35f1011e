#include "doctor.hpp"

#include "dev_acl.hpp"

#include <grp.h>
#include <libvirt/libvirt.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "device_plan.hpp"
#include "fs.hpp"
#include "guest_net.hpp"
#include "iommu_group.hpp"
#include "pci_device.hpp"
#include "proc.hpp"
#include "virtiofs.hpp"

namespace svm {

const char* check_status_str(CheckStatus s) {
    switch (s) {
    case CheckStatus::ok: return "OK";
    case CheckStatus::warn: return "WARN";
    case CheckStatus::fail: return "FAIL";
    default: return "SKIP";
    }
}

std::string slurm_config_value(const std::string& text, const std::string& key) {
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? text.size() : nl + 1;
        if (line.compare(0, key.size(), key) != 0) continue;
        size_t eq = line.find('=', key.size());
        if (eq == std::string::npos || line.find_first_not_of(' ', key.size()) != eq) continue;
        size_t b = line.find_first_not_of(' ', eq + 1);
        return b == std::string::npos ? "" : line.substr(b, line.find_last_not_of(" \r") - b + 1);
    }
    return "";
}

std::vector<CheckResult> check_slurm_config(const std::string& t, const std::string& plugstack) {
    std::vector<CheckResult> out;
    auto has = [](const std::string& list, const std::string& item) {
        std::string l = "," + list + ",";
        return l.find("," + item + ",") != std::string::npos;
    };
    std::string pf = slurm_config_value(t, "PrologFlags");
    if (has(pf, "RunInJob"))
        out.push_back({"slurm-prologflags", CheckStatus::fail, "PrologFlags=" + pf,
                       "remove RunInJob from PrologFlags in slurm.conf (keep Alloc,Contain): with it no guest starts "
                       "(tried with Slurm 24.11)"});
    else if (has(pf, "Alloc") && has(pf, "Contain"))
        out.push_back({"slurm-prologflags", CheckStatus::ok, "PrologFlags=" + pf, ""});
    else
        out.push_back({"slurm-prologflags", CheckStatus::fail, "PrologFlags=" + (pf.empty() ? "(none)" : pf),
                       "set PrologFlags=Alloc,Contain in slurm.conf: the prolog must run on every node at allocation "
                       "and the guest lives in the job's extern step"});
    std::string pt = slurm_config_value(t, "ProctrackType");
    out.push_back(pt == "proctrack/cgroup"
                      ? CheckResult{"slurm-proctrack", CheckStatus::ok, pt, ""}
                      : CheckResult{"slurm-proctrack", CheckStatus::fail, "ProctrackType=" + pt,
                                    "set ProctrackType=proctrack/cgroup so the guest is killed with its job"});
    std::string tp = slurm_config_value(t, "TaskPlugin");
    out.push_back(
        tp.find("task/cgroup") != std::string::npos
            ? CheckResult{"slurm-taskplugin", CheckStatus::ok, tp, ""}
            : CheckResult{"slurm-taskplugin", CheckStatus::warn, "TaskPlugin=" + tp,
                          "add task/cgroup to TaskPlugin so the guest is confined to the job's CPUs and memory"});
    for (const char* k : {"Prolog", "Epilog"}) {
        std::string v = slurm_config_value(t, k);
        std::string name = std::string("slurm-") + (k[0] == 'P' ? "prolog" : "epilog");
        if (v.empty() || v == "(null)")
            out.push_back({name, CheckStatus::fail, std::string(k) + " is not set",
                           std::string("set ") + k + "=/usr/sbin/slurm-vm-" + (k[0] == 'P' ? "prolog" : "epilog") +
                               " (or a script that runs it) in slurm.conf"});
        else out.push_back({name, CheckStatus::ok, std::string(k) + "=" + v, ""});
    }
    if (plugstack.find("slurm-vm.so") != std::string::npos)
        out.push_back({"slurm-plugstack", CheckStatus::ok, "the slurm-vm plugin is in the plugin stack", ""});
    else
        out.push_back({"slurm-plugstack", CheckStatus::fail, "slurm-vm.so is not in the plugin stack",
                       "add 'required <plugindir>/slurm-vm.so config=/etc/slurm-vm/slurm-vm.json' to plugstack.conf"});
    return out;
}

CheckResult check_slurm_release(const std::string& t, const std::string& built) {
    std::string running = slurm_config_value(t, "SLURM_VERSION");
    if (running.empty())
        return {"slurm-release", CheckStatus::warn, "Slurm did not say its version (no SLURM_VERSION)",
                "run doctor where scontrol reaches slurmctld"};
    // "24.11.5" -> "24.11"; a release name without a micro part is kept.
    std::string release = running.substr(0, running.find('.', running.find('.') + 1));
    if (release == built)
        return {"slurm-release", CheckStatus::ok, "Slurm " + running + ", plugin built for " + built, ""};
    return {"slurm-release", CheckStatus::fail,
            "Slurm " + running + " runs here, but slurm-vm was built against Slurm " + built +
                ": Slurm refuses to load the plugin (\"Incompatible plugin version\")",
            "install the slurm-vm package built against Slurm " + release +
                " (rebuild it where that Slurm's "
                "libslurm-dev is installed)"};
}

namespace {

CheckResult result(std::string name, CheckStatus s, std::string msg, std::string fix = "") {
    return {std::move(name), s, std::move(msg), std::move(fix)};
}

std::vector<CheckResult> check_iommu(const SysfsRoot& root, const IommuState& st) {
    std::vector<CheckResult> out;
    if (st.enabled) {
        out.push_back(result("iommu", CheckStatus::ok,
                             "IOMMU on (" + std::to_string(st.group_count) + " groups" +
                                 (st.vendor.empty() ? "" : ", " + st.vendor) + ")"));
    } else {
        out.push_back(
            result("iommu", CheckStatus::fail,
                   "IOMMU off: " + root.iommu_groups_dir() + " is empty or missing" +
                       (st.cmdline_requests_iommu ? " although the kernel command line asks for it"
                                                  : "; the kernel command line has no intel_iommu=on/amd_iommu=on"),
                   iommu_fix_hint(st)));
    }
    return out;
}

std::vector<CheckResult> check_interrupts(const SysfsRoot& root, const IommuState& st, const DeviceConfig* cfg) {
    std::vector<CheckResult> out;
    bool allowed = cfg && cfg->policy.allow_unsafe_interrupts;
    std::string policy_fix = "or set devices.policy.allow_unsafe_interrupts to accept the risk";
    if (st.interrupt_remapping == Tristate::yes) {
        out.push_back(result("interrupt-remapping", CheckStatus::ok, "interrupt remapping on"));
    } else if (st.interrupt_remapping == Tristate::no) {
        out.push_back(result(
            "interrupt-remapping", allowed ? CheckStatus::warn : CheckStatus::fail,
            "interrupt remapping off (no IR- domains in " + root.proc("interrupts") +
                ", or intremap=off on the command line)" + (allowed ? "; accepted by site policy" : ""),
            "enable x2APIC and interrupt remapping in the firmware and drop intremap=off/nointremap, " + policy_fix));
    } else {
        out.push_back(
            result("interrupt-remapping", CheckStatus::warn,
                   "cannot tell whether interrupt remapping is on (" + root.proc("interrupts") + " unreadable)",
                   "check dmesg for 'Enabled IRQ remapping'"));
    }
    if (st.allow_unsafe_interrupts) {
        out.push_back(
            result("unsafe-interrupts", allowed ? CheckStatus::warn : CheckStatus::fail,
                   "vfio_iommu_type1 allow_unsafe_interrupts=Y (" +
                       root.module_param("vfio_iommu_type1", "allow_unsafe_interrupts") + ")",
                   "remove 'options vfio_iommu_type1 allow_unsafe_interrupts=1' from /etc/modprobe.d, " + policy_fix));
    }
    return out;
}

std::vector<CheckResult> check_vfio(const SysfsRoot& root, const IommuState& st) {
    if (st.vfio_pci_available)
        return {result("vfio-pci", CheckStatus::ok, "vfio-pci registered (" + root.pci_driver("vfio-pci") + ")")};
    return {result("vfio-pci", CheckStatus::fail,
                   "vfio-pci is not loaded (" + root.pci_driver("vfio-pci") + " missing)",
                   "modprobe vfio-pci, and load it at boot: echo vfio-pci > /etc/modules-load.d/vfio-pci.conf")};
}

std::vector<CheckResult> check_gpus(const SysfsRoot& root, const DeviceConfig* cfg) {
    std::vector<CheckResult> out;
    if (!cfg || cfg->gpus.empty()) {
        out.push_back(result("gpus", CheckStatus::warn, "no GPUs configured (devices.gpus)",
                             "list the passthrough GPUs in the node configuration; see slurm-vm inventory"));
        return out;
    }
    for (const auto& g : cfg->gpus) {
        std::string name = "gpu " + g.pci.str();
        try {
            // A job given this GPU (with the configured GPUs of its IOMMU group,
            // which gres.conf must hand out together) must be plannable.
            std::vector<PciAddress> together{g.pci};
            if (auto grp = read_pci_device(root, g.pci).iommu_group) {
                for (const auto& other : cfg->gpus) {
                    if (other.pci == g.pci || !pci_device_exists(root, other.pci)) continue;
                    if (read_pci_device(root, other.pci).iommu_group == grp) together.push_back(other.pci);
                }
            }
            DevicePlan p = plan_devices_for(root, *cfg, together);
            std::string msg = "usable: IOMMU group " + std::to_string(p.devices.front().iommu_group);
            if (p.devices.size() > 1) msg += " with " + std::to_string(p.devices.size() - 1) + " companion function(s)";
            msg += p.numa_node ? ", NUMA node " + std::to_string(*p.numa_node) : ", NUMA node unknown";
            out.push_back(result(name, CheckStatus::ok, msg));
        } catch (const Error& e) {
            std::string reason = e.chain();
            std::string fix = "see the message; slurm-vm inventory shows the group members";
            auto semi = reason.find("; ");
            if (semi != std::string::npos) {
                fix = reason.substr(semi + 2);
                reason = reason.substr(0, semi);
            }
            out.push_back(result(name, CheckStatus::fail, reason, fix));
        }
    }
    return out;
}

std::vector<CheckResult> check_vfs(const SysfsRoot& root, const DeviceConfig* cfg) {
    std::vector<CheckResult> out;
    if (!cfg || cfg->vf_providers.empty()) {
        out.push_back(result("vfs", CheckStatus::warn,
                             "no VF providers configured (devices.vf_providers): jobs get no InfiniBand VF",
                             "list the HCA physical functions in devices.vf_providers"));
        return out;
    }
    for (const auto& p : cfg->vf_providers) {
        std::string name = "vfs " + p.pci.str();
        try {
            PciDevice d = read_pci_device(root, p.pci);
            std::string numvfs = root.pci_attr(p.pci, "sriov_numvfs");
            if (!d.sriov_capable) {
                out.push_back(
                    result(name, CheckStatus::fail,
                           "not SR-IOV capable (" + root.pci_attr(p.pci, "sriov_totalvfs") + " missing)",
                           "enable SR-IOV in the firmware and in the HCA (mlxconfig SRIOV_EN=1 NUM_OF_VFS=N)"));
            } else if (d.virtfns.empty()) {
                out.push_back(result(name, CheckStatus::fail,
                                     "no VFs (sriov_numvfs is " + std::to_string(d.sriov_numvfs) + " of " +
                                         std::to_string(d.sriov_totalvfs) + ")",
                                     "create them at boot: echo " + std::to_string(d.sriov_totalvfs) + " > " + numvfs));
            } else {
                out.push_back(result(name, CheckStatus::ok,
                                     std::to_string(d.virtfns.size()) + " VFs of " + std::to_string(d.sriov_totalvfs) +
                                         (d.numa_node >= 0 ? ", NUMA node " + std::to_string(d.numa_node) : "")));
            }
        } catch (const Error& e) {
            out.push_back(result(name, CheckStatus::fail, e.chain(), "fix devices.vf_providers or the hardware"));
        }
    }
    return out;
}

std::vector<CheckResult> check_hugepages(const SysfsRoot& root) {
    long total_kb = 0;
    std::string detail;
    for (const auto& h : list_dir(root.path("sys/kernel/mm/hugepages"))) {
        auto v = root.read_attr(root.path("sys/kernel/mm/hugepages/" + h + "/nr_hugepages"));
        long n = v ? std::atol(v->c_str()) : 0;
        long size_kb = std::atol(h.c_str() + std::string("hugepages-").size());
        total_kb += n * size_kb;
        detail += (detail.empty() ? "" : ", ") + h.substr(10) + ": " + std::to_string(n);
    }
    if (total_kb > 0)
        return {
            result("hugepages", CheckStatus::ok, std::to_string(total_kb / 1024) + " MiB reserved (" + detail + ")")};
    return {result("hugepages", CheckStatus::warn,
                   "no hugepages reserved" + (detail.empty() ? std::string("") : " (" + detail + ")") +
                       "; guests use normal pages (slower DMA mapping, more TLB misses)",
                   "reserve them at boot: hugepagesz=1G hugepages=N on the kernel command line")};
}

std::vector<CheckResult> check_qemu(const DoctorOptions& opts) {
    std::string found;
    for (const auto& b : opts.qemu_binaries)
        if (::access(b.c_str(), X_OK) == 0) {
            found = b;
            break;
        }
    unsigned long ver = 0;
    std::string lib = virGetVersion(&ver, nullptr, nullptr) == 0
                          ? "libvirt " + std::to_string(ver / 1000000) + "." + std::to_string(ver / 1000 % 1000) + "." +
                                std::to_string(ver % 1000)
                          : "libvirt version unknown";
    if (found.empty())
        return {result("qemu", CheckStatus::fail, "no QEMU binary found (" + lib + ")",
                       "install qemu-system-x86 (Debian) or qemu-kvm")};
    return {result("qemu", CheckStatus::ok, found + " present, " + lib)};
}

bool skipped(const DoctorOptions& opts, const std::string& name) {
    std::string first = name.substr(0, name.find(' '));
    return std::find(opts.skip.begin(), opts.skip.end(), name) != opts.skip.end() ||
           std::find(opts.skip.begin(), opts.skip.end(), first) != opts.skip.end();
}

// The node's VXLAN guard (guest_net.hpp), made here as the first prolog
// would: so a node has it from boot, before its first VM job.
CheckResult check_vxlan_guard(const NetworkConfig& net) {
    std::string where = net.netns.empty() ? std::string("the host's namespace") : net.netns;
    try {
        ensure_underlay_guard(net.netns, net.vxlan_port);
    } catch (const Error& e) {
        return result("network vxlan guard", CheckStatus::fail, e.what(),
                      "run doctor as root; install nftables (inet family, raw payload matches)");
    }
    return result("network vxlan guard", CheckStatus::ok,
                  "table inet svm_underlay in " + where + ": UDP port " + std::to_string(net.vxlan_port) +
                      " taken from the jobs' other nodes only, sent by no socket of the node's");
}

}  // namespace

std::vector<CheckResult> check_guest_network(const NetworkConfig& net) {
    if (net.prefix.empty())
        return {result("network", CheckStatus::warn,
                       "no guest network configured (network.prefix): guests are unreachable",
                       "set network.prefix (and network.underlay) in the node configuration")};
    RunOptions o;
    o.timeout_ms = 20000;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    std::vector<CheckResult> out;
    if (!net.netns.empty() && !path_exists("/run/netns/" + net.netns))
        out.push_back(result("network underlay", CheckStatus::fail,
                             "underlay network namespace " + net.netns + " not found",
                             "create it (ip netns add " + net.netns +
                                 ") with the node's underlay address, or leave "
                                 "network.netns unset to use the host's"));
    else
        out.push_back(result("network underlay", CheckStatus::ok,
                             "VXLAN sockets in " +
                                 (net.netns.empty() ? std::string("the host's namespace") : net.netns) + ", UDP port " +
                                 std::to_string(net.vxlan_port)));
    RunResult n = run({"nft", "list", "tables", "bridge"}, o);
    if (!n.ok())
        out.push_back(result("network guard", CheckStatus::fail,
                             "nft cannot list bridge tables: " + trim(n.err + n.out),
                             "install nftables (and the kernel's nf_tables bridge support): each guest's tap is "
                             "held to its own MAC and address with it"));
    else out.push_back(result("network guard", CheckStatus::ok, "nft works (bridge family)"));
    if (net.netns.empty() || path_exists("/run/netns/" + net.netns)) out.push_back(check_vxlan_guard(net));
    size_t segments = 0;
    for (const auto& e : list_dir("/run/netns"))
        if (e.rfind("svmj", 0) == 0) ++segments;
    out.push_back(
        result("network segments", CheckStatus::ok, "jobs' segments on this node now: " + std::to_string(segments)));
    if (net.fabric == "ipoib")
        out.push_back(result("network fabric", CheckStatus::ok,
                             "jobs' traffic over IPoIB on their VFs, addresses from " + net.fabric_prefix +
                                 " (needs an InfiniBand PF in devices.vf_providers)"));
    return out;
}

std::vector<CheckResult> check_kvm_access(const NodeConfig& cfg) {
    const std::string& dev = cfg.kvm_device;
    if (!path_exists(dev))
        return {
            result("kvm", cfg.domain_type == "kvm" ? CheckStatus::fail : CheckStatus::ok,
                   dev + " is absent" + (cfg.domain_type == "kvm" ? " but domain_type is \"kvm\"" : " (TCG guests)"),
                   "load the kvm module (kvm_intel or kvm_amd), or set domain_type to \"qemu\"")};
    // Job id 0 is never a job: its group stands in for a job's.
    gid_t probe = cfg.job_gid(0);
    const uid_t nobody = 65534;
    if (accessible_rw_as(dev, nobody, probe))
        return {result(
            "kvm", CheckStatus::warn,
            dev + " is open to everyone: every job's guest can use it (and so can every user)",
            "make it 0660 root:kvm (the distribution's udev rule): slurm-vm gives each job's group its own access")};
    bool works = false;
    std::string why;
    try {
        grant_group_rw(dev, probe);
        works = accessible_rw_as(dev, nobody, probe);
        revoke_group(dev, probe);
    } catch (const Error& e) {
        why = e.chain();
        try {
            revoke_group(dev, probe);
        } catch (const Error&) {
        }
    }
    if (!works)
        return {result("kvm", CheckStatus::fail,
                       "a job's group cannot be given " + dev + (why.empty() ? "" : ": " + why) +
                           "; libvirt would re-probe QEMU on every guest creation (about a minute each)",
                       "mount the device file system with ACL support (devtmpfs has it), or open " + dev +
                           " to the users' guests another way")};
    return {result("kvm", CheckStatus::ok,
                   dev + ": each job's guest gets it through an ACL entry for the job's group (checked with group " +
                       std::to_string(probe) + ")")};
}

std::vector<CheckResult> check_shares(const NodeConfig& cfg) {
    if (cfg.shares.empty()) return {result("shares", CheckStatus::ok, "no shares configured")};
    if (cfg.shares_via == "9p")
        return {result("shares", CheckStatus::ok,
                       "over 9p (guests whose kernel lacks 9p, e.g. Debian cloud and RHEL-family, fail at boot)")};
    try {
        return {result("shares", CheckStatus::ok, "over virtio-fs with " + find_virtiofsd(cfg.virtiofsd))};
    } catch (const Error& e) {
        return {result("shares", CheckStatus::fail, e.reason(),
                       "install virtiofsd or set \"virtiofsd\" in the node configuration")};
    }
}

GroupSource name_service_groups() {
    GroupSource src;
    src.by_gid = group_of_gid;
    src.all = [] {
        std::vector<std::pair<gid_t, std::string>> out;
        ::setgrent();
        while (struct group* g = ::getgrent()) {
            out.emplace_back(g->gr_gid, g->gr_name ? g->gr_name : "");
            if (out.size() >= 1000000) break;
        }
        ::endgrent();
        return out;
    };
    return src;
}

namespace {

bool sssd_serves_groups(const std::string& nsswitch) {
    std::string text;
    if (!read_file_if_exists(nsswitch, text)) return false;
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) {
        line = trim(line.substr(0, line.find('#')));
        if (line.rfind("group:", 0) != 0) continue;
        std::stringstream words(line.substr(6));
        for (std::string w; words >> w;)
            if (w == "sss") return true;
    }
    return false;
}

}  // namespace

std::vector<CheckResult> check_job_groups(const NodeConfig& cfg, uint32_t max_job_id, const GroupSource& src) {
    const uint64_t lo = cfg.job_gid_base, hi = lo + max_job_id;
    std::string range = std::to_string(lo) + "-" + std::to_string(hi);
    if (max_job_id > kMaxJobGidSpan)
        return {result("job groups", CheckStatus::fail,
                       "Slurm's MaxJobId " + std::to_string(max_job_id) + " is above the guest groups' range",
                       "lower MaxJobId to " + std::to_string(kMaxJobGidSpan) + " at most")};
    std::vector<std::string> found;
    if (src.all)
        for (const auto& [gid, name] : src.all())
            if (gid >= lo && gid <= hi && found.size() < 5) found.push_back(name + " (" + std::to_string(gid) + ")");
    for (uint64_t i = 0; i < 64 && found.empty() && src.by_gid; ++i) {
        gid_t gid = static_cast<gid_t>(lo + (hi - lo) * i / 63);
        if (auto name = src.by_gid(gid)) found.push_back(*name + " (" + std::to_string(gid) + ")");
    }
    std::string fix = "move job_gid_base (and with it the jobs' groups) where the site has no groups, or those groups";
    if (!found.empty())
        return {result(
            "job groups", CheckStatus::fail,
            "the jobs' guest groups " + range + " (job_gid_base + job id) hold the site's groups " +
                [&] {
                    std::string l;
                    for (const auto& f : found) l += (l.empty() ? "" : ", ") + f;
                    return l;
                }() +
                ": a job whose id falls on one fails",
            fix)};
    const uint64_t sssd_lo = 200000, sssd_hi = 2000200000;
    if (sssd_serves_groups(src.nsswitch) && lo < sssd_hi && hi >= sssd_lo)
        return {result("job groups", CheckStatus::warn,
                       "the jobs' guest groups " + range +
                           " lie in SSSD's default AD id-mapping range (200000-2000200000), which serves groups here: "
                           "none was found, but a group mapped there later makes jobs fail",
                       "set job_gid_base to 2000200000 or above, or ldap_idmap_range_min/max to keep them apart")};
    return {result("job groups", CheckStatus::ok,
                   "the jobs' guest groups " + range + " hold no group of the site (enumerated, and 64 gids sampled)")};
}

std::vector<CheckResult> run_doctor(const SysfsRoot& root, const DeviceConfig* cfg, const DoctorOptions& opts) {
    IommuState st = read_iommu_state(root);
    std::vector<std::pair<std::string, std::function<std::vector<CheckResult>()>>> checks = {
        {"iommu", [&] { return check_iommu(root, st); }},
        {"interrupt-remapping", [&] { return check_interrupts(root, st, cfg); }},
        {"vfio-pci", [&] { return check_vfio(root, st); }},
        {"gpus", [&] { return check_gpus(root, cfg); }},
        {"vfs", [&] { return check_vfs(root, cfg); }},
        {"hugepages", [&] { return check_hugepages(root); }},
        {"qemu", [&] { return check_qemu(opts); }},
        {"kvm",
         [&] {
             return opts.kvm_check ? opts.kvm_check()
                                   : std::vector<CheckResult>{
                                         result("kvm", CheckStatus::skip, "no node configuration given (--config)")};
         }},
        {"slurm",
         [&] {
             return opts.slurm_check ? opts.slurm_check()
                                     : std::vector<CheckResult>{
                                           result("slurm", CheckStatus::skip, "no Slurm check given (slurm_check)")};
         }},
        {"shares",
         [&] {
             return opts.shares_check ? opts.shares_check()
                                      : std::vector<CheckResult>{result("shares", CheckStatus::skip,
                                                                        "no node configuration given (--config)")};
         }},
        {"job groups",
         [&] {
             return opts.groups_check ? opts.groups_check()
                                      : std::vector<CheckResult>{result("job groups", CheckStatus::skip,
                                                                        "no node configuration given (--config)")};
         }},
        {"network",
         [&] {
             return opts.network_check ? opts.network_check()
                                       : std::vector<CheckResult>{result("network", CheckStatus::skip,
                                                                         "no node configuration given (--config)")};
         }},
    };
    std::vector<CheckResult> out;
    for (const auto& [name, fn] : checks) {
        if (skipped(opts, name)) {
            out.push_back(result(name, CheckStatus::skip, "skipped (--skip)"));
            continue;
        }
        try {
            for (auto& r : fn())
                if (!skipped(opts, r.name)) out.push_back(std::move(r));
        } catch (const Error& e) {
            out.push_back(result(name, CheckStatus::fail, "check failed: " + e.chain(), "see the message"));
        }
    }
    return out;
}

bool doctor_failed(const std::vector<CheckResult>& results) {
    return std::any_of(results.begin(), results.end(),
                       [](const CheckResult& r) { return r.status == CheckStatus::fail; });
}

Json doctor_to_json(const std::vector<CheckResult>& results) {
    JsonOut j;
    j.objects("checks", results, [](JsonOut& o, const CheckResult& r) {
        o("name", r.name);
        o("status", check_status_str(r.status));
        o("message", r.message);
        o.nullable("fix", r.fix);
    });
    j("ok", !doctor_failed(results));
    return j.take();
}

std::string format_doctor(const std::vector<CheckResult>& results) {
    std::string out;
    int fails = 0, warns = 0;
    for (const auto& r : results) {
        char tag[16];
        std::snprintf(tag, sizeof tag, "[%-4s]", check_status_str(r.status));
        out += std::string(tag) + " " + r.name + ": " + r.message + "\n";
        if (!r.fix.empty() && (r.status == CheckStatus::fail || r.status == CheckStatus::warn))
            out += "       fix: " + r.fix + "\n";
        fails += r.status == CheckStatus::fail;
        warns += r.status == CheckStatus::warn;
    }
    out += "\n" + std::to_string(fails) + " failed, " + std::to_string(warns) + " warning(s)\n";
    return out;
}

}  // namespace svm
