#include "plugin.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include "checkpoint.hpp"
#include "config.hpp"
#include "error.hpp"
#include "exec_guard.hpp"
#include "fs.hpp"
#include "guest_console.hpp"
#include "image_check.hpp"
#include "irq_profile.hpp"
#include "kernel_cmdline.hpp"
#include "oci_image.hpp"
#include "proc.hpp"
#include "site_catalogue.hpp"
#include "srun_options.hpp"
#include "srun_relay.hpp"
#include "vm_save.hpp"

extern char** environ;

namespace svm {

void parse_plugin_args(const std::vector<std::string>& args, PluginOptions& opt) {
    for (const auto& a : args) {
        if (a.rfind("config=", 0) != 0) SVM_THROW("unknown plugstack.conf argument \"" + a + "\" (known: config=FILE)");
        opt.config = a.substr(7);
    }
}

SubmitProcess SubmitProcess::self() {
    SubmitProcess p;
    for (char** e = environ; e && *e; ++e) p.env.emplace_back(*e);
    std::string text;
    if (read_file_if_exists("/proc/self/cmdline", text)) {
        size_t pos = 0;
        while (pos < text.size()) {
            size_t end = text.find('\0', pos);
            if (end == std::string::npos) end = text.size();
            p.args.push_back(text.substr(pos, end - pos));
            pos = end + 1;
        }
    }
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) p.cwd = cwd;
    return p;
}

namespace {

std::string absolute(const SubmitProcess& proc, const std::string& p) {
    if (p.empty() || p[0] == '/' || proc.cwd.empty()) return p;
    return path_join(proc.cwd, p);
}

// The node configuration as the submit host sees it (policy, catalogue);
// nullopt when there is none or it cannot be read: the nodes check again.
std::optional<NodeConfig> submit_config(const std::string& path) {
    try {
        if (path_exists(path)) return load_config(path, "submit");
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

ImagePolicy submit_policy(const std::optional<NodeConfig>& c) {
    ImagePolicy pol;
    if (c) {
        pol.max_virtual_size = c->max_image_virtual_size;
        pol.allowed_dirs = c->allowed_image_dirs;
        pol.qemu_img = c->qemu_img;
    }
    return pol;
}

std::string self_name() {
    struct passwd* pw = ::getpwuid(::getuid());
    return pw ? pw->pw_name : std::to_string(::getuid());
}

// Registry images are pulled by the nodes; here: that the registry has the
// reference (when this host has skopeo), asked as the user.
void check_registry_ref(const std::string& image, const OciSettings& os) {
    if (::access(os.skopeo.c_str(), X_OK) != 0) return;
    std::vector<std::string> a = {os.skopeo, "--insecure-policy", "inspect", "--no-tags", "--format", "{{.Digest}}"};
    for (const auto& r : os.insecure_registries)
        if (r == registry_of(image)) a.push_back("--tls-verify=false");
    a.push_back(skopeo_ref(image));
    RunOptions ro;
    ro.env = inherited_env({"PATH", "HOME", "XDG_RUNTIME_DIR", "REGISTRY_AUTH_FILE"});
    ro.timeout_ms = 60000;
    RunResult r = run(a, ro);
    if (!r.ok()) SVM_THROW("--vm-image=" + image + " cannot be found in its registry: " + skopeo_message(r.err));
}

bool has_vm_extras(const PluginOptions& opt, bool irq_option) {
    return !opt.kernel.empty() || !opt.initrd.empty() || !opt.cmdline.empty() || irq_option || !opt.save.empty() ||
           !opt.resume.empty();
}

// --vm-image=none: refused where the partition requires a VM; passed on, so
// that a partition that only defaults to a VM leaves it out.
void submit_no_vm(PluginHost& host, const PluginOptions& opt, bool irq_option, const SiteCatalogue& cat,
                  const SubmitProcess& proc) {
    if (has_vm_extras(opt, irq_option))
        SVM_THROW(
            "--vm-kernel, --vm-initrd, --vm-cmdline, --vm-irq-profile, --vm-save and --vm-resume need a "
            "--vm-image other than none");
    VmChoice c = choose_vm(cat, opt.image, submit_partitions(host, proc));
    if (!c.refusal.empty()) SVM_THROW(c.refusal);
    host.pass_to_job("SLURM_VM_IMAGE", kNoVmImage);
}

// Checks the image and boot files as the user; returns with the paths made
// absolute.
void check_vm_request(PluginOptions& opt, const std::optional<NodeConfig>& cfg, const SubmitProcess& proc) {
    SiteCatalogue cat = cfg ? cfg->site : SiteCatalogue{};
    if (!opt.irq_profile.empty()) require_irq_profile(opt.irq_profile, "--vm-irq-profile");
    std::string image_path = opt.image;
    bool registry = is_registry_ref(opt.image);
    if (registry) {
        check_registry_ref(opt.image, cfg ? cfg->oci : OciSettings{});
    } else if (opt.image.find('/') == std::string::npos) {
        // A bare name is the site catalogue's (passed on as the name: each
        // node resolves it with its own configuration), or a file here.
        std::string here = absolute(proc, opt.image);
        if (!cat.find_image(opt.image) && path_exists(here)) opt.image = here;
        VmChoice c = choose_vm(cat, opt.image, {});
        if (!c.refusal.empty()) SVM_THROW(c.refusal);
        image_path = c.image;
    } else {
        opt.image = absolute(proc, opt.image);
        image_path = opt.image;
    }
    opt.kernel = absolute(proc, opt.kernel);
    opt.initrd = absolute(proc, opt.initrd);
    if (!registry) open_image_as_self(image_path, submit_policy(cfg));
    if (!opt.kernel.empty()) check_boot_file(opt.kernel, "kernel", self_name());
    if (!opt.initrd.empty()) {
        if (opt.kernel.empty()) SVM_THROW("--vm-initrd needs --vm-kernel as well");
        check_boot_file(opt.initrd, "initrd", self_name());
    }
    require_kernel_cmdline(opt.cmdline);
    if (!opt.save.empty()) {
        opt.save = absolute(proc, opt.save);
        check_save_path_as_self(opt.save);
    }
}

// The job asks for GPUs on its command line or in sbatch's environment.
bool asks_gpus(const SubmitProcess& proc) {
    for (const auto& a : proc.args)
        if ((a.rfind("--gres", 0) == 0 && a.find("gpu") != std::string::npos) || a.rfind("--gpus", 0) == 0 ||
            a.rfind("-G", 0) == 0)
            return true;
    for (const char* n : {"SBATCH_GRES", "SBATCH_GPUS", "SBATCH_GPUS_PER_NODE", "SBATCH_GPUS_PER_TASK"}) {
        std::string v = env_entry(proc.env, n).value_or("");
        if (!v.empty() && (std::string(n) != "SBATCH_GRES" || v.find("gpu") != std::string::npos)) return true;
    }
    return false;
}

}  // namespace

std::string resumable_at_submit(const NodeConfig& cfg, const std::string& resume, const std::string& partition,
                                const SubmitProcess& proc) {
    if (cfg.checkpoint.resume_of(resume, partition) != "auto") return "";
    JobPlan p;
    p.node = "its nodes";
    for (const auto& d : cfg.shares)
        p.shares.push_back(d == "%h" ? "your home" : d == "%w" ? "the job's directory" : d);
    p.shares_via = cfg.shares_via;
    if (::access(cfg.emulator.c_str(), X_OK) == 0) p.emulator = cfg.emulator;
    // GPUs asked for, or a VF every guest of the site gets.
    if (asks_gpus(proc) || json_array_size(json_object_get(cfg.devices.get(), "vf_providers")) > 0)
        p.hostdevs.resize(1);
    std::string why = not_resumable_because(cfg.checkpoint, p);
    if (why.empty())
        return "the job is resumable: if Slurm requeues it, its VMs are saved and go on where they stopped when it "
               "runs again";
    return "the job is not resumable: " + why + "; if Slurm requeues it, its script starts again";
}

std::vector<std::string> submit_partitions(PluginHost& host, const SubmitProcess& proc) {
    std::string v = partition_from_args(proc.args);
    for (const char* name : {"SBATCH_PARTITION", "SALLOC_PARTITION", "SLURM_PARTITION"})
        if (v.empty()) v = env_entry(proc.env, name).value_or("");
    if (v.empty()) v = host.default_partition();
    return split_partitions(v);
}

void submit_request(PluginHost& host, PluginOptions& opt, const SubmitProcess& proc) {
    auto from_env = [&](std::string& slot, const char* name) {
        if (slot.empty()) slot = env_entry(proc.env, name).value_or("");
    };
    from_env(opt.image, "SLURM_VM_IMAGE");
    from_env(opt.kernel, "SLURM_VM_KERNEL");
    from_env(opt.initrd, "SLURM_VM_INITRD");
    from_env(opt.cmdline, "SLURM_VM_CMDLINE");
    from_env(opt.save, "SLURM_VM_SAVE");
    from_env(opt.resume, "SLURM_VM_RESUME");
    if (!opt.resume.empty() && opt.resume != "auto" && opt.resume != "never")
        SVM_THROW("--vm-resume=" + opt.resume + " is not a choice: use --vm-resume=auto or --vm-resume=never");
    // A profile in the environment is a preference (it may be set for every
    // job); only the option itself asks for a VM.
    bool irq_option = !opt.irq_profile.empty();
    from_env(opt.irq_profile, "SLURM_VM_IRQ_PROFILE");
    if (opt.image.empty()) {
        if (has_vm_extras(opt, irq_option))
            SVM_THROW(
                "--vm-kernel, --vm-initrd, --vm-cmdline, --vm-irq-profile, --vm-save and --vm-resume need --vm-image");
        return;
    }
    std::optional<NodeConfig> cfg = submit_config(opt.config);
    if (opt.image == kNoVmImage) return submit_no_vm(host, opt, irq_option, cfg ? cfg->site : SiteCatalogue{}, proc);
    check_vm_request(opt, cfg, proc);
    if (cfg) {
        std::vector<std::string> parts = submit_partitions(host, proc);
        std::string said = resumable_at_submit(*cfg, opt.resume, parts.empty() ? "" : parts.front(), proc);
        if (!said.empty()) host.log_info(said);
    }
    const std::pair<const char*, const std::string*> vars[] = {{"SLURM_VM_IMAGE", &opt.image},
                                                               {"SLURM_VM_KERNEL", &opt.kernel},
                                                               {"SLURM_VM_INITRD", &opt.initrd},
                                                               {"SLURM_VM_CMDLINE", &opt.cmdline},
                                                               {"SLURM_VM_IRQ_PROFILE", &opt.irq_profile},
                                                               {"SLURM_VM_SAVE", &opt.save},
                                                               {"SLURM_VM_RESUME", &opt.resume}};
    for (const auto& [name, value] : vars)
        if (!value->empty()) host.pass_to_job(name, *value);
}

std::optional<FoundPlan> find_plan(PluginHost& host, const std::string& config, uint32_t job, uint32_t node_id) {
    std::vector<std::pair<std::string, std::string>> candidates;  // node, dir
    try {
        NodeConfig c = load_config(config, "%n");
        auto pos = c.state_dir.find("%n");
        if (pos == std::string::npos) {
            candidates.emplace_back("", c.job_dir(job));
        } else {
            for (const auto& n : list_dir(c.state_dir.substr(0, pos)))
                candidates.emplace_back(n, load_config(config, n).job_dir(job));
        }
    } catch (const Error& e) {
        host.log_error(e.chain());
        return std::nullopt;
    }
    for (const auto& [n, dir] : candidates) {
        std::string text;
        try {
            if (!read_file_if_exists(path_join(dir, "plan.json"), text)) continue;
            JobPlan p = JobPlan::from_json(text, dir);
            if (p.job_id != job || static_cast<uint32_t>(p.node_index) != node_id) continue;
            return FoundPlan{p, p.node};
        } catch (const Error&) {
            continue;
        }
    }
    return std::nullopt;
}

void start_keeper_for(PluginHost& host, const std::string& config, const TaskIds& ids, pid_t stepd) {
    std::optional<FoundPlan> f = find_plan(host, config, ids.job, ids.node_id);
    if (!f) return;  // not a VM job
    std::string libexec = NodeConfig{}.libexec_dir;
    try {
        libexec = load_config(config, f->node).libexec_dir;
    } catch (const Error&) {
    }
    spawn_detached({path_join(libexec, "slurm-vm-keeper"), "--config", config, "--node", f->node, "--job",
                    std::to_string(ids.job), "--join-cgroup-of", std::to_string(stepd)},
                   path_join(f->plan.dir, "keeper.log"));
    host.log_info("job " + std::to_string(ids.job) + ": keeper started on " + f->node);
}

void open_console_for(PluginHost& host, const PluginOptions& opt, const TaskIds& ids) {
    host.unset_task_env("SLURM_VM_CONSOLE_FD");
    if (!opt.console || ids.extern_step || ids.batch_step) return;
    std::string job = std::to_string(ids.job);
    std::optional<FoundPlan> f = find_plan(host, opt.config, ids.job, ids.node_id);
    if (!f) SVM_THROW("job " + job + " runs no guest on this node: there is no console to show");
    if (!console_allowed(ids.uid, f->plan.uid))
        SVM_THROW("job " + job + ": the console of its guest is for its owner and root only");
    int fd = ::open(f->plan.console_log().c_str(), O_RDONLY | O_NOFOLLOW);
    if (fd < 0) SVM_THROW_ERRNO("job " + job + ": open " + f->plan.console_log());
    host.set_task_env("SLURM_VM_CONSOLE_FD", std::to_string(fd));
}

namespace {

// Whether the job asked for a guest: its option, or a partition that requires one.
bool asked_for_vm(PluginHost& host, const PluginOptions& opt) {
    std::string image = host.requested_image();
    if (!image.empty() && image != kNoVmImage) return true;
    std::optional<std::string> part = host.task_env("SLURM_JOB_PARTITION");
    if (!part) return false;
    try {
        NodeConfig c = load_config(opt.config, "%n");  // outlives pp, which points into it
        const PartitionPolicy* pp = c.site.find_partition(*part);
        return pp && pp->mode == VmMode::required;
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace

void route_task(PluginHost& host, const PluginOptions& opt, const TaskIds& ids) {
    if (ids.extern_step) return;
    std::optional<FoundPlan> f = find_plan(host, opt.config, ids.job, ids.node_id);
    if (!f) {
        if (asked_for_vm(host, opt))
            SVM_THROW("job " + std::to_string(ids.job) +
                      ": no guest was prepared on this node; the task does not run on the host (check the "
                      "node's Prolog and PrologFlags=Alloc,Contain)");
        return;
    }
    NodeConfig c = load_config(opt.config, f->node);
    for (const auto& name : host.task_env_names())
        if (host_unsafe_variable(name)) host.unset_task_env(name);
    host.set_task_env("SLURM_VM_PLAN", f->plan.plan_file());
    // (Unset for steps: an srun in the batch script passes the batch's on.)
    if (ids.batch_step) host.set_task_env("SLURM_VM_BATCH", "1");
    else host.unset_task_env("SLURM_VM_BATCH");
    host.wrap_task(path_join(c.libexec_dir, "slurm-vm-exec"));
    // Before Slurm runs a --task-prolog (as the user, on the host) and the
    // task's command.
    host.restrict_exec(host_exec_allowed(host, c));
}

std::vector<std::string> host_exec_allowed(PluginHost& host, const NodeConfig& c) {
    std::vector<std::string> programs = {path_join(c.libexec_dir, "slurm-vm-exec"), "/bin/sh",
                                         find_in_path("ssh", kTrustedPath), find_in_path("srun", kTrustedPath)};
    std::vector<std::string> out = {c.libexec_dir, "/bin/sh"};
    for (const auto& p : programs) {
        if (!p.empty()) out.push_back(p);
        std::string interp = elf_interpreter(p);
        if (!interp.empty()) out.push_back(interp);
    }
    for (const auto& script : host.site_task_scripts()) {
        out.push_back(script);
        std::string interp = elf_interpreter(script);
        if (!interp.empty()) out.push_back(interp);
        for (const auto& i : script_interpreters(script, kTrustedPath)) {
            out.push_back(i);
            std::string ii = elf_interpreter(i);
            if (!ii.empty()) out.push_back(ii);
        }
    }
    return out;
}

void guard_step(PluginHost& host, const PluginOptions& opt, const TaskIds& ids) {
    static bool done = false;  // one slurmstepd, one step
    if (ids.extern_step || done) return;
    std::optional<FoundPlan> f = find_plan(host, opt.config, ids.job, ids.node_id);
    if (!f) return;
    done = true;
    host.restrict_exec(host_exec_allowed(host, load_config(opt.config, f->node)));
}

}  // namespace svm
