// slurm-vm-epilog: Slurm's Epilog on every node of a job. Undoes everything
// the ledger of the job holds on this node (guest, leases, files, devices).
// Idempotent: fine twice, fine without a prolog, fine after a crash. What
// cannot be undone drains the node with a reason that names it.
//
// Before that, for a job whose guest failed: the reason goes into the job's
// AdminComment if the keeper could not put it there, and the guest's console
// into the job's log file for admins if the keeper could not copy it.
// Logs: syslog, stderr, and the job's file under log_dir (lib/base/log.hpp); a
// plain job leaves no file.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "checkpoint.hpp"
#include "config.hpp"
#include "doctor.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "job_record.hpp"
#include "log.hpp"
#include "node_drain.hpp"
#include "proc.hpp"
#include "vm_job.hpp"
#include "vm_save.hpp"

namespace {

// The reason of a failed guest from the job's state file, "" if it did not fail.
std::string failure_of(const std::string& state) { return svm::GuestState::parse(state).failure(); }

void keep_what_failed(const svm::NodeConfig& cfg, uint32_t job) {
    std::string dir = cfg.job_dir(job), state;
    try {
        if (!svm::read_file_if_exists(svm::path_join(dir, "state"), state)) return;
    } catch (const svm::Error&) {
        return;
    }
    std::string why = failure_of(state);
    if (why.empty()) return;
    svm::PublishOptions po;
    po.attempts = 2;
    po.settled = 0;
    po.pause_min_ms = 100;
    po.pause_max_ms = 300;
    svm::publish_node_record(job, cfg.node_name, svm::error_record(why), po);
    std::string console = svm::path_join(dir, "console.log");
    if (svm::path_exists(console) &&
        !svm::path_exists(svm::path_join(cfg.job_log_dir(), svm::log::job_console_name(job)))) {
        try {
            std::string kept = svm::log::keep_console(console, cfg.log_dir, cfg.node_name, job);
            if (!kept.empty()) svm::log::info("the guest's console log is kept in " + kept);
        } catch (const svm::Error& e) {
            svm::log::warn("the guest's console log was not kept: " + e.chain());
        }
    }
}

// Slurm's PrologEpilogTimeout in seconds; 0 when Slurm cannot tell (the
// node's save_timeout_s alone bounds the save then).
int prolog_epilog_timeout_s() {
    svm::RunOptions o;
    o.timeout_ms = 10000;
    o.env = svm::inherited_env({"PATH", "SLURM_CONF"});
    svm::RunResult r = svm::run({"scontrol", "show", "config"}, o);
    if (!r.ok()) return 0;
    std::string v = svm::slurm_config_value(r.out, "PrologEpilogTimeout");
    size_t digits = v.find_first_not_of("0123456789");
    v = v.substr(0, digits);
    return v.empty() || v.size() > 9 ? 0 : std::stoi(v);
}

// --vm-save: the head guest's disk becomes the user's new image, before the
// teardown removes the overlay, within save_timeout_s and Slurm's epilog
// time. A failure is the user's (a path they cannot write any more, a full
// disk, an image replaced, a save too slow): logged, and told to the user in
// slurm-<jobid>.vm-save.txt in the job's directory (the job's record no longer
// takes updates once the job ended); never a reason to drain the node.
void save_if_asked(const svm::NodeConfig& cfg, const svm::JobPlan& p, uint32_t job) {
    if (p.save_path.empty() || p.job_id != job) return;
    try {
        int bound = svm::save_bound_s(cfg.save_timeout_s, prolog_epilog_timeout_s());
        svm::save_guest_disk(p, cfg.qemu_img, bound);
    } catch (const svm::Error& e) {
        svm::log::warn(e.chain());
        try {
            svm::write_save_note(p, e.reason());
        } catch (const svm::Error& n) {
            svm::log::warn(n.chain());
        }
    }
}

// The job's plan on this node; nullopt for none or one that cannot be read.
std::optional<svm::JobPlan> plan_of(const svm::NodeConfig& cfg, uint32_t job) {
    std::string plan_file = svm::path_join(cfg.job_dir(job), "plan.json");
    if (!svm::path_exists(plan_file)) return std::nullopt;
    try {
        svm::JobPlan p = svm::load_plan(plan_file);
        if (p.job_id == job) return p;
    } catch (const svm::Error&) {
    }
    return std::nullopt;
}

// --vm-resume=auto (checkpoint.hpp): Slurm requeued the job (asked of
// slurmctld, not of anything the job wrote): its guest is saved; it ended
// for good: its checkpoint goes. Slurm cannot be asked: neither. True when
// the guest was saved (the job has not ended: no --vm-save).
bool checkpoint_if_requeued(const svm::NodeConfig& cfg, const svm::JobPlan& p) {
    if (p.checkpoint_dir.empty()) return false;
    std::string why;
    std::optional<svm::JobStatus> st = svm::read_job_status(p.job_id, 10000, why);
    if (!st) {
        svm::log::warn("the job's checkpoint is left as it is: Slurm cannot tell whether it requeued the job: " + why);
        return false;
    }
    std::string said = svm::checkpoint_at_end(cfg, p, st->requeued(),
                                              svm::save_bound_s(cfg.checkpoint.timeout_s, prolog_epilog_timeout_s()));
    if (!said.empty()) svm::log::info(said);
    return st->requeued();
}

int run(const std::string& config) {
    svm::log::Setup ls;
    ls.program = "slurm-vm-epilog";
    ls.syslog = true;
    ls.stderr_prefix = "slurm-vm: ";
    const char* id = getenv("SLURM_JOB_ID");
    const char* node = getenv("SLURMD_NODENAME");
    if (!id || !node) {
        std::fprintf(stderr, "slurm-vm-epilog: SLURM_JOB_ID and SLURMD_NODENAME must be set\n");
        return 2;
    }
    svm::log::init(ls);
    uint32_t job = 0;
    try {
        job = static_cast<uint32_t>(std::stoul(id));
        ls.job_id = job;
        ls.node = node;
        svm::log::init(ls);
        svm::NodeConfig cfg = svm::load_config(config, node);
        svm::set_job_info_program(svm::path_join(cfg.libexec_dir, "slurm-vm-job-info"));
        // Only a VM job (state here) gets a log file.
        bool vm_job = svm::path_exists(cfg.job_dir(job)) || svm::path_exists(cfg.ledger_path(job));
        if (vm_job) {
            svm::log::add_job_file(cfg.log_dir);
            svm::log::debug("epilog started");
            keep_what_failed(cfg, job);
            std::optional<svm::JobPlan> p = plan_of(cfg, job);
            if (p && !checkpoint_if_requeued(cfg, *p)) save_if_asked(cfg, *p, job);
        }
        // 26.05's cgroup v2 names the job's directory by its SLUID
        // (remove_job_cgroups ignores one not shaped as such).
        const char* sluid = getenv("SLURM_JOB_SLUID");
        auto failures = svm::teardown_job(cfg, {job, sluid ? sluid : ""});
        if (failures.empty()) {
            if (vm_job) svm::log::info("everything of the job on " + std::string(node) + " undone");
            return 0;
        }
        for (const auto& f : failures) svm::log::error(f);
        // What could not be undone stays as it is (a device left on vfio-pci
        // is out of every job's and the host's reach: quarantined) and stays
        // in the ledger for `slurm-vm sweep`. The node is drained with a
        // reason naming the cause; Slurm's own would only say "Epilog error",
        // so the epilog fails only if the drain itself did not work.
        std::string reason = svm::drain_reason(job, failures), err;
        if (svm::drain_node(node, reason, err)) {
            svm::log::error("node " + std::string(node) + " drained: " + reason +
                            "; once the cause is fixed: slurm-vm sweep, then scontrol update nodename=" + node +
                            " state=resume");
            return 0;
        }
        svm::log::error(err);
        return 1;
    } catch (const std::exception& e) {
        svm::log::error(e.what());
        return 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!std::strcmp(argv[i], "--help")) {
            std::printf(
                "usage: slurm-vm-epilog [--config FILE]\nRun by slurmd as the Epilog. Default configuration: "
                "%s/slurm-vm.json\n",
                SVM_SYSCONFDIR);
            return 0;
        } else {
            std::fprintf(stderr, "usage: slurm-vm-epilog [--config FILE]\n");
            return 2;
        }
    }
    int rc = run(config);
    svm::log::shutdown();
    return rc;
}
