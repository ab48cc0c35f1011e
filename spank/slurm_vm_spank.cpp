// The slurm-vm SPANK plugin: the only file with slurm_spank_* entry points.
// A thin shim: every entry point is noexcept, catches everything, logs and
// returns an error code; the logic lives in lib/.
//
//   sbatch/salloc/srun (local, allocator): --vm-image, --vm-kernel, --vm-initrd,
//     --vm-cmdline, --vm-irq-profile (and their SLURM_VM_* twins); the image is
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
#include <string>

#include "config.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "image_check.hpp"
#include "irq_profile.hpp"
#include "job_plan.hpp"

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
    std::string image, kernel, initrd, cmdline, irq_profile;
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

svm::ImagePolicy submit_policy() {
    svm::ImagePolicy pol;
    try {
        if (svm::path_exists(g_opt.config)) {
            svm::NodeConfig c = svm::load_config(g_opt.config, "submit");
            pol.max_virtual_size = c.max_image_virtual_size;
            pol.allowed_dirs = c.allowed_image_dirs;
            pol.qemu_img = c.qemu_img;
        }
    } catch (const std::exception&) {
        // The nodes check again with their own configuration.
    }
    return pol;
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
    // A profile in the environment is a preference (it may be set for every
    // job); only the option itself asks for a VM.
    bool irq_option = !g_opt.irq_profile.empty();
    from_env(g_opt.irq_profile, "SLURM_VM_IRQ_PROFILE");
    if (g_opt.image.empty()) {
        if (!g_opt.kernel.empty() || !g_opt.initrd.empty() || !g_opt.cmdline.empty() || irq_option) {
            slurm_error("slurm-vm: --vm-kernel, --vm-initrd, --vm-cmdline and --vm-irq-profile need --vm-image");
            return -1;
        }
        return 0;
    }
    try {
        if (!g_opt.irq_profile.empty()) svm::require_irq_profile(g_opt.irq_profile, "--vm-irq-profile");
        g_opt.image = absolute(g_opt.image);
        g_opt.kernel = absolute(g_opt.kernel);
        g_opt.initrd = absolute(g_opt.initrd);
        svm::open_image_as_self(g_opt.image, submit_policy());
        if (!g_opt.kernel.empty()) svm::check_boot_file(g_opt.kernel, "kernel", self_name());
        if (!g_opt.initrd.empty()) {
            if (g_opt.kernel.empty()) SVM_THROW("--vm-initrd needs --vm-kernel as well");
            svm::check_boot_file(g_opt.initrd, "initrd", self_name());
        }
        if (g_opt.cmdline.find('\n') != std::string::npos) SVM_THROW("--vm-cmdline must be a single line");
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
                {"SLURM_VM_IRQ_PROFILE", g_opt.irq_profile}};
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
            if (spank_option_getopt(sp, &k_options[0], &val) == ESPANK_SUCCESS && val && *val) {
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
