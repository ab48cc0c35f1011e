// The remote context (slurmstepd on each node of the job).
#include <unistd.h>

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
    route_task(host, options(), ids);
    return 0;
}

}  // namespace svm::spank
