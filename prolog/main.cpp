// slurm-vm-prolog: Slurm's Prolog (PrologFlags=Alloc,Contain) on every node
// of a job. Prepares the job's guest; see lib/vm_job.hpp.
//
// Exit status: 0 for plain jobs, prepared VM jobs, and VM jobs refused for a
// user-side reason (the job then fails with that reason; the node stays up).
// Non-zero only for node-side failures, which Slurm answers by draining the
// node: the reason printed names the cause.
#include <syslog.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "config.hpp"
#include "error.hpp"
#include "vm_job.hpp"

extern char** environ;

static void usage() {
    std::printf(
        "usage: slurm-vm-prolog [--config FILE]\n"
        "Run by slurmd as the Prolog with the job's environment (SLURM_JOB_ID, SLURM_JOB_UID,\n"
        "SLURMD_NODENAME, SPANK_SLURM_VM_IMAGE, ...). Default configuration: %s/slurm-vm.json\n",
        SVM_SYSCONFDIR);
}

int main(int argc, char** argv) {
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!std::strcmp(argv[i], "--help")) { usage(); return 0; }
        else { usage(); return 2; }
    }
    openlog("slurm-vm-prolog", LOG_PID, LOG_DAEMON);
    svm::JobRequest req;
    try {
        req = svm::job_request_from_env(environ);
        if (req.image.empty()) return 0;
        svm::NodeConfig cfg = svm::load_config(config, req.node);
        svm::PrologResult r = svm::prepare_job(cfg, req);
        if (r.status == svm::PrologStatus::refused) {
            syslog(LOG_NOTICE, "job %u: refused: %s", req.job_id, r.reason.c_str());
            std::fprintf(stderr, "slurm-vm: job %u: %s\n", req.job_id, r.reason.c_str());
        } else {
            syslog(LOG_INFO, "job %u: guest prepared on %s", req.job_id, req.node.c_str());
        }
        return 0;
    } catch (const svm::Error& e) {
        syslog(LOG_ERR, "job %u: %s", req.job_id, e.chain().c_str());
        std::fprintf(stderr, "slurm-vm: job %u: %s\n%s", req.job_id, e.chain().c_str(), e.trace().c_str());
        return 1;
    } catch (const std::exception& e) {
        syslog(LOG_ERR, "job %u: %s", req.job_id, e.what());
        std::fprintf(stderr, "slurm-vm: job %u: %s\n", req.job_id, e.what());
        return 1;
    }
}
