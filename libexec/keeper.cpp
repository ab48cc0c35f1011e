// slurm-vm-keeper: started by the plugin in the job's extern step on each
// node; runs the job's guest (see lib/keeper.hpp) and publishes what the VM
// was into the job's AdminComment, for sacct.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "keeper.hpp"
#include "proc.hpp"

namespace {

// The job's AdminComment as JSON (an empty object when unset or not ours).
svm::Json read_admin_comment(uint32_t job) {
    svm::RunOptions o;
    o.env = svm::inherited_env({"PATH", "SLURM_CONF"});
    o.timeout_ms = 20000;
    svm::RunResult r = svm::run({"scontrol", "show", "job", std::to_string(job)}, o);
    std::string value;
    size_t pos = r.out.find("\n   AdminComment=");
    if (pos != std::string::npos) {
        size_t b = pos + 17, e = r.out.find('\n', b);
        value = svm::trim(r.out.substr(b, e == std::string::npos ? std::string::npos : e - b));
    }
    json_error_t err;
    json_t* j = value.empty() ? nullptr : json_loads(value.c_str(), 0, &err);
    if (!j || !json_is_object(j)) {
        if (j) json_decref(j);
        j = json_object();
    }
    return svm::Json(j);
}

// Merges this node's record into {"slurm_vm": {"v": 1, "nodes": {NODE: {...}}}}
// and writes it back; re-checks after a random pause because the job's other
// nodes do the same at about the same time (last writer wins in Slurm).
void publish(const svm::JobPlan& p, const std::string& record) {
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    for (int attempt = 0; attempt < 8; ++attempt) {
        svm::Json root = read_admin_comment(p.job_id);
        json_t* vm = json_object_get(root.get(), "slurm_vm");
        if (!json_is_object(vm)) {
            vm = json_object();
            json_object_set_new(root.get(), "slurm_vm", vm);
        }
        json_object_set_new(vm, "v", json_integer(1));
        json_t* nodes = json_object_get(vm, "nodes");
        if (!json_is_object(nodes)) {
            nodes = json_object();
            json_object_set_new(vm, "nodes", nodes);
        }
        json_error_t err;
        json_t* rec = json_loads(record.c_str(), 0, &err);
        if (!rec) return;
        json_t* have = json_object_get(nodes, p.node.c_str());
        if (have && json_equal(have, rec)) {
            json_decref(rec);
            if (attempt >= 2) return;  // seen twice after settling
        } else {
            json_object_set_new(nodes, p.node.c_str(), rec);
            svm::RunOptions o;
            o.env = svm::inherited_env({"PATH", "SLURM_CONF"});
            o.timeout_ms = 20000;
            svm::RunResult w = svm::run({"scontrol", "update", "jobid=" + std::to_string(p.job_id),
                                         "AdminComment=" + svm::json_dump(root.get())},
                                        o);
            if (!w.ok())
                std::fprintf(stderr, "slurm-vm-keeper job %u: AdminComment not updated (exit %d): %s\n", p.job_id,
                             w.status, svm::trim(w.err + w.out).c_str());
            else
                std::fprintf(stderr, "slurm-vm-keeper job %u: VM record published in AdminComment\n", p.job_id);
            std::fflush(stderr);
        }
        ::usleep(300000 + rng() % 1200000);
    }
}

}  // namespace

int main(int argc, char** argv) {
    svm::KeeperOptions o;
    bool publish_record = true;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "slurm-vm-keeper: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--config") o.config_path = next();
        else if (a == "--node") o.node = next();
        else if (a == "--job") o.job_id = static_cast<uint32_t>(std::stoul(next()));
        else if (a == "--join-cgroup-of") o.join_cgroup_of = static_cast<pid_t>(std::stol(next()));
        else if (a == "--no-accounting") publish_record = false;
        else if (a == "--help") {
            std::printf("usage: slurm-vm-keeper --config FILE --node NAME --job ID [--join-cgroup-of PID] [--no-accounting]\n"
                        "Started by the slurm-vm SPANK plugin in the job's extern step; not meant to be run by hand.\n"
                        "Runs the job's guest on this node, relays SSH to it, and records the VM in the job's\n"
                        "AdminComment ({\"slurm_vm\":{\"v\":1,\"nodes\":{NODE:{...}}}}) unless --no-accounting.\n");
            return 0;
        } else {
            std::fprintf(stderr, "slurm-vm-keeper: unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    if (o.config_path.empty() || o.node.empty() || !o.job_id) {
        std::fprintf(stderr, "slurm-vm-keeper: --config, --node and --job are required\n");
        return 2;
    }
    if (publish_record) o.on_ready = publish;
    try {
        return svm::run_keeper(o);
    } catch (const svm::Error& e) {
        std::fprintf(stderr, "slurm-vm-keeper job %u: %s", o.job_id, e.trace().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "slurm-vm-keeper job %u: %s\n", o.job_id, e.what());
        return 1;
    }
}
