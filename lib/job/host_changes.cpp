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

// Reads a record strictly (JSON_STRICT: every key of the record is named in
// fmt). Each record also carries the ledger's own "recorded_at", the last
// pair of every format below.
template <class... Out>
void unpack(const json_t* d, const char* kind, const char* fmt, Out... out) {
    json_error_t err;
    if (json_unpack_ex(const_cast<json_t*>(d), &err, JSON_STRICT, fmt, out...) != 0)
        SVM_THROW(std::string("ledger record \"") + kind + "\": " + err.text);
}

Json object(std::initializer_list<std::pair<const char*, json_t*>> fields) {
    Json d(json_object());
    for (const auto& [k, v] : fields) json_object_set_new(d.get(), k, v);
    return d;
}

json_t* str(const std::string& s) { return json_string(s.c_str()); }

// Paths a record may name for removal: a job's own directory, never more.
void require_job_path(const std::string& path, const char* kind) {
    if (path.empty() || path.find("/job_") == std::string::npos)
        SVM_THROW(std::string(kind) + " record without a job path");
}

}  // namespace

Json JobDirChange::to_json() const { return object({{"path", str(path)}}); }
JobDirChange JobDirChange::from_json(const json_t* d) {
    const char* path = nullptr;
    json_int_t at = 0;
    unpack(d, kind, "{s:s, s?I}", "path", &path, "recorded_at", &at);
    return {path};
}
void JobDirChange::undo(const UndoScope& s) const {
    require_job_path(path, kind);
    stop_recorded_process(path_join(path, "keeper.pid"), keeper_mark(s.job_id), 5000);
    remove_tree(path);
}

Json DevAclChange::to_json() const {
    return object({{"path", str(path)}, {"gid", json_integer(static_cast<json_int_t>(gid))}});
}
DevAclChange DevAclChange::from_json(const json_t* d) {
    const char* path = nullptr;
    json_int_t gid = 0, at = 0;
    unpack(d, kind, "{s:s, s:I, s?I}", "path", &path, "gid", &gid, "recorded_at", &at);
    if (!*path || gid <= 0) SVM_THROW("dev_acl record without path or gid");
    return {path, static_cast<gid_t>(gid)};
}
void DevAclChange::undo(const UndoScope&) const { revoke_group(path, gid); }

Json OverlayDirChange::to_json() const { return object({{"path", str(path)}}); }
OverlayDirChange OverlayDirChange::from_json(const json_t* d) {
    const char* path = nullptr;
    json_int_t at = 0;
    unpack(d, kind, "{s:s, s?I}", "path", &path, "recorded_at", &at);
    return {path};
}
void OverlayDirChange::undo(const UndoScope&) const {
    require_job_path(path, kind);
    remove_tree(path);
}

Json JobCgroupsChange::to_json() const { return object({{"root", str(root)}}); }
JobCgroupsChange JobCgroupsChange::from_json(const json_t* d) {
    const char* root = nullptr;
    json_int_t at = 0;
    unpack(d, kind, "{s:s, s?I}", "root", &root, "recorded_at", &at);
    if (*root != '/') SVM_THROW("job_cgroups record without an absolute root");
    return {root};
}
// The last undo of a job: what the earlier undos ended (the guest, the
// keeper, QEMU) may still be leaving these cgroups, so removal waits for
// them a little.
void JobCgroupsChange::undo(const UndoScope& s) const {
    remove_job_cgroups(s.job_id, root, s.cfg.node_name, std::chrono::seconds(5));
}

Json DomainChange::to_json() const {
    Json d = object({{"embed_root", str(embed_root)}, {"name", str(name)}, {"keeper_pid_file", str(keeper_pid_file)}});
    if (!job_dir.empty()) {
        json_object_set_new(d.get(), "job_dir", str(job_dir));
        json_object_set_new(d.get(), "share_servers", json_integer(static_cast<json_int_t>(share_servers)));
    }
    return d;
}
DomainChange DomainChange::from_json(const json_t* d) {
    const char *root = nullptr, *name = nullptr, *pid = nullptr, *dir = "";
    json_int_t servers = 0, at = 0;
    unpack(d, kind, "{s:s, s:s, s:s, s?s, s?I, s?I}", "embed_root", &root, "name", &name, "keeper_pid_file", &pid,
           "job_dir", &dir, "share_servers", &servers, "recorded_at", &at);
    return {root, name, pid, dir, servers};
}
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

Json JobNetChange::to_json() const {
    return object({{"netns", str(netns)}, {"underlay_netns", str(underlay_netns)}, {"vxlan", str(vxlan)}});
}
JobNetChange JobNetChange::from_json(const json_t* d) {
    const char *ns = nullptr, *under = nullptr, *vxlan = nullptr;
    json_int_t at = 0;
    unpack(d, kind, "{s:s, s:s, s:s, s?I}", "netns", &ns, "underlay_netns", &under, "vxlan", &vxlan, "recorded_at",
           &at);
    return {ns, under, vxlan};
}
void JobNetChange::undo(const UndoScope&) const { remove_segment(netns, underlay_netns, vxlan); }

namespace {

// Records of ledgers written before the per-job segment (a node upgraded
// while such jobs ran), undone only: the address lease, and the shared
// bridge's filter once no lease of the job is left on the host.
void undo_ip_lease(const json_t* d) {
    const char *file = nullptr, *owner = nullptr;
    json_int_t at = 0;
    unpack(d, "ip_lease", "{s:s, s:s, s?I}", "file", &file, "owner", &owner, "recorded_at", &at);
    std::string holder;
    if (*file && read_file_if_exists(file, holder) && trim(holder) == owner) remove_tree(file);
}

void undo_net_filter(const json_t* d) {
    const char *dir = nullptr, *ns = nullptr, *table = nullptr;
    json_int_t job = 0, at = 0;
    unpack(d, "net_filter", "{s:s, s:s, s:s, s:I, s?I}", "lease_dir", &dir, "netns", &ns, "table", &table, "job", &job,
           "recorded_at", &at);
    std::string owner = "job " + std::to_string(job) + " on ";
    for (const auto& f : list_dir(dir)) {
        std::string holder;
        if (read_file_if_exists(path_join(dir, f), holder) && trim(holder).rfind(owner, 0) == 0) return;
    }
    if (std::string(table).rfind("svm_job_", 0) != 0) SVM_THROW(std::string("not a job filter table: ") + table);
    std::vector<std::string> argv = {"nft", "delete", "table", "bridge", table};
    if (*ns) argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
    run(argv);  // gone already: fine
}

template <class Change>
bool undo_as(const UndoScope& s, const LedgerEntry& e) {
    if (e.kind != Change::kind) return false;
    Change::from_json(e.data.get()).undo(s);
    return true;
}

void undo_device(const UndoScope& s, const LedgerEntry& e) {
    if (!s.cfg.devices) SVM_THROW("a " + e.kind + " record on a node without devices in its configuration");
    DeviceConfig dc = parse_device_config(s.cfg.devices.get());
    SysfsRoot root(s.cfg.sysfs_root);
    auto w = device_writer(root, dc);
    undo_device_step(root, *w, dc, e.kind, e.data.get());
}

}  // namespace

void undo_change(const UndoScope& s, const LedgerEntry& e) {
    if (undo_as<JobDirChange>(s, e) || undo_as<DevAclChange>(s, e) || undo_as<OverlayDirChange>(s, e) ||
        undo_as<JobCgroupsChange>(s, e) || undo_as<DomainChange>(s, e) || undo_as<JobNetChange>(s, e))
        return;
    if (e.kind == BindRecord::kKind || e.kind == VfReservationRecord::kKind || e.kind == VfConfigRecord::kKind)
        return undo_device(s, e);
    if (e.kind == "ip_lease") return undo_ip_lease(e.data.get());
    if (e.kind == "net_filter") return undo_net_filter(e.data.get());
    SVM_THROW("no undo for ledger record \"" + e.kind + "\" (written by a newer release?)");
}

std::vector<std::string> undo_ledger(Ledger& ledger, const NodeConfig& cfg) {
    UndoScope s{cfg, ledger.job_id()};
    return undo_all(ledger, [&](const LedgerEntry& e) { undo_change(s, e); });
}

}  // namespace svm
