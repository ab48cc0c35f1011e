// slurm-vm-epilog: Slurm's Epilog on every node of a job. Undoes everything
// the ledger of the job holds on this node (guest, leases, files, devices).
// Idempotent: fine twice, fine without a prolog, fine after a crash.
#include <syslog.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "config.hpp"
#include "error.hpp"
#include "vm_job.hpp"

extern char** environ;

int main(int argc, char** argv) {
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!std::strcmp(argv[i], "--help")) {
            std::printf("usage: slurm-vm-epilog [--config FILE]\nRun by slurmd as the Epilog. Default configuration: %s/slurm-vm.json\n",
                        SVM_SYSCONFDIR);
            return 0;
        } else {
            std::fprintf(stderr, "usage: slurm-vm-epilog [--config FILE]\n");
            return 2;
        }
    }
    openlog("slurm-vm-epilog", LOG_PID, LOG_DAEMON);
    uint32_t job = 0;
    try {
        const char* id = getenv("SLURM_JOB_ID");
        const char* node = getenv("SLURMD_NODENAME");
        if (!id || !node) {
            std::fprintf(stderr, "slurm-vm-epilog: SLURM_JOB_ID and SLURMD_NODENAME must be set\n");
            return 2;
        }
        job = static_cast<uint32_t>(std::stoul(id));
        svm::NodeConfig cfg = svm::load_config(config, node);
        auto failures = svm::teardown_job(cfg, job);
        if (failures.empty()) return 0;
        for (const auto& f : failures) {
            syslog(LOG_ERR, "job %u: %s", job, f.c_str());
            std::fprintf(stderr, "slurm-vm: job %u: %s\n", job, f.c_str());
        }
        return 1;
    } catch (const std::exception& e) {
        syslog(LOG_ERR, "job %u: %s", job, e.what());
        std::fprintf(stderr, "slurm-vm: job %u: %s\n", job, e.what());
        return 1;
    }
}
