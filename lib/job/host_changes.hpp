// The host changes a job's prolog makes, one typed ledger record each: what
// the record holds, how it is written and read back, and how it is undone,
// side by side. The prolog records a change (Ledger::record) before it makes
// it; the epilog, a failed prolog and `slurm-vm sweep` undo the records in
// reverse order with undo_change(). Every undo is idempotent: a record may
// describe a change that was never made (a crash right after recording) or
// one undone already.
//
// Records are read strictly (read_record, lib/base/ledger.hpp): a key this
// release does not know (a record written by a newer one) or one missing
// fails the undo with a sentence naming it, and the node drains, rather than
// undoing half of it. The device layer's own records (vfio_bind,
// vf_reservation, vf_config: lib/devices/vfio_binding.hpp, vf_pool.hpp) are
// typed the same way, recorded by prepare_devices through the same ledger,
// and undone from the same table (undo_change) by that layer.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "json.hpp"
#include "ledger.hpp"

namespace svm {

struct NodeConfig;

// What an undo may need besides its record: the node and the job.
struct UndoScope {
    const NodeConfig& cfg;
    uint32_t job_id;
};

// The job's directory in the state directory (plan, keys, embedded libvirt
// root, keeper.pid): the keeper is stopped, the tree removed.
struct JobDirChange {
    static constexpr const char* kind = "job_dir";
    std::string path;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("path", t.path);
    }
    Json to_json() const;
    static JobDirChange from_json(const json_t* d);
    void undo(const UndoScope& s) const;
};

// An ACL entry for the job's group on a device node (/dev/kvm, /dev/vfio/N).
struct DevAclChange {
    static constexpr const char* kind = "dev_acl";
    std::string path;
    gid_t gid = 0;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("path", t.path);
        v("gid", t.gid);
    }
    Json to_json() const;
    static DevAclChange from_json(const json_t* d);
    void undo(const UndoScope& s) const;
};

// The job's directory on the node's scratch space (the overlay).
struct OverlayDirChange {
    static constexpr const char* kind = "overlay_dir";
    std::string path;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("path", t.path);
    }
    Json to_json() const;
    static OverlayDirChange from_json(const json_t* d);
    void undo(const UndoScope& s) const;
};

// The job's cgroups, which the guest joins (lib/host/cgroup.hpp,
// join_cgroups_of) and so outlives the extern step in: Slurm's rmdir of them
// fails while it runs. Recorded first, so undone last: what is left in the
// guest's own v2 leaf is ended, then the job's empty directories (those of
// this node's slurmstepd scope on v2) are removed.
struct JobCgroupsChange {
    static constexpr const char* kind = "job_cgroups";
    std::string root;   // the cgroup file system, /sys/fs/cgroup
    std::string sluid;  // SLURM_JOB_SLUID, which names the job's cgroup on 26.05's v2 ("" before)
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("root", t.root);
        v.optional("sluid", t.sluid);
    }
    Json to_json() const;
    static JobCgroupsChange from_json(const json_t* d);
    void undo(const UndoScope& s) const;
};

// The guest: its keeper, QEMU and share servers, stopped when undone (the
// embedded libvirt root goes with the job directory).
struct DomainChange {
    static constexpr const char* kind = "domain";
    std::string embed_root, name, keeper_pid_file;
    std::string job_dir;  // set when the guest has share servers
    int64_t share_servers = 0;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("embed_root", t.embed_root);
        v("name", t.name);
        v("keeper_pid_file", t.keeper_pid_file);
        v.optional("job_dir", t.job_dir);
        v.optional("share_servers", t.share_servers);
    }
    Json to_json() const;
    static DomainChange from_json(const json_t* d);
    void undo(const UndoScope& s) const;
};

// The job's network segment on this node (lib/host/guest_net.hpp): its
// namespace, its VXLAN and its part of the node's VXLAN guard.
struct JobNetChange {
    static constexpr const char* kind = "job_net";
    std::string netns, underlay_netns, vxlan;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("netns", t.netns);
        v("underlay_netns", t.underlay_netns);
        v("vxlan", t.vxlan);
    }
    Json to_json() const;
    static JobNetChange from_json(const json_t* d);
    void undo(const UndoScope& s) const;
};

// Undoes one record of any kind this release knows, those of ledgers
// written by earlier releases included. Throws svm::Error.
void undo_change(const UndoScope& s, const LedgerEntry& e);

// Undoes every record of the ledger in reverse order; see undo_all.
std::vector<std::string> undo_ledger(Ledger& ledger, const NodeConfig& cfg);

}  // namespace svm
