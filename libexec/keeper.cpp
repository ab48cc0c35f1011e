// slurm-vm-keeper: started by the plugin in the job's extern step on each
// node; runs the job's guest (see lib/job/keeper.hpp) and publishes what the VM
// was, or why it could not run, into the job's AdminComment (lib/slurm/job_record.hpp).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "error.hpp"
#include "guest_net.hpp"
#include "job_record.hpp"
#include "keeper.hpp"
#include "libvirt_session.hpp"
#include "log.hpp"
#include "record_relay.hpp"

namespace {

const char* kKeeperHelp =
    "usage: slurm-vm-keeper --config FILE --node NAME --job ID [--join-cgroup-of PID] [--no-accounting]\n"
    "       slurm-vm-keeper --probe-capabilities CACHE_ROOT EMULATOR (run by the prolog)\n"
    "       slurm-vm-keeper --image-digest FD SIZE (run by the keeper, as the job's user)\n"
    "Started by the slurm-vm SPANK plugin in the job's extern step; not meant to be run by hand.\n"
    "Runs the job's guest on this node, relays SSH to it, and records the VM in the job's\n"
    "AdminComment ({\"slurm_vm\":{\"v\":1,\"nodes\":{NODE:{...}}}}) unless --no-accounting.\n";

// The keeper's arguments into `o`; the exit status when the program ends
// here (help, a usage error).
std::optional<int> parse_args(int argc, char** argv, svm::KeeperOptions& o, bool& publish_record) {
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
            std::fputs(kKeeperHelp, stdout);
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
    return std::nullopt;
}

// Lines: keeper.log in the job's directory (our stderr), syslog, and the
// job's log file for admins.
void start_logging(const svm::KeeperOptions& o) {
    svm::log::Setup ls;
    ls.program = "slurm-vm-keeper";
    ls.job_id = o.job_id;
    ls.node = o.node;
    ls.syslog = true;
    ls.stderr_prefix = "slurm-vm-keeper ";
    svm::log::init(ls);
    try {
        svm::log::add_job_file(svm::load_config(o.config_path, o.node).log_dir);
    } catch (const svm::Error&) {
        // run_keeper reports an unreadable configuration.
    }
}

// This node's entry of the job's AdminComment: what the VM was, or why it
// could not run (a first write at once: the job may end soon). One writer
// per job: the head node's keeper collects the entries and writes them
// (lib/slurm/record_relay.hpp); entries replace a requeued job's earlier
// ones.
void publish_through(svm::KeeperOptions& o, std::unique_ptr<svm::RecordRelay>& relay) {
    o.on_start = [&relay](const svm::JobPlan& p) {
        std::vector<std::string> nodes;
        for (const auto& peer : p.peers) nodes.push_back(peer.node);
        std::optional<svm::RelaySegment> segment;
        if (!p.netns.empty())
            segment = svm::RelaySegment{svm::segment_host_side(0).ip, [ns = p.netns] { svm::enter_netns(ns); }};
        relay = std::make_unique<svm::RecordRelay>(p.job_id, p.node, p.node_index, nodes, std::move(segment));
        relay->start();
    };
    o.on_ready = [&relay](const svm::JobPlan&, const std::string& record, const std::atomic<bool>& cancelled) {
        if (relay) relay->submit(record, false, &cancelled);
    };
    o.on_failure = [&relay](const svm::JobPlan& p, const std::string& reason) {
        if (relay) relay->submit(svm::error_record(reason), true);
        else svm::publish_node_record(p.job_id, p.node, svm::error_record(reason), svm::PublishOptions::for_error());
    };
}

}  // namespace

int main(int argc, char** argv) {
    // The prolog's warm-up of the node's QEMU capabilities cache
    // (seed_capabilities_cache, lib/guest/embed_root.hpp): libvirt is loaded
    // by the programs that drive it only.
    if (argc == 4 && !std::strcmp(argv[1], "--probe-capabilities"))
        return svm::probe_capabilities(argv[2], argv[3]) ? 0 : 1;
    // The image's digest, started by the head node's keeper as the job's
    // user (svm::digest_as_user): reads the inherited descriptor up to the
    // size it had when it was checked, prints "sha256:<hex>".
    if (argc == 4 && !std::strcmp(argv[1], "--image-digest")) return svm::image_digest_main(argv[2], argv[3]);
    svm::KeeperOptions o;
    bool publish_record = true;
    if (std::optional<int> status = parse_args(argc, argv, o, publish_record)) return *status;
    start_logging(o);
    // Left to the process's end, never destroyed nor reset: the ready
    // record's publisher (a thread of the keeper's) may still use it when
    // main returns.
    auto& relay = *new std::unique_ptr<svm::RecordRelay>();
    if (publish_record) publish_through(o, relay);
    int rc = 1;
    try {
        rc = svm::run_keeper(o);
    } catch (const svm::Error& e) {
        svm::log::error(e);
    } catch (const std::exception& e) {
        svm::log::error(e.what());
    }
    if (relay) relay->flush();
    svm::log::shutdown();
    return rc;
}
