// slurm-vm console JOBID [NODE]: the serial console of a job's guest. Root on
// the node reads it directly; anyone else asks Slurm for a step of the job
// (only the job's user and root get one), in which the plugin hands the
// console to the task (lib/guest/guest_console.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "config.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_console.hpp"
#include "job_plan.hpp"

namespace svm::admin {

namespace {
const char* kConsoleUsage =
    "usage: slurm-vm console [--config FILE] JOBID [NODE]\n"
    "Shows the serial console of the guest of job JOBID on NODE (default: the job's\n"
    "first node). For root and the job's owner: root on the node reads it there;\n"
    "everyone else gets it through a step of the job (srun --jobid=JOBID --overlap).\n";

// Root, with the job's guest on this host: the console log's path, "" if none.
std::string local_console(const std::string& config, uint32_t job, const std::string& node) {
    if (!path_exists(config)) return "";
    NodeConfig c = load_config(config, "%n");
    std::vector<std::string> nodes;
    auto pos = c.state_dir.find("%n");
    if (!node.empty()) nodes.push_back(node);
    else if (pos != std::string::npos) nodes = list_dir(c.state_dir.substr(0, pos));
    else nodes.push_back("");
    for (const auto& n : nodes) {
        NodeConfig cn = load_config(config, n);
        std::string plan_file = path_join(cn.job_dir(job), "plan.json");
        if (!path_exists(plan_file)) continue;
        JobPlan p = load_plan(plan_file);
        if (p.job_id != job || (node.empty() && p.node_index != 0)) continue;
        return p.console_log();
    }
    return "";
}
}  // namespace

int cmd_console(const Args& args) {
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
    std::vector<std::string> pos;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--config" && i + 1 < args.size()) config = args[++i];
        else if (args[i] == "--help" || args[i] == "-h") {
            std::fputs(kConsoleUsage, stdout);
            return 0;
        } else if (!args[i].empty() && args[i][0] == '-') {
            SVM_THROW("unknown option " + args[i] + "\n" + kConsoleUsage);
        } else {
            pos.push_back(args[i]);
        }
    }
    if (pos.empty() || pos.size() > 2) {
        std::fputs(kConsoleUsage, stderr);
        return 2;
    }
    uint32_t job = parse_job_id(pos[0]);
    std::string node = pos.size() > 1 ? pos[1] : "";
    if (::geteuid() == 0) {
        std::string log = local_console(config, job, node);
        if (!log.empty()) {
            UniqueFd fd(::open(log.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
            if (!fd) SVM_THROW_ERRNO("open " + log);
            std::string text = read_console(fd.get());
            std::fwrite(text.data(), 1, text.size(), stdout);
            return 0;
        }
    }
    std::vector<std::string> a = console_srun_argv(job, node);
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    std::fflush(stdout);
    ::execvp("srun", argv.data());
    SVM_THROW_ERRNO("run srun");
}

}  // namespace svm::admin
