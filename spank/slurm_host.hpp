// The plugin's shim, shared by its files: the options Slurm hands over, the
// Slurm side of svm::PluginHost, and the handlers of each context. The logic
// is in lib/job/plugin.hpp.
#pragma once
extern "C" {
#include <slurm/spank.h>
}

#include <string>

#include "plugin.hpp"

namespace svm::spank {

// The plugin's options (plugstack.conf arguments and the job's --vm-* options).
PluginOptions& options();

// svm::PluginHost over one call's spank_t.
class SlurmHost final : public PluginHost {
public:
    explicit SlurmHost(spank_t sp) : sp_(sp) {}
    std::string default_partition() override;
    void pass_to_job(const std::string& name, const std::string& value) override;
    std::optional<std::string> task_env(const std::string& name) override;
    void set_task_env(const std::string& name, const std::string& value) override;
    void unset_task_env(const std::string& name) override;
    std::vector<std::string> task_env_names() override;
    void wrap_task(const std::string& exec) override;
    std::vector<std::string> site_task_scripts() override;
    void restrict_exec(const std::vector<std::string>& allowed) override;
    std::string requested_image() override;
    void log_info(const std::string& msg) override;
    void log_error(const std::string& msg) override;

    // The step this slurmstepd serves; false when Slurm does not say.
    bool task_ids(TaskIds& ids);

private:
    spank_t sp_;
};

// The --vm-image entry of the option table (remote side: spank_option_getopt).
struct spank_option* image_option();

// Context handlers: 0 or -1, as Slurm expects; they may throw (the entry
// points catch and log).
int on_submit(spank_t sp);           // local, allocator
int on_task_post_fork(spank_t sp);   // remote, after fork: extern step, other steps
int on_task_privileged(spank_t sp);  // remote, every task, still root
int on_task(spank_t sp);             // remote, every task, as the user

}  // namespace svm::spank
