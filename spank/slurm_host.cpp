// svm::PluginHost over spank_t: the only file that asks Slurm for anything.
#include <dlfcn.h>

#include <cstring>

extern "C" {
#include <slurm/slurm.h>
}

#include "error.hpp"
#include "exec_guard.hpp"
#include "slurm_host.hpp"

namespace svm::spank {

std::string SlurmHost::default_partition() {
    std::string name;
    partition_info_msg_t* msg = nullptr;
    if (slurm_load_partitions(0, &msg, SHOW_ALL) == SLURM_SUCCESS && msg) {
        for (uint32_t i = 0; i < msg->record_count; ++i)
            if ((msg->partition_array[i].flags & PART_FLAG_DEFAULT) && msg->partition_array[i].name)
                name = msg->partition_array[i].name;
        slurm_free_partition_info_msg(msg);
    }
    return name;
}

void SlurmHost::pass_to_job(const std::string& name, const std::string& value) {
    if (spank_job_control_setenv(sp_, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS)
        SVM_THROW("cannot pass " + name + " to the job");
}

std::optional<std::string> SlurmHost::task_env(const std::string& name) {
    char buf[4096] = "";
    if (spank_getenv(sp_, name.c_str(), buf, sizeof buf) != ESPANK_SUCCESS) return std::nullopt;
    return std::string(buf);
}

void SlurmHost::set_task_env(const std::string& name, const std::string& value) {
    if (spank_setenv(sp_, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS)
        SVM_THROW("cannot set " + name + " in the task's environment");
}

void SlurmHost::unset_task_env(const std::string& name) { spank_unsetenv(sp_, name.c_str()); }

std::vector<std::string> SlurmHost::task_env_names() {
    std::vector<std::string> names;
    char** env = nullptr;
    if (spank_get_item(sp_, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) return names;
    for (char** e = env; *e; ++e) {
        std::string v(*e);
        names.push_back(v.substr(0, v.find('=')));
    }
    return names;
}

void SlurmHost::wrap_task(const std::string& exec) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
    // Slurm 23.11+: the clean interface, argv becomes [slurm-vm-exec, cmd...].
    const char* pre[] = {exec.c_str()};
    set_task_env("SLURM_VM_PREPENDED", "1");
    if (spank_prepend_task_argv(sp_, 1, pre) != ESPANK_SUCCESS) SVM_THROW("cannot prepend slurm-vm-exec to the task");
#else
    // Slurm 22.05: this runs in the forked task just before exec; argv is
    // this process's copy. argv[0] becomes slurm-vm-exec, the original
    // travels in SLURM_VM_ARGV0 (the string lives until exec).
    int argc = 0;
    char** argv = nullptr;
    if (spank_get_item(sp_, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv)
        SVM_THROW("cannot read the task's command");
    set_task_env("SLURM_VM_ARGV0", argv[0]);
    argv[0] = strdup(exec.c_str());
#endif
}

std::vector<std::string> SlurmHost::site_task_scripts() {
    // slurmstepd's own configuration (libslurm's slurm_conf, not in Slurm's
    // public headers: looked up, so that a process without it loads us still).
    std::vector<std::string> out;
    auto* conf = static_cast<const slurm_conf_t*>(::dlsym(RTLD_DEFAULT, "slurm_conf"));
    if (!conf) return out;
    for (const char* s : {conf->task_prolog, conf->task_epilog})
        if (s && *s) out.emplace_back(s);
    return out;
}

void SlurmHost::restrict_exec(const std::vector<std::string>& allowed) {
    std::string why = allow_exec_only(allowed);
    if (!why.empty())
        log_error("the host side of this VM job's step may execute any program (" + why +
                  "): a --task-prolog or --task-epilog given with srun would run on the host");
}

std::string SlurmHost::requested_image() {
    char* val = nullptr;
    if (spank_option_getopt(sp_, image_option(), &val) != ESPANK_SUCCESS || !val) return "";
    return val;
}

void SlurmHost::log_info(const std::string& msg) { slurm_info("slurm-vm: %s", msg.c_str()); }

void SlurmHost::log_error(const std::string& msg) { slurm_error("slurm-vm: %s", msg.c_str()); }

bool SlurmHost::task_ids(TaskIds& ids) {
    uint32_t step = 0;
    if (spank_get_item(sp_, S_JOB_ID, &ids.job) != ESPANK_SUCCESS ||
        spank_get_item(sp_, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
        spank_get_item(sp_, S_JOB_NODEID, &ids.node_id) != ESPANK_SUCCESS ||
        spank_get_item(sp_, S_JOB_UID, &ids.uid) != ESPANK_SUCCESS)
        return false;
    ids.extern_step = step == SLURM_EXTERN_CONT;
    ids.batch_step = step == SLURM_BATCH_SCRIPT;
    return true;
}

}  // namespace svm::spank
