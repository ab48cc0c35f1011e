// The job group's ACL entry on a device node: granted, seen by the kernel's
// own permission check for an identity with that group, and taken back
// without touching the site's other entries or mode.
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <vector>

#include "catch.hpp"

#include "dev_acl.hpp"
#include "doctor.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "support.hpp"
#include "vm_job.hpp"

namespace {
constexpr uid_t kNobodyish = 65534;
constexpr gid_t kJobGid = 0x70000000u + 42;
constexpr gid_t kOtherJobGid = 0x70000000u + 43;

// A stand-in for /dev/kvm in `dir`.
std::string temp_device_stand_in(const svm::test::TempDir& dir) {
    std::string f = svm::path_join(dir.path(), "kvm");
    svm::write_file_atomic(f, "", 0600);  // like /dev/kvm on a node without udev rules
    return f;
}
}  // namespace

TEST_CASE("a job's group gets read/write on a 0600 device node and loses it again") {
    REQUIRE(geteuid() == 0);  // the unit tests run as root (they change identity)
    svm::test::TempDir tmp("svm-acl");
    std::string dev = temp_device_stand_in(tmp);
    CHECK_FALSE(svm::accessible_rw_as(dev, kNobodyish, kJobGid));

    svm::grant_group_rw(dev, kJobGid);
    CHECK(svm::has_group_entry(dev, kJobGid));
    CHECK(svm::accessible_rw_as(dev, kNobodyish, kJobGid));
    CHECK_FALSE(svm::accessible_rw_as(dev, kNobodyish, kOtherJobGid));  // another job's group: no

    svm::grant_group_rw(dev, kOtherJobGid);
    CHECK(svm::revoke_group(dev, kJobGid));  // there was one to remove
    CHECK_FALSE(svm::accessible_rw_as(dev, kNobodyish, kJobGid));
    CHECK(svm::accessible_rw_as(dev, kNobodyish, kOtherJobGid));  // the other job keeps its entry

    svm::revoke_group(dev, kOtherJobGid);
    CHECK_FALSE(svm::has_group_entry(dev, kOtherJobGid));
    // Back to a minimal ACL: no xattr, the mode as the site set it.
    CHECK(getxattr(dev.c_str(), "system.posix_acl_access", nullptr, 0) < 0);
    struct stat st;
    REQUIRE(stat(dev.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);

    CHECK_FALSE(svm::revoke_group(dev, kJobGid));  // idempotent: nothing to remove
    svm::remove_tree(tmp.path());
    svm::revoke_group(dev, kJobGid);  // the device is gone: nothing to do
}

TEST_CASE("doctor's kvm check: ACL entries work, an open device warns, an absent one fails for KVM guests") {
    REQUIRE(geteuid() == 0);
    svm::test::TempDir tmp("svm-acl");
    std::string dev = temp_device_stand_in(tmp);
    svm::NodeConfig cfg;
    cfg.kvm_device = dev;
    auto one = [&] {
        auto r = svm::check_kvm_access(cfg);
        REQUIRE(r.size() == 1);
        return r[0];
    };
    CHECK(one().status == svm::CheckStatus::ok);
    CHECK_FALSE(svm::has_group_entry(dev, cfg.job_gid(0)));  // the check leaves nothing behind
    REQUIRE(chmod(dev.c_str(), 0666) == 0);
    CHECK(one().status == svm::CheckStatus::warn);
    svm::remove_tree(tmp.path());
    cfg.domain_type = "kvm";
    CHECK(one().status == svm::CheckStatus::fail);
    cfg.domain_type = "qemu";
    CHECK(one().status == svm::CheckStatus::ok);
}

TEST_CASE("jobs granting and revoking on one device at once lose no entry") {
    REQUIRE(geteuid() == 0);
    svm::test::TempDir tmp("svm-acl");
    std::string dev = temp_device_stand_in(tmp);
    // Each process is a job that keeps its entry, while it grants and
    // revokes a second one over and over (other jobs starting and ending).
    constexpr int kJobs = 6;
    std::vector<pid_t> kids;
    for (int j = 0; j < kJobs; ++j) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int rc = 0;
            try {
                svm::grant_group_rw(dev, kJobGid + 100 + static_cast<gid_t>(j));
                for (int k = 0; k < 40; ++k) {
                    svm::grant_group_rw(dev, kJobGid + 200 + static_cast<gid_t>(j));
                    svm::revoke_group(dev, kJobGid + 200 + static_cast<gid_t>(j));
                }
            } catch (...) {
                rc = 1;
            }
            _exit(rc);
        }
        kids.push_back(pid);
    }
    for (pid_t pid : kids) {
        int st = 0;
        REQUIRE(waitpid(pid, &st, 0) == pid);
        CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    }
    for (int j = 0; j < kJobs; ++j) {
        INFO("job " << j);
        CHECK(svm::has_group_entry(dev, kJobGid + 100 + static_cast<gid_t>(j)));
        CHECK_FALSE(svm::has_group_entry(dev, kJobGid + 200 + static_cast<gid_t>(j)));
    }
}

TEST_CASE("the job groups' entries on a node's device nodes are listed, the site's own are not") {
    REQUIRE(geteuid() == 0);
    svm::test::TempDir tmp("svm-acl-list");
    svm::NodeConfig cfg;
    cfg.sysfs_root = tmp.path();
    cfg.kvm_device = temp_device_stand_in(tmp);
    svm::mkdir_p(svm::path_join(tmp.path(), "dev/vfio"), 0755);
    std::string group7 = svm::path_join(tmp.path(), "dev/vfio/7");
    svm::write_file_atomic(group7, "", 0600);
    svm::write_file_atomic(svm::path_join(tmp.path(), "dev/vfio/vfio"), "", 0666);  // the container: not a group

    svm::grant_group_rw(cfg.kvm_device, kJobGid);
    svm::grant_group_rw(cfg.kvm_device, 1234);  // a site's group: not a job's
    svm::grant_group_rw(group7, kOtherJobGid);
    auto grants = svm::device_grants_on_node(cfg);
    REQUIRE(grants.size() == 2);
    CHECK(grants[0].path == cfg.kvm_device);
    CHECK(grants[0].job_id == 42);
    CHECK(grants[1].path == group7);
    CHECK(grants[1].job_id == 43);
    CHECK(cfg.job_of_gid(1234) == std::nullopt);

    svm::revoke_group(cfg.kvm_device, kJobGid);
    svm::revoke_group(group7, kOtherJobGid);
    CHECK(svm::device_grants_on_node(cfg).size() == 0);
    CHECK(svm::has_group_entry(cfg.kvm_device, 1234));  // the site's entry stays
}
