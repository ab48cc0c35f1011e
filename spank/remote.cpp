// The remote context (slurmstepd on each node of the job).
#include <unistd.h>

#include <cstdio>

#include "error.hpp"
#include "slurm_host.hpp"

namespace svm::spank {

int on_task_post_fork(spank_t sp) {
    SlurmHost host(sp);
    TaskIds ids;
    if (!host.task_ids(ids)) return 0;
    if (ids.extern_step) start_keeper_for(host, options().config, ids, ::getpid());
    else guard_step(host, options(), ids);
    return 0;
}

int on_task_privileged(spank_t sp) {
    SlurmHost host(sp);
    TaskIds ids;
    if (!host.task_ids(ids)) {
        if (!options().console) return 0;
        host.log_error("cannot tell which job's console to show");
        return -1;
    }
    open_console_for(host, options(), ids);
    return 0;
}

int on_task(spank_t sp) {
    SlurmHost host(sp);
    TaskIds ids;
    if (!host.task_ids(ids)) return 0;
    try {
        route_task(host, options(), ids);
    } catch (const Error& e) {
        // This is the task, before its command: its stderr is the job's
        // output, where the user reads why (the node's log has it too).
        std::fprintf(stderr, "slurm-vm: %s\n", e.reason().c_str());
        throw;
    }
    return 0;
}

}  // namespace svm::spank
