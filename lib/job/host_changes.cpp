#include "host_changes.hpp"

#include <string>

#include "cgroup.hpp"
#include "config.hpp"
#include "dev_acl.hpp"
#include "device_steps.hpp"
#include "embed_root.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_net.hpp"
#include "proc.hpp"
#include "virtiofs.hpp"
#include "vm_job.hpp"

namespace svm {

namespace {

// Paths a record may name for removal: a job's own directory, never more.
void require_job_path(const std::string& path, const char* kind) {
    if (path.empty() || path.find("/job_") == std::string::npos)
        SVM_THROW(std::string(kind) + " record without a job path");
}

}  // namespace

Json JobDirChange::to_json() const { return json_of(*this); }
JobDirChange JobDirChange::from_json(const json_t* d) { return read_record<JobDirChange>(d); }
void JobDirChange::undo(const UndoScope& s) const {
    require_job_path(path, kind);
    stop_recorded_process(path_join(path, "keeper.pid"), keeper_mark(s.job_id), 5000);
    remove_tree(path);
}

Json DevAclChange::to_json() const { return json_of(*this); }
DevAclChange DevAclChange::from_json(const json_t* d) {
    auto c = read_record<DevAclChange>(d);
    if (c.path.empty() || c.gid == 0) SVM_THROW("dev_acl record without path or gid");
    return c;
}
void DevAclChange::undo(const UndoScope&) const { revoke_group(path, gid); }

Json OverlayDirChange::to_json() const { return json_of(*this); }
OverlayDirChange OverlayDirChange::from_json(const json_t* d) { return read_record<OverlayDirChange>(d); }
void OverlayDirChange::undo(const UndoScope&) const {
    require_job_path(path, kind);
    remove_tree(path);
}

Json JobCgroupsChange::to_json() const { return json_of(*this); }
JobCgroupsChange JobCgroupsChange::from_json(const json_t* d) {
    auto c = read_record<JobCgroupsChange>(d);
    if (c.root.empty() || c.root[0] != '/') SVM_THROW("job_cgroups record without an absolute root");
    if (!c.sluid.empty() && !is_sluid(c.sluid)) SVM_THROW("job_cgroups record with a malformed sluid");
    return c;
}
// The last undo of a job: what the earlier undos ended (the guest, the
// keeper, QEMU) may still be leaving these cgroups, so removal waits for
// them a little.
void JobCgroupsChange::undo(const UndoScope& s) const {
    remove_job_cgroups({s.job_id, sluid}, root, s.cfg.node_name, std::chrono::seconds(5));
}

Json DomainChange::to_json() const { return json_of(*this); }
DomainChange DomainChange::from_json(const json_t* d) { return read_record<DomainChange>(d); }
void DomainChange::undo(const UndoScope& s) const {
    // The keeper holds the embedded driver; it must be gone before we open it.
    if (!keeper_pid_file.empty()) stop_recorded_process(keeper_pid_file, keeper_mark(s.job_id), 8000);
    // A guest the keeper left (killed, or crashed): its job is over, so QEMU
    // ends at once; the embedded root goes with the job directory.
    stop_recorded_process(qemu_pid_file(embed_root, name), qemu_mark(name), 0);
    // Its share servers end when QEMU does; any the keeper left go now.
    for (int64_t i = 0; i < share_servers && !job_dir.empty(); ++i)
        stop_recorded_process(path_join(job_dir, "share" + std::to_string(i) + ".pid"),
                              virtiofsd_mark(s.job_id, static_cast<size_t>(i)), 0);
}

Json JobNetChange::to_json() const { return json_of(*this); }
JobNetChange JobNetChange::from_json(const json_t* d) { return read_record<JobNetChange>(d); }
void JobNetChange::undo(const UndoScope&) const { remove_segment(netns, underlay_netns, vxlan); }

namespace {

// Records of ledgers written before the per-job segment (a node upgraded
// while such jobs ran), undone only: the address lease, and the shared
// bridge's filter once no lease of the job is left on the host.
struct IpLeaseRecord {
    static constexpr const char* kind = "ip_lease";
    std::string file, owner;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("file", t.file);
        v("owner", t.owner);
    }
    void undo(const UndoScope&) const {
        std::string holder;
        if (!file.empty() && read_file_if_exists(file, holder) && trim(holder) == owner) remove_tree(file);
    }
};

struct NetFilterRecord {
    static constexpr const char* kind = "net_filter";
    std::string lease_dir, netns, table;
    int64_t job = 0;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("lease_dir", t.lease_dir);
        v("netns", t.netns);
        v("table", t.table);
        v("job", t.job);
    }
    void undo(const UndoScope&) const {
        std::string owner = "job " + std::to_string(job) + " on ";
        for (const auto& f : list_dir(lease_dir)) {
            std::string holder;
            if (read_file_if_exists(path_join(lease_dir, f), holder) && trim(holder).rfind(owner, 0) == 0) return;
        }
        if (table.rfind("svm_job_", 0) != 0) SVM_THROW("not a job filter table: " + table);
        std::vector<std::string> argv = {"nft", "delete", "table", "bridge", table};
        if (!netns.empty()) argv.insert(argv.begin(), {"ip", "netns", "exec", netns});
        run(argv);  // gone already: fine
    }
};

template <class Change>
void undo_typed(const UndoScope& s, const json_t* d) {
    Change::from_json(d).undo(s);
}

template <class Change>
void undo_read(const UndoScope& s, const json_t* d) {
    read_record<Change>(d).undo(s);
}

// The device layer's records, undone with the node's device configuration.
template <class Record>
void undo_device(const UndoScope& s, const json_t* d) {
    if (!s.cfg.devices)
        SVM_THROW(std::string("a ") + Record::kind + " record on a node without devices in its configuration");
    Record r = Record::from_json(d);
    DeviceConfig dc = parse_device_config(s.cfg.devices.get());
    SysfsRoot root(s.cfg.sysfs_root);
    auto w = device_writer(root, dc);
    undo_device_step(root, *w, dc, r);
}

using UndoFn = void (*)(const UndoScope&, const json_t*);
struct UndoKind {
    const char* kind;
    UndoFn undo;
};
// Every kind of record this release undoes, those of earlier releases' ledgers included.
const UndoKind kUndo[] = {
    {JobDirChange::kind, undo_typed<JobDirChange>},
    {DevAclChange::kind, undo_typed<DevAclChange>},
    {OverlayDirChange::kind, undo_typed<OverlayDirChange>},
    {JobCgroupsChange::kind, undo_typed<JobCgroupsChange>},
    {DomainChange::kind, undo_typed<DomainChange>},
    {JobNetChange::kind, undo_typed<JobNetChange>},
    {BindRecord::kind, undo_device<BindRecord>},
    {VfReservationRecord::kind, undo_device<VfReservationRecord>},
    {VfConfigRecord::kind, undo_device<VfConfigRecord>},
    {IpLeaseRecord::kind, undo_read<IpLeaseRecord>},
    {NetFilterRecord::kind, undo_read<NetFilterRecord>},
};

}  // namespace

void undo_change(const UndoScope& s, const LedgerEntry& e) {
    for (const auto& k : kUndo)
        if (e.kind == k.kind) return k.undo(s, e.data.get());
    SVM_THROW("no undo for ledger record \"" + e.kind + "\" (written by a newer release?)");
}

std::vector<std::string> undo_ledger(Ledger& ledger, const NodeConfig& cfg) {
    UndoScope s{cfg, ledger.job_id()};
    return undo_all(ledger, [&](const LedgerEntry& e) { undo_change(s, e); });
}

}  // namespace svm
