// slurm-vm status and slurm-vm sweep.
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "dev_acl.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "job_plan.hpp"
#include "ledger.hpp"
#include "log.hpp"
#include "oci_image.hpp"
#include "proc.hpp"
#include "squeue_ids.hpp"
#include "vm_job.hpp"

namespace svm::admin {

namespace {

struct NodeArgs {
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
    std::vector<std::string> nodes;
    bool json = false;
    bool dry_run = false;
    bool force = false;
};

std::string short_hostname() {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    std::string s = h;
    return s.substr(0, s.find('.'));
}

// Node names: --node, or every node directory when state_dir holds %n, or
// this host's name.
std::vector<std::string> node_names(const NodeArgs& a) {
    if (!a.nodes.empty()) return a.nodes;
    NodeConfig c = load_config(a.config, "%n");
    auto pos = c.state_dir.find("%n");
    if (pos != std::string::npos) {
        std::vector<std::string> out;
        for (const auto& n : list_dir(c.state_dir.substr(0, pos)))
            if (n.rfind("leases-", 0) != 0) out.push_back(n);
        return out;
    }
    return {short_hostname()};
}

bool parse(const Args& args, NodeArgs& a, const char* usage, bool sweep) {
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& x = args[i];
        auto val = [&]() {
            if (i + 1 >= args.size()) SVM_THROW(x + " needs a value");
            return args[++i];
        };
        if (x == "--config") a.config = val();
        else if (x == "--node") a.nodes.push_back(val());
        else if (x == "--json" && !sweep) a.json = true;
        else if (x == "--dry-run" && sweep) a.dry_run = true;
        else if (x == "--force" && sweep) a.force = true;
        else if (x == "--help" || x == "-h") {
            std::fputs(usage, stdout);
            return false;
        } else {
            SVM_THROW("unknown option " + x + "\n" + usage);
        }
    }
    return true;
}

const char* kStatusUsage =
    "usage: slurm-vm status [--config FILE] [--node NAME]... [--json]\n"
    "Shows, per node, the VM jobs with state here: guest state, address, keeper and\n"
    "QEMU processes, and the ledger of host changes (what the epilog will undo).\n"
    "  --config FILE  node configuration (default " SVM_SYSCONFDIR
    "/slurm-vm.json)\n"
    "  --node NAME    node to show (repeatable; default: every node directory under\n"
    "                 state_dir when it contains %n, else this host)\n"
    "  --json         one JSON document instead of text\n";

const char* kSweepUsage =
    "usage: slurm-vm sweep [--config FILE] [--node NAME]... [--dry-run] [--force]\n"
    "Finds state of VM jobs that no longer run on the node (guests, keepers, overlays,\n"
    "keys, leases, device bindings: everything in their ledgers) and undoes it, and\n"
    "removes the overlay directories (overlay_dir/job_<id>) of such jobs that no ledger\n"
    "holds (ledgers live in state_dir, which a power loss empties), and\n"
    "removes device ACL entries (/dev/kvm, /dev/vfio/N) of job groups whose job Slurm\n"
    "no longer has anywhere and no ledger takes back. Safe at\n"
    "any time and at slurmd start: a job Slurm still has on the node (by job id, so each\n"
    "array task and heterogeneous component counts) is never touched, and if Slurm cannot\n"
    "be asked or its answer is not understood, nothing is done (unless --force). Also deletes the\n"
    "per-job log files (<log_dir>/<node>/job_<id>.log, .console.log) of ended jobs\n"
    "older than log_keep_days days (configuration; 0 keeps them).\n"
    "  --dry-run  only list what would be repaired\n"
    "  --force    treat every job as gone when Slurm cannot be asked (node is down)\n";

}  // namespace

int cmd_status(const Args& args) {
    NodeArgs a;
    if (!parse(args, a, kStatusUsage, false)) return 0;
    Json out(json_object());
    for (const auto& node : node_names(a)) {
        NodeConfig c = load_config(a.config, node);
        Json jobs(json_array());
        if (!a.json) std::printf("node %s (state %s)\n", node.c_str(), c.state_dir.c_str());
        auto ids = jobs_on_node(c);
        if (ids.empty() && !a.json) std::printf("  no VM jobs\n");
        for (uint32_t id : ids) {
            Json j(json_object());
            json_object_set_new(j.get(), "job_id", json_integer(id));
            std::string state = "(no plan)", ip, user, image;
            std::string dir = c.job_dir(id);
            std::string text;
            if (read_file_if_exists(path_join(dir, "plan.json"), text)) {
                JobPlan p = JobPlan::from_json(text, dir);
                state = read_guest_state(p).text();
                ip = p.ip;
                user = p.user;
                image = p.image;
            } else if (read_file_if_exists(path_join(dir, "state"), text)) {
                state = trim(text);
            }
            bool keeper = process_recorded_alive(path_join(dir, "keeper.pid"), keeper_mark(id));
            Ledger l = Ledger::load(c.ledger_path(id), id);
            json_object_set_new(j.get(), "state", json_string(state.c_str()));
            json_object_set_new(j.get(), "user", json_string(user.c_str()));
            json_object_set_new(j.get(), "image", json_string(image.c_str()));
            json_object_set_new(j.get(), "ip", json_string(ip.c_str()));
            json_object_set_new(j.get(), "keeper_running", json_boolean(keeper));
            Json entries(json_array());
            for (const auto& e : l.entries()) {
                json_t* o = json_object();
                json_object_set_new(o, "kind", json_string(e.kind.c_str()));
                json_object_set(o, "data", e.data.get());
                json_array_append_new(entries.get(), o);
            }
            json_object_set(j.get(), "ledger", entries.get());
            if (!a.json) {
                std::printf("  job %u  user %s  guest %s  keeper %s  ip %s\n    image %s\n", id,
                            user.empty() ? "-" : user.c_str(), state.c_str(), keeper ? "running" : "not running",
                            ip.empty() ? "-" : ip.c_str(), image.empty() ? "-" : image.c_str());
                std::printf("    ledger:");
                for (const auto& e : l.entries()) std::printf(" %s", e.kind.c_str());
                std::printf("%s\n", l.entries().empty() ? " (empty)" : "");
            }
            json_array_append(jobs.get(), j.get());
        }
        json_object_set(out.get(), node.c_str(), jobs.get());
    }
    if (a.json) std::printf("%s\n", json_dump(out.get(), true).c_str());
    return 0;
}

namespace {

// The jobs Slurm has in a state other than ended on node, or anywhere when
// node is empty; nothing (and why) when Slurm cannot be asked or its answer is
// not understood. %A, not %i: the state here is keyed by job id, and %i shows
// an array task as <base>_<index> and a heterogeneous component as
// <leader>+<n>; every state, not `-t R,...`: Slurm 22.05 leaves out a running
// job with a state flag such as SIGNALING (admin/squeue_ids.hpp); -a: jobs of
// hidden partitions too.
std::optional<std::set<uint32_t>> active_jobs(const std::string& node, std::string& why) {
    RunOptions qo;
    qo.timeout_ms = 30000;
    qo.env = inherited_env({"PATH", "SLURM_CONF"});
    qo.max_output_bytes = size_t(128) << 20;  // some 5 million jobs
    std::vector<std::string> argv{"squeue", "-h", "-a", "-t", "all", "-o", kSqueueJobFormat};
    if (!node.empty()) argv.insert(argv.end(), {"-w", node});
    RunResult q = run(argv, qo);
    if (!q.ok()) {
        why = q.timed_out ? "squeue did not answer within 30 s" : trim(q.err);
        if (why.empty()) why = "squeue exited with status " + std::to_string(q.status);
        return std::nullopt;
    }
    auto parsed = parse_squeue_live_jobs(q.out);
    if (!parsed) {
        std::string shown = trim(q.out).substr(0, 200);
        for (char& ch : shown)
            if (ch == '\n') ch = ' ';
        why = "squeue's answer is not one job id and state per line: " + shown;
    }
    return parsed;
}

// Undoes the ledgers of the candidates Slurm no longer runs on the node.
int sweep_ledgers(const NodeArgs& a, const NodeConfig& c, const std::string& node,
                  const std::vector<uint32_t>& candidates, const std::set<uint32_t>& live) {
    int rc = 0;
    for (uint32_t id : candidates) {
        if (live.count(id)) continue;
        if (a.dry_run) {
            std::printf("%s: job %u is gone; would undo its ledger\n", node.c_str(), id);
            continue;
        }
        auto failures = teardown_job(c, id);
        if (failures.empty()) {
            std::printf("%s: job %u: leftovers removed\n", node.c_str(), id);
        } else {
            rc = 1;
            for (const auto& f : failures) std::fprintf(stderr, "%s: job %u: %s\n", node.c_str(), id, f.c_str());
        }
    }
    return rc;
}

// Device ACL entries of job groups whose job Slurm no longer has anywhere
// (the host's device nodes serve every slurmd on it) and whose ledger here is
// gone: left by a crash that lost the ledger, or by an older release.
int sweep_device_grants(const NodeArgs& a, const NodeConfig& c, const std::string& node,
                        const std::vector<DeviceGrant>& grants, const std::set<uint32_t>& live_anywhere) {
    int rc = 0;
    for (const auto& g : grants) {
        if (live_anywhere.count(g.job_id) || path_exists(c.ledger_path(g.job_id))) continue;
        if (a.dry_run) {
            std::printf("%s: %s: would remove the entry of ended job %u\n", node.c_str(), g.path.c_str(), g.job_id);
            continue;
        }
        try {
            // (Its ledger, undone above, may have taken it back already.)
            if (revoke_group(g.path, c.job_gid(g.job_id)))
                std::printf("%s: %s: entry of ended job %u removed\n", node.c_str(), g.path.c_str(), g.job_id);
        } catch (const Error& e) {
            rc = 1;
            std::fprintf(stderr, "%s: %s: %s\n", node.c_str(), g.path.c_str(), e.chain().c_str());
        }
    }
    return rc;
}

// The checkpoints of resumable jobs that Slurm no longer has at all (a job
// cancelled while pending after its requeue runs no epilog). Their
// directory is shared by the nodes: each is looked at once.
int sweep_checkpoints(const NodeArgs& a, const NodeConfig& c, const std::set<uint32_t>& live_anywhere,
                      std::set<std::string>& seen) {
    int rc = 0;
    if (c.checkpoint.dir.empty() || !seen.insert(c.checkpoint.dir).second) return 0;
    for (const auto& name : list_dir(c.checkpoint.dir)) {
        if (name.rfind("job_", 0) != 0 || name.size() > 14 ||
            name.find_first_not_of("0123456789", 4) != std::string::npos || name.size() == 4)
            continue;
        auto id = static_cast<uint32_t>(std::stoul(name.substr(4)));
        if (live_anywhere.count(id)) continue;
        std::string dir = path_join(c.checkpoint.dir, name);
        if (a.dry_run) {
            std::printf("%s: job %u is gone; would remove its checkpoint\n", dir.c_str(), id);
            continue;
        }
        try {
            remove_checkpoint(dir);
            std::printf("%s: checkpoint of ended job %u removed\n", dir.c_str(), id);
        } catch (const Error& e) {
            rc = 1;
            std::fprintf(stderr, "%s: %s\n", dir.c_str(), e.chain().c_str());
        }
    }
    return rc;
}

// Per-job log files of ended jobs, past their age; the registry image cache,
// down to its bound (entries a job of the node boots from stay).
int prune_logs_and_cache(const NodeArgs& a, const NodeConfig& c, const std::string& node,
                         const std::set<uint32_t>& live) {
    int rc = 0;
    try {
        for (const auto& name : log::prune_job_logs(c.job_log_dir(), c.log_keep_days, live, ::time(nullptr), a.dry_run))
            std::printf("%s: %s %s (older than %d days)\n", node.c_str(), a.dry_run ? "would delete" : "deleted",
                        path_join(c.job_log_dir(), name).c_str(), c.log_keep_days);
    } catch (const Error& e) {
        rc = 1;
        std::fprintf(stderr, "%s: log files: %s\n", node.c_str(), e.chain().c_str());
    }
    try {
        if (!a.dry_run && path_exists(c.oci.cache_dir))
            for (const auto& d : prune_oci_cache(c.oci.cache_dir, c.oci.cache_max_bytes, oci_entries_in_use(c)))
                std::printf("%s: registry cache: removed %s (least recently used)\n", node.c_str(), d.c_str());
    } catch (const Error& e) {
        rc = 1;
        std::fprintf(stderr, "%s: registry cache: %s\n", node.c_str(), e.chain().c_str());
    }
    return rc;
}

}  // namespace

int cmd_sweep(const Args& args) {
    NodeArgs a;
    if (!parse(args, a, kSweepUsage, true)) return 0;
    int rc = 0;
    std::set<std::string> checkpoints_seen;
    for (const auto& node : node_names(a)) {
        NodeConfig c = load_config(a.config, node);
        // What there is here, listed before Slurm is asked: a job's prolog runs
        // only once Slurm has allocated it, so each of these jobs is in
        // squeue's answer if it still runs. (Listed after, a job whose prolog
        // began in between would look gone and lose its guest.)
        std::vector<uint32_t> candidates = jobs_on_node(c);
        std::vector<DeviceGrant> grants;
        try {
            grants = device_grants_on_node(c);
        } catch (const Error& e) {  // the ledgers are swept all the same
            rc = 1;
            std::fprintf(stderr, "%s: device ACLs: %s\n", node.c_str(), e.chain().c_str());
        }
        std::string why;
        auto live = active_jobs(node, why);
        bool anywhere = !grants.empty() || !list_dir(c.checkpoint.dir).empty();
        std::optional<std::set<uint32_t>> live_anywhere;
        if (live && anywhere) live_anywhere = active_jobs("", why);
        if ((!live || (anywhere && !live_anywhere)) && !a.force) {
            std::fprintf(stderr,
                         "slurm-vm sweep: cannot ask Slurm which jobs run on %s (%s); nothing done "
                         "(use --force if the node is out of service)\n",
                         node.c_str(), why.c_str());
            rc = 1;
            continue;
        }
        std::set<uint32_t> none;
        rc |= sweep_ledgers(a, c, node, candidates, live.value_or(none));
        rc |= sweep_device_grants(a, c, node, grants, live_anywhere.value_or(none));
        if (live_anywhere) rc |= sweep_checkpoints(a, c, *live_anywhere, checkpoints_seen);
        rc |= prune_logs_and_cache(a, c, node, live.value_or(none));
    }
    return rc;
}

}  // namespace svm::admin
