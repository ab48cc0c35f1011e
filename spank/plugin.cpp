// The slurm-vm SPANK plugin: the only file with slurm_spank_* entry points.
// Each entry point goes through one dispatcher, noexcept, which logs what it
// catches and returns an error code (spank.h declares the entry points
// without noexcept, so they cannot say it themselves); the contexts' handlers are in
// submit.cpp and remote.cpp, the logic in lib/job/plugin.hpp.
//
//   sbatch/salloc/srun (local, allocator): --vm-image, --vm-kernel, --vm-initrd,
//     --vm-cmdline, --vm-irq-profile, --vm-save, --vm-resume (and their SLURM_VM_* twins); the image is
//     checked as the submitting user and handed to the prolog through the job control
//     environment (SPANK_SLURM_VM_IMAGE, ...).
//   slurmstepd, extern step (remote): starts the keeper, which runs the guest
//     inside the job's cgroups.
//   slurmstepd, a VM job's other steps (remote): after the tasks start, only
//     the project's and the site's programs may still be executed.
//   slurmstepd, every other task (remote): replaces the task's command with
//     slurm-vm-exec, which runs it inside the guest.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <string>
#include <vector>

#include "error.hpp"
#include "slurm_host.hpp"

// SPANK_PLUGIN defines const arrays, which C++ gives internal linkage unless
// they were declared extern first.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(slurm - vm, 1)
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
// Slurm 25.05+: if slurm_spank_init fails in slurmstepd, fail the job rather
// than drain the node. Nothing there depends on the user's request (the
// options are checked at submit), so such a failure is plugstack.conf's, and
// it is logged; draining every node for it would help nobody.
// (A definition in a linkage block: spank.h declares it extern.)
extern "C" {
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
}
#endif

namespace svm::spank {

PluginOptions& options() {
    static PluginOptions opt;
    return opt;
}

namespace {

// The one way into the plugin: runs `fn`, logs anything it throws.
template <typename F>
int dispatch(const char* where, F&& fn) noexcept {
    try {
        return fn();
    } catch (const Error& e) {
        slurm_error("slurm-vm: %s", e.reason().c_str());
    } catch (const std::exception& e) {
        slurm_error("slurm-vm: %s: %s", where, e.what());
    } catch (...) {
        slurm_error("slurm-vm: %s: unexpected error", where);
    }
    return -1;
}

int set_opt(std::string& slot, const char* optarg, const char* name) noexcept {
    if (!optarg || !*optarg) {
        slurm_error("slurm-vm: --%s needs a value", name);
        return -1;
    }
    return dispatch(name, [&] {
        slot = optarg;  // tolerate being called twice with the same value
        return 0;
    });
}

int opt_image(int, const char* a, int) { return set_opt(options().image, a, "vm-image"); }
int opt_kernel(int, const char* a, int) { return set_opt(options().kernel, a, "vm-kernel"); }
int opt_initrd(int, const char* a, int) { return set_opt(options().initrd, a, "vm-initrd"); }
int opt_cmdline(int, const char* a, int) { return set_opt(options().cmdline, a, "vm-cmdline"); }
int opt_irq_profile(int, const char* a, int) { return set_opt(options().irq_profile, a, "vm-irq-profile"); }
int opt_save(int, const char* a, int) { return set_opt(options().save, a, "vm-save"); }
int opt_resume(int, const char* a, int) { return set_opt(options().resume, a, "vm-resume"); }
int opt_console(int, const char*, int) {
    options().console = true;
    return 0;
}

struct spank_option k_options[] = {
    {const_cast<char*>("vm-image"), const_cast<char*>("PATH"),
     const_cast<char*>("Run the job inside a VM booted from this qcow2 or raw disk image "
                       "(env: SLURM_VM_IMAGE)."),
     1, 0, opt_image},
    {const_cast<char*>("vm-kernel"), const_cast<char*>("PATH"),
     const_cast<char*>("Boot the VM image with this kernel instead of its bootloader (env: SLURM_VM_KERNEL)."), 1, 0,
     opt_kernel},
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
    {const_cast<char*>("vm-resume"), const_cast<char*>("auto|never"),
     const_cast<char*>("auto: when Slurm requeues the job (preemption, scontrol requeue), save its VMs and resume "
                       "them where they stopped on its next run, instead of starting the script again "
                       "(env: SLURM_VM_RESUME; the site's default when not given)."),
     1, 0, opt_resume},
    {const_cast<char*>("vm-console"), nullptr,
     const_cast<char*>("(srun in a VM job; used by `slurm-vm console`) print the serial console of the node's guest "
                       "instead of running the command."),
     0, 0, opt_console},
    SPANK_OPTIONS_TABLE_END};

int init(spank_t sp, int ac, char** av) {
    parse_plugin_args(std::vector<std::string>(av, av + ac), options());
    for (auto* o = k_options; o->name; ++o)
        if (spank_option_register(sp, o) != ESPANK_SUCCESS)
            SVM_THROW(std::string("cannot register option --") + o->name);
    return 0;
}

}  // namespace

struct spank_option* image_option() {
    return &k_options[0];
}

}  // namespace svm::spank

using svm::spank::dispatch;

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
    return dispatch("init", [&] { return svm::spank::init(sp, ac, av); });
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int, char**) {
    return dispatch("submit", [&] {
        spank_context_t ctx = spank_context();
        return ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR ? svm::spank::on_submit(sp) : 0;
    });
}

// slurmstepd, after each task is started: the extern step starts the
// keeper; a VM job's other steps restrict what slurmstepd still executes.
extern "C" int slurm_spank_task_post_fork(spank_t sp, int, char**) {
    return dispatch("post fork",
                    [&] { return spank_context() == S_CTX_REMOTE ? svm::spank::on_task_post_fork(sp) : 0; });
}

// In the task, as root, before Slurm drops to the step's user: for
// --vm-console, the guest's console log (root:<job group>, which the user
// cannot open) is opened here for a step of the job's owner or root, and the
// descriptor handed to the task wrapper, which prints it.
extern "C" int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
    return dispatch("console",
                    [&] { return spank_context() == S_CTX_REMOTE ? svm::spank::on_task_privileged(sp) : 0; });
}

extern "C" int slurm_spank_task_init(spank_t sp, int, char**) {
    return dispatch("task", [&] { return spank_context() == S_CTX_REMOTE ? svm::spank::on_task(sp) : 0; });
}
