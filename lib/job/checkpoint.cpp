#include "checkpoint.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "log.hpp"
#include "proc.hpp"
#include "vm_job.hpp"

namespace svm {

namespace {

template <class V, class E>
void entry_fields(V& v, E& e) {
    v("job_id", e.job_id);
    v("uid", e.uid);
    v("node_index", e.node_index);
    v("nodes", e.nodes);
    v("guest_node", e.guest_node);
    image_identity_fields(v, e.image);
    v("bytes", e.bytes);
}

// Bytes a file takes on disk (a sparse overlay: its blocks), 0 if missing.
int64_t disk_bytes(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return 0;
    return static_cast<int64_t>(st.st_blocks) * 512;
}

// The guest's memory as the keeper sized it (guest.json), 0 when unknown.
int64_t guest_memory_bytes(const JobPlan& p) {
    try {
        Json g = json_load_file(path_join(p.dir, "guest.json"));
        return json_get_int(g.get(), "memory_mib").value_or(0) << 20;
    } catch (const Error&) {
        return 0;
    }
}

// The keeper saves the guest into `save` (SIGUSR2: it pauses the guest,
// writes the state and ends); true when the file is there afterwards.
bool keeper_saved(const JobPlan& p, const std::string& save, int timeout_s) {
    ::unlink(save.c_str());
    try {
        stop_recorded_process(p.keeper_pid_file(), keeper_mark(p.job_id), timeout_s * 1000, SIGUSR2);
    } catch (const Error& e) {
        log::warn("the keeper did not end after saving: " + e.chain());
        return false;
    }
    return path_exists(save);
}

// Saves this node's guest and overlay, both within timeout_s (the
// epilog's share of Slurm's time: not once each); the entry last. Throws
// the reason.
void save_node(const NodeConfig& cfg, const JobPlan& p, int timeout_s) {
    const Deadline by{Milliseconds(int64_t{timeout_s} * 1000)};
    const std::string& dir = p.checkpoint_dir;
    GuestState state = read_guest_state(p);
    if (state.phase != GuestState::Phase::ready)
        SVM_THROW("its guest on " + p.node + " was not running (" + state.text() + ")");
    int nodes = static_cast<int>(p.peers.size());
    uint64_t share = cfg.checkpoint.max_bytes / static_cast<uint64_t>(nodes > 0 ? nodes : 1);
    mkdir_p(cfg.checkpoint.dir, 0711);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) SVM_THROW_ERRNO("mkdir " + dir);
    int64_t need = guest_memory_bytes(p) + disk_bytes(p.overlay());
    if (static_cast<uint64_t>(need) > share)
        SVM_THROW("its guest on " + p.node + " needs " + std::to_string(need >> 20) + " MiB, more than its share (" +
                  std::to_string(share >> 20) + " MiB) of the site's checkpoint.max_gib");
    // Many jobs' checkpoints together never fill the file system: what
    // they would leave free is kept.
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) == 0) {
        uint64_t avail = uint64_t(fs.f_bavail) * fs.f_frsize;
        if (avail < uint64_t(need) + cfg.checkpoint.reserve_bytes)
            SVM_THROW("the checkpoint space has " + std::to_string(avail >> 20) + " MiB free, and its guest on " +
                      p.node + " needs " + std::to_string(need >> 20) + " MiB of it beyond the " +
                      std::to_string(cfg.checkpoint.reserve_bytes >> 30) + " GiB the site keeps free");
    }
    std::string entry = checkpoint_file(dir, p.node_index, "json");
    ::unlink(entry.c_str());
    ::unlink(checkpoint_file(dir, p.node_index, "failed").c_str());
    std::string save = checkpoint_file(dir, p.node_index, "save");
    if (!keeper_saved(p, save, timeout_s))
        SVM_THROW("the guest on " + p.node + " was not saved (the node's log for job " + std::to_string(p.job_id) +
                  " says why)");
    std::string disk = checkpoint_file(dir, p.node_index, "qcow2");
    if (::rename(p.overlay().c_str(), disk.c_str()) != 0)
        copy_sparse(p.overlay(), disk, std::max(1, by.remaining_ms()));
    CheckpointEntry e;
    e.job_id = p.job_id;
    e.uid = p.uid;
    e.node_index = p.node_index;
    e.nodes = nodes;
    e.guest_node = p.peers.at(static_cast<size_t>(p.node_index)).node;
    e.image = p.image_identity;
    e.bytes = disk_bytes(save) + disk_bytes(disk);
    write_file_atomic(entry, e.to_json(), 0600);
}

// Why node i's guest is not in the checkpoint: its epilog's reason when it
// left one (node<i>.failed), bounded.
std::string unsaved_why(const std::string& job_dir, int i) {
    std::string why;
    try {
        if (read_file_if_exists(checkpoint_file(job_dir, i, "failed"), why))
            return log::printable(trim(why.substr(0, 400)));
    } catch (const Error&) {
    }
    return "node " + std::to_string(i) + " of the job was not saved";
}

}  // namespace

std::string CheckpointEntry::to_json() const {
    JsonOut o;
    entry_fields(o, *this);
    return json_dump(o.take().get()) + "\n";
}

CheckpointEntry CheckpointEntry::from_json(const std::string& text, const std::string& shown) {
    Json doc = json_parse(text, shown);
    if (!json_is_object(doc.get())) SVM_THROW(shown + " is not a JSON object");
    JsonIn in(doc.get(), shown);
    CheckpointEntry e;
    entry_fields(in, e);
    in.done();
    return e;
}

std::string checkpoint_job_dir(const std::string& dir, uint32_t job_id) {
    return path_join(dir, "job_" + std::to_string(job_id));
}

std::string checkpoint_file(const std::string& job_dir, int node_index, const char* ext) {
    return path_join(job_dir, "node" + std::to_string(node_index) + "." + ext);
}

std::optional<std::vector<CheckpointEntry>> whole_checkpoint(const std::string& job_dir, uint32_t job_id, uid_t uid,
                                                             int nodes, std::string& why) {
    why.clear();
    if (!path_exists(job_dir)) return std::nullopt;
    std::vector<CheckpointEntry> out;
    for (int i = 0; i < nodes; ++i) {
        std::string text, file = checkpoint_file(job_dir, i, "json");
        try {
            if (!read_file_if_exists(file, text) || text.size() > 64 * 1024) {
                why = "the job was not saved whole when Slurm requeued it (" + unsaved_why(job_dir, i) + ")";
                return std::nullopt;
            }
            CheckpointEntry e = CheckpointEntry::from_json(text, file);
            if (e.job_id != job_id || e.uid != uid || e.nodes != nodes || e.node_index != i)
                SVM_THROW("it belongs to another job, user or number of nodes");
            if (!path_exists(checkpoint_file(job_dir, i, "save")) || !path_exists(checkpoint_file(job_dir, i, "qcow2")))
                SVM_THROW("its files are missing");
            out.push_back(e);
        } catch (const Error& e) {
            why = "the job's saved state is not usable (" + e.reason() + ")";
            return std::nullopt;
        }
    }
    return out;
}

std::optional<std::pair<int, int>> emulator_version(const std::string& emulator) {
    RunOptions o;
    o.timeout_ms = 10000;
    o.max_output_bytes = 4096;
    RunResult r = run({emulator, "--version"}, o);
    const std::string tag = "QEMU emulator version ";
    size_t at = r.out.find(tag);
    int major = 0, minor = 0;
    if (!r.ok() || at == std::string::npos ||
        std::sscanf(r.out.c_str() + at + tag.size(), "%4d.%4d", &major, &minor) != 2)
        return std::nullopt;
    return std::make_pair(major, minor);
}

std::string not_resumable_because(const CheckpointConfig& cfg, const JobPlan& p) {
    if (cfg.dir.empty()) return "the site keeps no checkpoints of VM jobs (no checkpoint.dir in its configuration)";
    if (!p.hostdevs.empty())
        return "its guest on " + p.node + " has devices passed through (GPUs, a VF), which cannot be saved";
    if (p.shares.empty()) return "";
    std::string shared = "its guest has host directories shared into it (" + p.shares.front() +
                         (p.shares.size() > 1 ? ", ..." : "") + ")";
    if (p.shares_via != "virtiofs")
        return shared + " over 9p, which QEMU cannot save while they are mounted: ask the site for virtio-fs shares";
    if (p.emulator.empty()) return "";  // sbatch, where QEMU is not installed: the nodes tell
    std::optional<std::pair<int, int>> v = emulator_version(p.emulator);
    if (!v) return shared + ", and the node's QEMU (" + p.emulator + ") does not tell its version";
    if (*v < std::make_pair(8, 2))
        return shared + " over virtio-fs, which QEMU " + std::to_string(v->first) + "." + std::to_string(v->second) +
               " cannot save (QEMU 8.2 and later can)";
    return "";
}

std::string checkpoint_at_end(const NodeConfig& cfg, const JobPlan& p, bool requeued, int bound_s) {
    if (p.checkpoint_dir.empty()) return "";
    if (!requeued) {
        try {
            remove_checkpoint(p.checkpoint_dir);
        } catch (const Error& e) {
            return "the job's checkpoint was not removed: " + e.chain();
        }
        return "";
    }
    long t0 = now_ms();
    int timeout_s = bound_s > 0 ? std::min(cfg.checkpoint.timeout_s, bound_s) : cfg.checkpoint.timeout_s;
    try {
        save_node(cfg, p, timeout_s);
    } catch (const Error& e) {
        // "save.new": the keeper's save, when it was killed at the bound.
        for (const char* ext : {"json", "save", "qcow2", "save.new"})
            ::unlink(checkpoint_file(p.checkpoint_dir, p.node_index, ext).c_str());
        // Its next run tells the user why it starts afresh.
        try {
            if (path_exists(p.checkpoint_dir))
                write_file_atomic(checkpoint_file(p.checkpoint_dir, p.node_index, "failed"), e.reason() + "\n", 0600);
        } catch (const Error&) {
        }
        return "the job was requeued but not saved, so it starts afresh: " + e.reason();
    }
    return "the job was requeued: its guest on " + p.node + " is saved in " + p.checkpoint_dir + " (" +
           std::to_string(now_ms() - t0) + " ms)";
}

void copy_sparse(const std::string& from, const std::string& to, int timeout_ms) {
    RunOptions o;
    o.timeout_ms = timeout_ms;
    run_checked({"cp", "--sparse=always", "--", from, to}, o);
}

void remove_checkpoint(const std::string& job_dir) {
    if (path_exists(job_dir)) remove_tree(job_dir);
}

}  // namespace svm
