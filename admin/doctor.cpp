// slurm-vm doctor: is this node ready for VM jobs? One line per check, with
// the fix for each failure; exit status 1 when any check fails.
#include <slurm/slurm_version.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "config.hpp"
#include "device_config.hpp"
#include "doctor.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "proc.hpp"
#include "sysfs.hpp"

namespace svm::admin {

std::optional<DeviceConfig> load_admin_device_config(const std::string& explicit_path);  // inventory.cpp

namespace {

// The Slurm release this package was built against ("22.05"): the plugin
// beside this command comes from the same build.
const std::string kBuiltSlurmRelease = [] {
    char b[16];
    std::snprintf(b, sizeof b, "%u.%02u", SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
                  SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER));
    return std::string(b);
}();

const char* kDoctorHelp =
    "usage: slurm-vm doctor [--root DIR] [--config FILE] [--json] [--skip CHECK[,CHECK...]]\n"
    "\n"
    "Check this node's readiness for VM jobs, one check at a time. Each prints\n"
    "OK, WARN, FAIL or SKIP and, for failures and warnings, the fix.\n"
    "\n"
    "Checks:\n"
    "  iommu                IOMMU on (groups in /sys/kernel/iommu_groups; kernel\n"
    "                       command line intel_iommu=on / amd_iommu=on)\n"
    "  interrupt-remapping  interrupt remapping on; vfio_iommu_type1\n"
    "                       allow_unsafe_interrupts off (unless the site policy\n"
    "                       devices.policy.allow_unsafe_interrupts accepts it)\n"
    "  vfio-pci             the vfio-pci driver is loaded\n"
    "  gpus                 each configured GPU can be given to a job: IOMMU group\n"
    "                       viable, reset method present\n"
    "  vfs                  each configured VF provider has its VFs created\n"
    "  hugepages            hugepages reserved (a warning only)\n"
    "  qemu                 a QEMU binary is installed (and the libvirt version)\n"
    "  slurm                the Slurm settings the plugin relies on (PrologFlags,\n"
    "                       process tracking, task plugin, prolog/epilog, plugstack)\n"
    "                       and that the running Slurm is the release the plugin\n"
    "                       was built against\n"
    "  network              the guests' network: each job a segment of its own;\n"
    "                       the underlay namespace, nft for the guests' guards\n"
    "\n"
    "Options:\n"
    "  --root DIR     read sysfs, /proc and /dev under DIR instead of / (binaries\n"
    "                 are still looked up on this host)\n"
    "  --config FILE  node configuration (its \"devices\" object; default\n"
    "                 " SVM_SYSCONFDIR
    "/slurm-vm.json when it exists)\n"
    "  --json         print {\"ok\": bool, \"checks\": [{name,status,message,fix}]}\n"
    "  --skip LIST    comma-separated checks not to run (e.g. qemu,slurm)\n"
    "  -h, --help     show this help\n"
    "\n"
    "Exit status: 0 when no check fails (warnings allowed), 1 when one fails,\n"
    "2 on a usage error.\n";

struct DoctorArgs {
    std::string root = "/", config;
    bool json = false;
    DoctorOptions opts;
};

// The command's arguments into `d`; the exit status when the command ends
// here (help, a usage error).
std::optional<int> parse_doctor_args(const Args& args, DoctorArgs& d) {
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        std::string val;
        auto take = [&](const std::string& name) {
            if (a == name) {
                if (i + 1 >= args.size()) {
                    std::fprintf(stderr, "slurm-vm doctor: %s needs a value\n", name.c_str());
                    return -1;
                }
                val = args[++i];
                return 1;
            }
            if (a.compare(0, name.size() + 1, name + "=") == 0) {
                val = a.substr(name.size() + 1);
                return 1;
            }
            return 0;
        };
        int r;
        if (a == "-h" || a == "--help") {
            std::fputs(kDoctorHelp, stdout);
            return 0;
        } else if (a == "--json") {
            d.json = true;
        } else if ((r = take("--root")) != 0) {
            if (r < 0) return 2;
            d.root = val;
        } else if ((r = take("--config")) != 0) {
            if (r < 0) return 2;
            d.config = val;
        } else if ((r = take("--skip")) != 0) {
            if (r < 0) return 2;
            std::stringstream in(val);
            std::string s;
            while (std::getline(in, s, ',')) d.opts.skip.push_back(s);
        } else {
            std::fprintf(stderr, "slurm-vm doctor: unknown option '%s'\n%s", a.c_str(), kDoctorHelp);
            return 2;
        }
    }
    return std::nullopt;
}

RunResult scontrol_show_config() {
    RunOptions o;
    o.timeout_ms = 20000;
    o.env = inherited_env({"PATH", "SLURM_CONF"});
    return run({"scontrol", "show", "config"}, o);
}

// The slurm check: Slurm's settings as scontrol shows them, the plugin
// stack's file, and the running release.
std::vector<CheckResult> check_slurm() {
    RunResult r = scontrol_show_config();
    if (!r.ok())
        return std::vector<CheckResult>{{"slurm", CheckStatus::warn,
                                         "cannot read Slurm's configuration (" + trim(r.err) + ")",
                                         "run doctor where scontrol reaches slurmctld"}};
    std::string ps = slurm_config_value(r.out, "PlugStackConfig"), text;
    try {
        if (!ps.empty()) read_file_if_exists(ps, text);
    } catch (const Error&) {
    }
    std::vector<CheckResult> out = check_slurm_config(r.out, text);
    out.push_back(check_slurm_release(r.out, kBuiltSlurmRelease));
    return out;
}

// The checks of the node configuration at `path` (when it exists) that
// the caller has not set.
void add_config_checks(const std::string& path, DoctorOptions& opts) {
    if (!path_exists(path)) return;
    if (!opts.network_check) {
        opts.network_check = [path] {
            char host[256] = "";
            ::gethostname(host, sizeof host - 1);
            std::string node = host;
            node = node.substr(0, node.find('.'));
            return check_guest_network(load_config(path, node).network);
        };
    }
    if (!opts.kvm_check) opts.kvm_check = [path] { return check_kvm_access(load_config(path, "")); };
    if (!opts.groups_check) {
        opts.groups_check = [path] {
            RunResult r = scontrol_show_config();
            std::string max = r.ok() ? slurm_config_value(r.out, "MaxJobId") : "";
            uint32_t max_job_id = kMaxJobGidSpan;  // Slurm's default
            if (!max.empty() && max.size() <= 10 && max.find_first_not_of("0123456789") == std::string::npos)
                max_job_id = static_cast<uint32_t>(std::min<unsigned long>(std::stoul(max), UINT32_MAX));
            return check_job_groups(load_config(path, ""), max_job_id, name_service_groups());
        };
    }
    if (!opts.shares_check) opts.shares_check = [path] { return check_shares(load_config(path, "")); };
}

}  // namespace

int cmd_doctor(const Args& args) {
    DoctorArgs d;
    if (std::optional<int> status = parse_doctor_args(args, d)) return *status;
    if (!d.opts.slurm_check) d.opts.slurm_check = check_slurm;
    add_config_checks(d.config.empty() ? std::string(SVM_SYSCONFDIR) + "/slurm-vm.json" : d.config, d.opts);
    auto cfg = load_admin_device_config(d.config);
    SysfsRoot sysroot(d.root);
    auto results = run_doctor(sysroot, cfg ? &*cfg : nullptr, d.opts);
    if (d.json) std::printf("%s\n", json_dump(doctor_to_json(results).get(), true).c_str());
    else std::fputs(format_doctor(results).c_str(), stdout);
    return doctor_failed(results) ? 1 : 0;
}

}  // namespace svm::admin
