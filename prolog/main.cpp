// slurm-vm-prolog: Slurm's Prolog (PrologFlags=Alloc,Contain) on every node
// of a job. Prepares the job's guest; see lib/job/vm_job.hpp.
//
// Exit status: 0 for plain jobs, prepared VM jobs, and VM jobs refused for a
// user-side reason (the job then fails with that reason, also published in
// its AdminComment; the node stays up). Non-zero only for node-side failures,
// which Slurm answers by draining the node: the reason printed names the cause.
//
// Logs: syslog, stderr, and the job's file under log_dir (lib/base/log.hpp).
#include <cstdio>
#include <cstring>
#include <string>

#include "config.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "job_record.hpp"
#include "log.hpp"
#include "node_drain.hpp"
#include "site_catalogue.hpp"
#include "vm_job.hpp"

extern char** environ;

static void usage() {
    std::printf(
        "usage: slurm-vm-prolog [--config FILE]\n"
        "Run by slurmd as the Prolog with the job's environment (SLURM_JOB_ID, SLURM_JOB_UID,\n"
        "SLURMD_NODENAME, SPANK_SLURM_VM_IMAGE, ...). Default configuration: %s/slurm-vm.json\n",
        SVM_SYSCONFDIR);
}

// A node-side failure: the node is drained with a reason that names the
// cause (Slurm's own would be "Prolog error"), and the prolog fails so that
// Slurm requeues or fails the job by its own rules.
static void node_side_failure(const svm::log::Setup& ls, const std::string& why) {
    if (ls.node.empty()) return;
    std::string err;
    if (!svm::drain_node(ls.node, svm::drain_reason(ls.job_id, {why}), err)) svm::log::error(err);
}

static int run(const std::string& config) {
    svm::log::Setup ls;
    ls.program = "slurm-vm-prolog";
    ls.syslog = true;
    ls.stderr_prefix = "slurm-vm: ";
    svm::log::init(ls);
    try {
        svm::JobRequest req = svm::job_request_from_env(environ);
        ls.job_id = req.job_id;
        ls.node = req.node;
        svm::log::init(ls);
        if (req.image.empty() && !svm::path_exists(config)) return 0;
        svm::NodeConfig cfg = svm::load_config(config, req.node);
        svm::set_job_info_program(svm::path_join(cfg.libexec_dir, "slurm-vm-job-info"));
        // A job without --vm-image is a VM job only where its partition says
        // so (the site's "partitions"); --vm-image=none asks for the host,
        // which a partition that requires VMs refuses (prepare_job says so).
        svm::VmChoice choice = svm::choose_vm(cfg.site, req.image, {req.partition});
        if (!choice.vm && choice.refusal.empty()) return 0;
        svm::log::add_job_file(cfg.log_dir);
        svm::PrologResult r = svm::prepare_job(cfg, req);
        if (r.status == svm::PrologStatus::not_a_vm_job) return 0;
        if (r.status == svm::PrologStatus::refused) {
            svm::log::info("refused: " + r.reason);
            svm::publish_node_record(req.job_id, req.node, svm::error_record(r.reason),
                                     svm::PublishOptions::for_error());
        } else {
            svm::log::info("guest prepared on " + req.node);
        }
        return 0;
    } catch (const svm::Error& e) {
        svm::log::error(e);
        node_side_failure(ls, e.chain());
        return 1;
    } catch (const std::exception& e) {
        svm::log::error(e.what());
        node_side_failure(ls, e.what());
        return 1;
    }
}

int main(int argc, char** argv) {
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!std::strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    int rc = run(config);
    svm::log::shutdown();
    return rc;
}
