// The checks of `slurm-vm doctor`: one result per check, each with the fix
// for a failure. The command exits non-zero when any check fails.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "config.hpp"
#include "device_config.hpp"
#include "json.hpp"
#include "sysfs.hpp"

namespace svm {

enum class CheckStatus { ok, warn, fail, skip };
const char* check_status_str(CheckStatus s);  // "OK", "WARN", "FAIL", "SKIP"

struct CheckResult {
    std::string name;  // "iommu", "interrupt-remapping", "vfio-pci", "gpu 0000:3b:00.0", ...
    CheckStatus status = CheckStatus::ok;
    std::string message;  // what was found
    std::string fix;      // what to do (failures and warnings)
};

struct DoctorOptions {
    std::vector<std::string> skip;  // check names (or their first word) not to run
    // Where to look for QEMU (host paths, not under the root).
    std::vector<std::string> qemu_binaries = {"/usr/bin/qemu-system-x86_64", "/usr/libexec/qemu-kvm",
                                              "/usr/bin/qemu-kvm"};
    // The Slurm settings check (slurm-vm doctor: check_slurm_config on
    // `scontrol show config`); unset: SKIP.
    std::function<std::vector<CheckResult>()> slurm_check;
    // The guests' network (check_guest_network with the node's settings);
    // unset: SKIP.
    std::function<std::vector<CheckResult>()> network_check;
    // The guests' access to the KVM device (check_kvm_access with the node's
    // settings); unset: SKIP.
    std::function<std::vector<CheckResult>()> kvm_check;
    // How shares reach guests (check_shares with the node's settings); unset: SKIP.
    std::function<std::vector<CheckResult>()> shares_check;
    // The jobs' guest groups (check_job_groups with the node's settings); unset: SKIP.
    std::function<std::vector<CheckResult>()> groups_check;
};

// The Slurm settings slurm-vm relies on, from the text of `scontrol show config`
// (PrologFlags=Alloc,Contain, cgroup process tracking, task/cgroup, a Prolog
// and Epilog, a plugin stack); plugstack_text is that file's content ("" if
// unreadable).
std::vector<CheckResult> check_slurm_config(const std::string& show_config, const std::string& plugstack_text);
// Whether the running Slurm (SLURM_VERSION in `scontrol show config`) is the
// release ("major.minor", e.g. "24.11") the plugin was built against: Slurm
// loads a plugin only from its own release ("Incompatible plugin version").
CheckResult check_slurm_release(const std::string& show_config, const std::string& built_release);
// "Key = value" of `scontrol show config` ("" when absent).
std::string slurm_config_value(const std::string& show_config, const std::string& key);

// The guests' network: the underlay namespace exists, nft works (the
// guests' guards), the jobs' segments now; the fabric's settings are coherent.
std::vector<CheckResult> check_guest_network(const NetworkConfig& net);

// Each job's guest gets the KVM device through an ACL entry for its group:
// the device's file system must take one, and the kernel must honour it. A
// guest that cannot open the device makes libvirt re-probe QEMU on every
// guest creation (seconds each, about a minute per guest), even for TCG.
std::vector<CheckResult> check_kvm_access(const NodeConfig& cfg);

// Shares over virtio-fs need a virtiofsd (found where the keeper looks);
// over 9p, nothing (but Debian's cloud and RHEL-family guest kernels lack 9p).
std::vector<CheckResult> check_shares(const NodeConfig& cfg);

// Where check_job_groups looks: the name service by gid, its enumeration
// (every group it lists: /etc/group, and SSSD or LDAP where enumeration is
// on), and nsswitch.conf (is SSSD a source of groups?).
struct GroupSource {
    std::function<std::optional<std::string>(gid_t)> by_gid;
    std::function<std::vector<std::pair<gid_t, std::string>>()> all;
    std::string nsswitch = "/etc/nsswitch.conf";
};
GroupSource name_service_groups();  // getgrgid_r, getgrent (at most 1,000,000 groups)
// The jobs' guest groups [job_gid_base, job_gid_base + max_job_id] (Slurm's
// MaxJobId) hold no group of the site: FAIL for one found (enumerated, or at
// sampled gids: both ends and 62 between), WARN when SSSD serves groups and
// its default AD id-mapping range (200000-2000200000) meets them.
std::vector<CheckResult> check_job_groups(const NodeConfig& cfg, uint32_t max_job_id, const GroupSource& src);

std::vector<CheckResult> run_doctor(const SysfsRoot& root, const DeviceConfig* cfg, const DoctorOptions& opts = {});
bool doctor_failed(const std::vector<CheckResult>& results);
Json doctor_to_json(const std::vector<CheckResult>& results);
std::string format_doctor(const std::vector<CheckResult>& results);

}  // namespace svm
