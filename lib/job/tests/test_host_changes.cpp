// The prolog's host changes as typed ledger records: each one written,
// read back from the ledger's file and undone through undo_change; records
// read strictly (an unknown key or kind fails, naming it); undoing twice is
// harmless; and the records of earlier releases are still undone.
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "catch.hpp"

#include "config.hpp"
#include "dev_acl.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "host_changes.hpp"
#include "ledger.hpp"
#include "support.hpp"
#include "vf_pool.hpp"

namespace {

constexpr uint32_t kJob = 77;

svm::LedgerEntry entry(const char* kind, const char* json) { return {kind, svm::json_parse(json, "test")}; }

}  // namespace

TEST_CASE("host changes: recorded, read back from the ledger file, undone in reverse, twice harmlessly",
          "[host_changes]") {
    REQUIRE(geteuid() == 0);  // the device ACL needs root
    svm::test::TempDir tmp("svm-changes");
    svm::NodeConfig cfg;
    std::string job_dir = svm::path_join(tmp.path(), "state/job_77");
    std::string overlay = svm::path_join(tmp.path(), "overlays/job_77");
    std::string dev = svm::path_join(tmp.path(), "kvm");
    svm::mkdir_p(svm::path_join(job_dir, "libvirt"), 0700);
    svm::mkdir_p(overlay, 0700);
    svm::write_file_atomic(dev, "", 0600);
    gid_t gid = cfg.job_gid(kJob);
    svm::grant_group_rw(dev, gid);

    std::string path = svm::path_join(tmp.path(), "ledger/job_77.json");
    svm::mkdir_p(svm::path_join(tmp.path(), "ledger"), 0700);
    {
        auto l = svm::Ledger::load(path, kJob);
        l.record(svm::JobDirChange{job_dir});
        l.record(svm::DevAclChange{dev, gid});
        l.record(svm::OverlayDirChange{overlay});
        // A guest whose keeper and QEMU are gone already (their pid files absent).
        l.record(svm::DomainChange{svm::path_join(job_dir, "libvirt"), "slurm-vm-77-n1",
                                   svm::path_join(job_dir, "keeper.pid"), job_dir, 2});
    }
    auto l = svm::Ledger::load(path, kJob);
    REQUIRE(l.entries().size() == 4);
    CHECK(l.entries()[1].kind == "dev_acl");
    auto d = svm::DomainChange::from_json(l.entries()[3].data.get());
    CHECK(d.name == "slurm-vm-77-n1");
    CHECK(d.share_servers == 2);
    CHECK(svm::DevAclChange::from_json(l.entries()[1].data.get()).gid == gid);

    CHECK(svm::undo_ledger(l, cfg).empty());
    CHECK_FALSE(svm::path_exists(job_dir));
    CHECK_FALSE(svm::path_exists(overlay));
    CHECK_FALSE(svm::has_group_entry(dev, gid));
    CHECK_FALSE(svm::path_exists(path));  // a clean undo removes the ledger

    // The epilog again (or sweep after it): every record's undo is idempotent.
    svm::UndoScope s{cfg, kJob};
    svm::undo_change(s, {"job_dir", svm::JobDirChange{job_dir}.to_json()});
    svm::undo_change(s, {"dev_acl", svm::DevAclChange{dev, gid}.to_json()});
    svm::undo_change(s, {"overlay_dir", svm::OverlayDirChange{overlay}.to_json()});
}

TEST_CASE("host changes: the job's cgroups, left by its guest, are removed after it, other jobs' stay",
          "[host_changes]") {
    svm::test::TempDir tmp("svm-changes-cg");
    svm::NodeConfig cfg;
    std::string root = tmp.path();
    for (const char* d : {"memory/slurm/uid_1/job_77/step_extern/task_0", "cpuset/slurm/uid_1/job_77",
                          "memory/slurm/uid_1/job_770/step_0"})
        svm::mkdir_p(svm::path_join(root, d));
    std::string path = svm::path_join(root, "job_77.json");
    svm::Ledger::load(path, kJob).record(svm::JobCgroupsChange{root});
    auto l = svm::Ledger::load(path, kJob);
    REQUIRE(l.entries().size() == 1);
    CHECK(svm::JobCgroupsChange::from_json(l.entries()[0].data.get()).root == root);
    CHECK(svm::undo_ledger(l, cfg).empty());
    CHECK_FALSE(svm::path_exists(svm::path_join(root, "memory/slurm/uid_1/job_77")));
    CHECK_FALSE(svm::path_exists(svm::path_join(root, "cpuset/slurm/uid_1/job_77")));
    CHECK(svm::path_exists(svm::path_join(root, "memory/slurm/uid_1/job_770/step_0")));
    svm::UndoScope s{cfg, kJob};
    svm::undo_change(s, {"job_cgroups", svm::JobCgroupsChange{root}.to_json()});  // twice: harmless
    CHECK(svm::test::error_of([&] {
              svm::undo_change(s, entry("job_cgroups", R"({"root": "sys/fs/cgroup"})"));
          }).find("absolute root") != std::string::npos);
}

TEST_CASE("host changes: the job's cgroups record keeps its SLUID (26.05's v2 names them by it)", "[host_changes]") {
    svm::test::TempDir tmp("svm-changes-sluid");
    svm::NodeConfig cfg;
    cfg.node_name = "n1";
    std::string root = tmp.path();
    svm::write_file_atomic(svm::path_join(root, "cgroup.controllers"), "cpuset cpu memory\n");
    std::string job = svm::path_join(root, "system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS00");
    svm::mkdir_p(svm::path_join(job, "step_extern/user/task_special/slurm_vm"));
    std::string path = svm::path_join(root, "job_77.json");
    svm::Ledger::load(path, kJob).record(svm::JobCgroupsChange{root, "s8A1M8JTMTWS00"});
    auto l = svm::Ledger::load(path, kJob);
    REQUIRE(l.entries().size() == 1);
    CHECK(svm::JobCgroupsChange::from_json(l.entries()[0].data.get()).sluid == "s8A1M8JTMTWS00");
    CHECK(svm::undo_ledger(l, cfg).empty());
    CHECK_FALSE(svm::path_exists(job));
    // A record of an earlier release has none; a malformed one is refused.
    CHECK(svm::JobCgroupsChange::from_json(svm::JobCgroupsChange{root}.to_json().get()).sluid.empty());
    svm::UndoScope s{cfg, kJob};
    CHECK(svm::test::error_of([&] {
              svm::undo_change(s, entry("job_cgroups", R"({"root": "/sys/fs/cgroup", "sluid": "../job_1"})"));
          }).find("malformed sluid") != std::string::npos);
}

TEST_CASE("host changes: records are read strictly, and a path outside a job is never removed", "[host_changes]") {
    svm::NodeConfig cfg;
    svm::UndoScope s{cfg, kJob};
    // A key this release does not know (a newer release wrote it): named, not half undone.
    CHECK(svm::test::error_of([&] {
              svm::undo_change(s, entry("overlay_dir", R"({"path": "/x/job_77", "mode": "keep"})"));
          }).find("mode") != std::string::npos);
    CHECK(svm::test::error_of([&] {
              svm::undo_change(s, entry("overlay_dir", R"({"recorded_at": 1})"));
          }).find("path") != std::string::npos);
    CHECK(svm::test::error_of([&] {
              svm::undo_change(s, entry("cgroup_tree", "{}"));
          }).find("no undo for ledger record \"cgroup_tree\"") != std::string::npos);
    CHECK(svm::test::error_of([&] {
              svm::undo_change(s, entry("dev_acl", R"({"path": "/dev/kvm", "gid": 0})"));
          }).find("without path or gid") != std::string::npos);
    // A record naming a directory that is not a job's: refused, nothing removed.
    svm::test::TempDir tmp("svm-changes-strict");
    CHECK(svm::test::error_of([&] {
              svm::undo_change(s, {"overlay_dir", svm::OverlayDirChange{tmp.path()}.to_json()});
          }).find("without a job path") != std::string::npos);
    CHECK(svm::path_exists(tmp.path()));
    // Device records on a node configured without devices: the node's fault, said.
    CHECK(svm::test::error_of([&] { svm::undo_change(s, entry("vfio_bind", "{}")); }).find("without devices") !=
          std::string::npos);
}

TEST_CASE("host changes: an earlier release's address lease is undone only while it is the job's", "[host_changes]") {
    svm::test::TempDir tmp("svm-changes-lease");
    svm::NodeConfig cfg;
    svm::UndoScope s{cfg, kJob};
    std::string mine = svm::path_join(tmp.path(), "10.0.0.5"), theirs = svm::path_join(tmp.path(), "10.0.0.6");
    svm::write_file_atomic(mine, "job 77 on n1\n", 0644);
    svm::write_file_atomic(theirs, "job 78 on n1\n", 0644);
    svm::undo_change(
        s, entry("ip_lease", (R"({"file": ")" + mine + R"(", "owner": "job 77 on n1", "recorded_at": 5})").c_str()));
    svm::undo_change(s, entry("ip_lease", (R"({"file": ")" + theirs + R"(", "owner": "job 77 on n1"})").c_str()));
    CHECK_FALSE(svm::path_exists(mine));
    CHECK(svm::path_exists(theirs));  // another job's lease now: kept
}

TEST_CASE("host changes: device records are undone from the same table, with the node's device configuration",
          "[host_changes]") {
    svm::test::TempDir tmp("svm-changes-devices");
    svm::NodeConfig cfg;
    cfg.sysfs_root = tmp.path();  // an empty tree: the functions are gone, there is nothing to give back
    std::string vf_dir = svm::path_join(tmp.path(), "vf");
    cfg.devices = svm::json_parse(R"({"vf_state_dir": ")" + vf_dir + R"("})", "devices");
    svm::mkdir_p(vf_dir, 0700);
    std::string pool = svm::path_join(vf_dir, "pool.json");
    svm::write_file_atomic(pool,
                           R"({"0000:2b:00.1": {"index": 0, "job": "77", "pf": "0000:2b:00.0"},)"
                           R"( "0000:2b:00.2": {"index": 1, "job": "78", "pf": "0000:2b:00.0"}})",
                           0600);
    svm::UndoScope s{cfg, kJob};
    svm::undo_change(s, entry("vf_reservation", R"({"job": "77", "recorded_at": 1})"));
    svm::Json left = svm::json_load_file(pool);
    CHECK(json_object_size(left.get()) == 1);
    CHECK(json_object_get(left.get(), "0000:2b:00.2"));
    svm::undo_change(s, entry("vfio_bind", R"({"device": "0000:3b:00.0", "iommu_group": 7, "original_driver":)"
                                           R"( "nvidia", "original_override": "", "target_driver": "vfio-pci"})"));
    svm::undo_change(s, {"vf_config", svm::VfConfigRecord{svm::PciAddress::parse("0000:2b:00.0"),
                                                          0,
                                                          svm::PciAddress::parse("0000:2b:00.1"),
                                                          "ethernet",
                                                          {{"mac", "02:00:00:00:00:01"}},
                                                          {{"mac", "00:00:00:00:00:00"}}}
                                          .to_json()});
    // Strict like every record: named.
    CHECK(svm::test::reason_of([&] {
              svm::undo_change(s, entry("vf_reservation", R"({"job": "78", "pf": "0000:2b:00.0"})"));
          }) == "ledger record \"vf_reservation\": unknown key \"pf\" (written by a newer release?)");
    // The pool's own state, root's file, read as strictly.
    svm::write_file_atomic(pool, R"({"0000:2b:00.2": {"index": 1, "job": "78"}})", 0600);
    CHECK(svm::test::reason_of([&] { svm::undo_change(s, entry("vf_reservation", R"({"job": "78"})")); }) ==
          pool + ": 0000:2b:00.2: \"pf\" is missing");
}
