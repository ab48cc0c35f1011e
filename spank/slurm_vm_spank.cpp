// The slurm-vm SPANK plugin: the only file with slurm_spank_* entry points.
// A thin shim: every entry point is noexcept, catches everything, logs and
// returns an error code; the logic lives in lib/.
//
//   sbatch/salloc/srun (local, allocator): --vm-image, --vm-kernel, --vm-initrd,
//     --vm-cmdline, --vm-irq-profile, --vm-save (and their SLURM_VM_* twins); the image is
//     checked as the submitting user and handed to the prolog through the job control
//     environment (SPANK_SLURM_VM_IMAGE, ...).
//   slurmstepd, extern step (remote): starts the keeper, which runs the guest
//     inside the job's cgroups.
//   slurmstepd, every other task (remote): replaces the task's command with
//     slurm-vm-exec, which runs it inside the guest.
#include <fcntl.h>
#include <signal.h>
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "config.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_console.hpp"
#include "image_check.hpp"
#include "irq_profile.hpp"
#include "job_plan.hpp"
#include "oci_image.hpp"
#include "proc.hpp"
#include "site_catalogue.hpp"
#include "vm_save.hpp"

// SPANK_PLUGIN defines const arrays, which C++ gives internal linkage unless
// they were declared extern first.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(slurm-vm, 1)
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
// Slurm 25.05+: if slurm_spank_init fails in slurmstepd, fail the job rather
// than drain the node. Nothing there depends on the user's request (the
// options are checked at submit), so such a failure is plugstack.conf's, and
// it is logged; draining every node for it would help nobody.
extern "C" int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

namespace {

struct Options {
    std::string image, kernel, initrd, cmdline, irq_profile, save;
    bool console = false;  // srun --vm-console (slurm-vm console): print the guest's console
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
} g_opt;

int set_opt(std::string& slot, const char* optarg, const char* name) noexcept {
    if (!optarg || !*optarg) {
        slurm_error("slurm-vm: --%s needs a value", name);
        return -1;
    }
    slot = optarg;  // tolerate being called twice with the same value
    return 0;
}

int opt_image(int, const char* a, int) { return set_opt(g_opt.image, a, "vm-image"); }
int opt_kernel(int, const char* a, int) { return set_opt(g_opt.kernel, a, "vm-kernel"); }
int opt_initrd(int, const char* a, int) { return set_opt(g_opt.initrd, a, "vm-initrd"); }
int opt_cmdline(int, const char* a, int) { return set_opt(g_opt.cmdline, a, "vm-cmdline"); }
int opt_irq_profile(int, const char* a, int) { return set_opt(g_opt.irq_profile, a, "vm-irq-profile"); }
int opt_save(int, const char* a, int) { return set_opt(g_opt.save, a, "vm-save"); }
int opt_console(int, const char*, int) {
    g_opt.console = true;
    return 0;
}

struct spank_option k_options[] = {
    {const_cast<char*>("vm-image"), const_cast<char*>("PATH"),
     const_cast<char*>("Run the job inside a VM booted from this qcow2 or raw disk image "
                       "(env: SLURM_VM_IMAGE)."),
     1, 0, opt_image},
    {const_cast<char*>("vm-kernel"), const_cast<char*>("PATH"),
     const_cast<char*>("Boot the VM image with this kernel instead of its bootloader (env: SLURM_VM_KERNEL)."), 1,
     0, opt_kernel},
    {const_cast<char*>("vm-initrd"), const_cast<char*>("PATH"),
     const_cast<char*>("Initrd for --vm-kernel (env: SLURM_VM_INITRD)."), 1, 0, opt_initrd},
    {const_cast<char*>("vm-cmdline"), const_cast<char*>("ARGS"),
     const_cast<char*>("Kernel command line for --vm-kernel (env: SLURM_VM_CMDLINE)."), 1, 0, opt_cmdline},
    {const_cast<char*>("vm-irq-profile"), const_cast<char*>("NAME"),
     const_cast<char*>("Interrupt moderation of the VM's InfiniBand/Ethernet VF: latency, throughput or default "
                       "(the driver's; env: SLURM_VM_IRQ_PROFILE; the node's irq_profile when not given)."),
     1, 0, opt_irq_profile},
    {const_cast<char*>("vm-save"), const_cast<char*>("PATH"),
     const_cast<char*>("When the job ends, write the first node's guest disk as a new image to PATH, owned by you "
                       "(env: SLURM_VM_SAVE)."),
     1, 0, opt_save},
    {const_cast<char*>("vm-console"), nullptr,
     const_cast<char*>("(srun in a VM job; used by `slurm-vm console`) print the serial console of the node's guest "
                       "instead of running the command."),
     0, 0, opt_console},
    SPANK_OPTIONS_TABLE_END};

int parse_args(int ac, char** av) noexcept {
    for (int i = 0; i < ac; ++i) {
        std::string a = av[i];
        if (a.rfind("config=", 0) == 0) {
            g_opt.config = a.substr(7);
        } else {
            slurm_error("slurm-vm: unknown plugstack.conf argument \"%s\" (known: config=FILE)", av[i]);
            return -1;
        }
    }
    return 0;
}

std::string absolute(const std::string& p) {
    if (p.empty() || p[0] == '/') return p;
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return p;
    return svm::path_join(cwd, p);
}

// The node configuration as the submit host sees it (policy, catalogue);
// nullopt when there is none or it cannot be read: the nodes check again.
std::optional<svm::NodeConfig> submit_config() {
    try {
        if (svm::path_exists(g_opt.config)) return svm::load_config(g_opt.config, "submit");
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

svm::ImagePolicy submit_policy(const std::optional<svm::NodeConfig>& c) {
    svm::ImagePolicy pol;
    if (c) {
        pol.max_virtual_size = c->max_image_virtual_size;
        pol.allowed_dirs = c->allowed_image_dirs;
        pol.qemu_img = c->qemu_img;
    }
    return pol;
}

// The partitions the job asks for: the command line, else the environment
// (SBATCH_PARTITION, SALLOC_PARTITION, SLURM_PARTITION), else the cluster's
// default partition. (A partition named only in an #SBATCH line of the script
// is not seen here: the node applies the same rule when the job starts.)
std::vector<std::string> submit_partitions() {
    std::vector<std::string> args;
    std::string text;
    if (svm::read_file_if_exists("/proc/self/cmdline", text)) {
        size_t pos = 0;
        while (pos < text.size()) {
            size_t end = text.find('\0', pos);
            if (end == std::string::npos) end = text.size();
            args.push_back(text.substr(pos, end - pos));
            pos = end + 1;
        }
    }
    std::string v = svm::partition_from_args(args);
    for (const char* name : {"SBATCH_PARTITION", "SALLOC_PARTITION", "SLURM_PARTITION"})
        if (v.empty())
            if (const char* e = getenv(name)) v = e;
    if (v.empty()) {
        partition_info_msg_t* msg = nullptr;
        if (slurm_load_partitions(0, &msg, SHOW_ALL) == SLURM_SUCCESS && msg) {
            for (uint32_t i = 0; i < msg->record_count; ++i)
                if ((msg->partition_array[i].flags & PART_FLAG_DEFAULT) && msg->partition_array[i].name)
                    v = msg->partition_array[i].name;
            slurm_free_partition_info_msg(msg);
        }
    }
    return svm::split_partitions(v);
}

std::string self_name() {
    struct passwd* pw = getpwuid(getuid());
    return pw ? pw->pw_name : std::to_string(getuid());
}

// Local and allocator contexts: check as the submitting user and pass on.
int submit_side(spank_t sp) {
    auto from_env = [](std::string& slot, const char* name) {
        if (slot.empty())
            if (const char* v = getenv(name)) slot = v;
    };
    from_env(g_opt.image, "SLURM_VM_IMAGE");
    from_env(g_opt.kernel, "SLURM_VM_KERNEL");
    from_env(g_opt.initrd, "SLURM_VM_INITRD");
    from_env(g_opt.cmdline, "SLURM_VM_CMDLINE");
    from_env(g_opt.save, "SLURM_VM_SAVE");
    // A profile in the environment is a preference (it may be set for every
    // job); only the option itself asks for a VM.
    bool irq_option = !g_opt.irq_profile.empty();
    from_env(g_opt.irq_profile, "SLURM_VM_IRQ_PROFILE");
    if (g_opt.image.empty()) {
        if (!g_opt.kernel.empty() || !g_opt.initrd.empty() || !g_opt.cmdline.empty() || irq_option ||
            !g_opt.save.empty()) {
            slurm_error("slurm-vm: --vm-kernel, --vm-initrd, --vm-cmdline, --vm-irq-profile and --vm-save need "
                        "--vm-image");
            return -1;
        }
        return 0;
    }
    try {
        std::optional<svm::NodeConfig> cfg = submit_config();
        svm::SiteCatalogue cat = cfg ? cfg->site : svm::SiteCatalogue{};
        if (g_opt.image == svm::kNoVmImage) {
            // On the host: refused where the partition requires a VM; passed
            // on, so that a partition that only defaults to a VM leaves it out.
            if (!g_opt.kernel.empty() || !g_opt.initrd.empty() || !g_opt.cmdline.empty() || irq_option ||
                !g_opt.save.empty())
                SVM_THROW("--vm-kernel, --vm-initrd, --vm-cmdline, --vm-irq-profile and --vm-save need a "
                          "--vm-image other than none");
            svm::VmChoice c = svm::choose_vm(cat, g_opt.image, submit_partitions());
            if (!c.refusal.empty()) SVM_THROW(c.refusal);
            if (spank_job_control_setenv(sp, "SLURM_VM_IMAGE", svm::kNoVmImage, 1) != ESPANK_SUCCESS)
                SVM_THROW("cannot pass SLURM_VM_IMAGE to the job");
            return 0;
        }
        if (!g_opt.irq_profile.empty()) svm::require_irq_profile(g_opt.irq_profile, "--vm-irq-profile");
        std::string image_path = g_opt.image;
        bool registry = svm::is_registry_ref(g_opt.image);
        if (registry) {
            // Pulled by the nodes; here: the reference, and that the
            // registry has it (when this host has skopeo), asked as the user.
            std::string ref = svm::skopeo_ref(g_opt.image);
            svm::OciSettings os = cfg ? cfg->oci : svm::OciSettings{};
            if (::access(os.skopeo.c_str(), X_OK) == 0) {
                std::vector<std::string> a = {os.skopeo, "--insecure-policy", "inspect", "--no-tags", "--format",
                                              "{{.Digest}}"};
                for (const auto& r : os.insecure_registries)
                    if (r == svm::registry_of(g_opt.image)) a.push_back("--tls-verify=false");
                a.push_back(ref);
                svm::RunOptions ro;
                ro.env = svm::inherited_env({"PATH", "HOME", "XDG_RUNTIME_DIR", "REGISTRY_AUTH_FILE"});
                ro.timeout_ms = 60000;
                svm::RunResult r = svm::run(a, ro);
                if (!r.ok())
                    SVM_THROW("--vm-image=" + g_opt.image + " cannot be found in its registry: " +
                              svm::skopeo_message(r.err));
            }
        } else if (g_opt.image.find('/') == std::string::npos) {
            // A bare name is the site catalogue's (passed on as the name: each
            // node resolves it with its own configuration), or a file here.
            if (!cat.find_image(g_opt.image) && svm::path_exists(g_opt.image)) g_opt.image = absolute(g_opt.image);
            svm::VmChoice c = svm::choose_vm(cat, g_opt.image, {});
            if (!c.refusal.empty()) SVM_THROW(c.refusal);
            image_path = c.image;
        } else {
            g_opt.image = absolute(g_opt.image);
            image_path = g_opt.image;
        }
        g_opt.kernel = absolute(g_opt.kernel);
        g_opt.initrd = absolute(g_opt.initrd);
        if (!registry) svm::open_image_as_self(image_path, submit_policy(cfg));
        if (!g_opt.kernel.empty()) svm::check_boot_file(g_opt.kernel, "kernel", self_name());
        if (!g_opt.initrd.empty()) {
            if (g_opt.kernel.empty()) SVM_THROW("--vm-initrd needs --vm-kernel as well");
            svm::check_boot_file(g_opt.initrd, "initrd", self_name());
        }
        if (g_opt.cmdline.find('\n') != std::string::npos) SVM_THROW("--vm-cmdline must be a single line");
        if (!g_opt.save.empty()) {
            g_opt.save = absolute(g_opt.save);
            svm::check_save_path_as_self(g_opt.save);
        }
    } catch (const svm::Error& e) {
        slurm_error("slurm-vm: %s", e.reason().c_str());
        return -1;
    }
    struct {
        const char* name;
        const std::string& value;
    } vars[] = {{"SLURM_VM_IMAGE", g_opt.image},
                {"SLURM_VM_KERNEL", g_opt.kernel},
                {"SLURM_VM_INITRD", g_opt.initrd},
                {"SLURM_VM_CMDLINE", g_opt.cmdline},
                {"SLURM_VM_IRQ_PROFILE", g_opt.irq_profile},
                {"SLURM_VM_SAVE", g_opt.save}};
    for (auto& v : vars) {
        if (v.value.empty()) continue;
        if (spank_job_control_setenv(sp, v.name, v.value.c_str(), 1) != ESPANK_SUCCESS) {
            slurm_error("slurm-vm: cannot pass %s to the job", v.name);
            return -1;
        }
    }
    return 0;
}

// Finds this node's plan of the job: state_dir may hold "%n" (several slurmd
// on one host); the plan whose node_index is this node's id in the job wins.
bool find_plan(uint32_t job_id, uint32_t node_id, svm::JobPlan& out, std::string& node) {
    svm::NodeConfig c;
    try {
        c = svm::load_config(g_opt.config, "%n");
    } catch (const svm::Error& e) {
        slurm_error("slurm-vm: %s", e.chain().c_str());
        return false;
    }
    std::vector<std::pair<std::string, std::string>> candidates;  // node, dir
    auto pos = c.state_dir.find("%n");
    if (pos == std::string::npos) {
        candidates.push_back({"", c.job_dir(job_id)});
    } else {
        std::string parent = c.state_dir.substr(0, pos);
        for (const auto& n : svm::list_dir(parent)) {
            svm::NodeConfig cn = svm::load_config(g_opt.config, n);
            candidates.push_back({n, cn.job_dir(job_id)});
        }
    }
    for (const auto& [n, dir] : candidates) {
        std::string text;
        try {
            if (!svm::read_file_if_exists(svm::path_join(dir, "plan.json"), text)) continue;
            svm::JobPlan p = svm::JobPlan::from_json(text, dir);
            if (p.job_id != job_id || static_cast<uint32_t>(p.node_index) != node_id) continue;
            out = p;
            node = p.node;
            return true;
        } catch (const svm::Error&) {
            continue;
        }
    }
    return false;
}

// In the extern step's slurmstepd (root): start the keeper, detached, with
// the step daemon's pid so that it can join the step's cgroups.
int start_keeper(const svm::JobPlan& p, const std::string& node) {
    std::string keeper = svm::path_join(svm::NodeConfig{}.libexec_dir, "slurm-vm-keeper");
    try {
        svm::NodeConfig c = svm::load_config(g_opt.config, node);
        keeper = svm::path_join(c.libexec_dir, "slurm-vm-keeper");
    } catch (const svm::Error&) {
    }
    std::string log = svm::path_join(p.dir, "keeper.log");
    std::string job = std::to_string(p.job_id), stepd = std::to_string(getpid());
    pid_t child = fork();
    if (child < 0) {
        slurm_error("slurm-vm: job %u: fork: %m", p.job_id);
        return -1;
    }
    if (child == 0) {
        setsid();
        if (fork() != 0) _exit(0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
        int in = open("/dev/null", O_RDONLY);
        int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
        if (in >= 0) dup2(in, 0);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        for (int fd = 3; fd < 65536; ++fd) close(fd);
        execl(keeper.c_str(), "slurm-vm-keeper", "--config", g_opt.config.c_str(), "--node", node.c_str(), "--job",
              job.c_str(), "--join-cgroup-of", stepd.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int st;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    slurm_info("slurm-vm: job %u: keeper started on %s", p.job_id, node.c_str());
    return 0;
}

}  // namespace

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
    try {
        if (parse_args(ac, av) != 0) return -1;
        for (auto* o = k_options; o->name; ++o) {
            if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
                slurm_error("slurm-vm: cannot register option --%s", o->name);
                return -1;
            }
        }
        return 0;
    } catch (...) {
        slurm_error("slurm-vm: unexpected error in init");
        return -1;
    }
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int, char**) {
    try {
        spank_context_t ctx = spank_context();
        if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR) return submit_side(sp);
        return 0;
    } catch (const std::exception& e) {
        slurm_error("slurm-vm: %s", e.what());
        return -1;
    } catch (...) {
        slurm_error("slurm-vm: unexpected error");
        return -1;
    }
}

extern "C" int slurm_spank_task_post_fork(spank_t sp, int, char**) {
    try {
        if (spank_context() != S_CTX_REMOTE) return 0;
        uint32_t job = 0, step = 0, nodeid = 0;
        if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
        if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return 0;
        if (step != SLURM_EXTERN_CONT) return 0;
        if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS) return 0;
        svm::JobPlan p;
        std::string node;
        if (!find_plan(job, nodeid, p, node)) return 0;  // not a VM job
        return start_keeper(p, node);
    } catch (const std::exception& e) {
        slurm_error("slurm-vm: %s", e.what());
        return -1;
    } catch (...) {
        return -1;
    }
}

// In the task, as root, before Slurm drops to the step's user: for
// --vm-console, the guest's console log (root:<job group>, which the user
// cannot open) is opened here for a step of the job's owner or root, and the
// descriptor handed to the task wrapper, which prints it.
extern "C" int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
    try {
        if (spank_context() != S_CTX_REMOTE) return 0;
        spank_unsetenv(sp, "SLURM_VM_CONSOLE_FD");
        if (!g_opt.console) return 0;
        uint32_t job = 0, step = 0, nodeid = 0;
        uid_t uid = static_cast<uid_t>(-1);
        if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return -1;
        if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return -1;
        if (step == SLURM_EXTERN_CONT || step == SLURM_BATCH_SCRIPT) return 0;
        if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS) return -1;
        if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) return -1;
        svm::JobPlan p;
        std::string node;
        if (!find_plan(job, nodeid, p, node)) {
            slurm_error("slurm-vm: job %u runs no guest on this node: there is no console to show", job);
            return -1;
        }
        if (!svm::console_allowed(uid, p.uid)) {
            slurm_error("slurm-vm: job %u: the console of its guest is for its owner and root only", job);
            return -1;
        }
        int fd = open(p.console_log().c_str(), O_RDONLY | O_NOFOLLOW);
        if (fd < 0) {
            slurm_error("slurm-vm: job %u: open %s: %m", job, p.console_log().c_str());
            return -1;
        }
        spank_setenv(sp, "SLURM_VM_CONSOLE_FD", std::to_string(fd).c_str(), 1);
        return 0;
    } catch (const std::exception& e) {
        slurm_error("slurm-vm: %s", e.what());
        return -1;
    } catch (...) {
        return -1;
    }
}

extern "C" int slurm_spank_task_init(spank_t sp, int, char**) {
    try {
        if (spank_context() != S_CTX_REMOTE) return 0;
        uint32_t job = 0, step = 0, nodeid = 0;
        if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
        if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return 0;
        if (step == SLURM_EXTERN_CONT) return 0;
        if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS) return 0;
        svm::JobPlan p;
        std::string node;
        if (!find_plan(job, nodeid, p, node)) {
            // A VM job must never run on the host: if the job asked for a VM
            // but no guest was prepared here, fail the task.
            char* val = nullptr;
            bool asked = spank_option_getopt(sp, &k_options[0], &val) == ESPANK_SUCCESS && val && *val &&
                         std::strcmp(val, svm::kNoVmImage) != 0;
            char part[256] = "";
            if (!asked && spank_getenv(sp, "SLURM_JOB_PARTITION", part, sizeof part) == ESPANK_SUCCESS) {
                try {
                    svm::NodeConfig c = svm::load_config(g_opt.config, "%n");
                    const svm::PartitionPolicy* pp = c.site.find_partition(part);
                    asked = pp && pp->mode == svm::VmMode::required;
                } catch (const std::exception&) {
                }
            }
            if (asked) {
                slurm_error("slurm-vm: job %u: no guest was prepared on this node; the task does not run on the "
                            "host (check the node's Prolog and PrologFlags=Alloc,Contain)", job);
                return -1;
            }
            return 0;
        }
        int argc = 0;
        char** argv = nullptr;
        if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv) {
            slurm_error("slurm-vm: job %u: cannot read the task's command", job);
            return -1;
        }
        svm::NodeConfig c = svm::load_config(g_opt.config, node);
        std::string exec = svm::path_join(c.libexec_dir, "slurm-vm-exec");
        spank_setenv(sp, "SLURM_VM_PLAN", p.plan_file().c_str(), 1);
        // (Unset for steps: an srun in the batch script passes the batch's on.)
        if (step == SLURM_BATCH_SCRIPT) spank_setenv(sp, "SLURM_VM_BATCH", "1", 1);
        else spank_unsetenv(sp, "SLURM_VM_BATCH");
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
        // Slurm 23.11+: the clean interface, argv becomes [slurm-vm-exec, cmd...].
        const char* pre[] = {exec.c_str()};
        spank_setenv(sp, "SLURM_VM_PREPENDED", "1", 1);
        if (spank_prepend_task_argv(sp, 1, pre) != ESPANK_SUCCESS) {
            slurm_error("slurm-vm: job %u: cannot prepend slurm-vm-exec to the task", job);
            return -1;
        }
#else
        // Slurm 22.05: this runs in the forked task just before exec; argv is
        // this process's copy. argv[0] becomes slurm-vm-exec, the original
        // travels in SLURM_VM_ARGV0 (the string lives until exec).
        spank_setenv(sp, "SLURM_VM_ARGV0", argv[0], 1);
        argv[0] = strdup(exec.c_str());
#endif
        return 0;
    } catch (const std::exception& e) {
        slurm_error("slurm-vm: %s", e.what());
        return -1;
    } catch (...) {
        return -1;
    }
}
