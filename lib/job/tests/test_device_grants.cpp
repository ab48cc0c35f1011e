// Device node ACLs seen from the node's configuration: the doctor's kvm
// check and the job groups' entries listed on a node (devices/dev_acl.hpp).
#include <sys/stat.h>
#include <unistd.h>

#include "catch.hpp"

#include "dev_acl.hpp"
#include "doctor.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "support.hpp"
#include "vm_job.hpp"

namespace {
using svm::test::temp_device_stand_in;
constexpr gid_t kJobGid = 0x70000000u + 42;
constexpr gid_t kOtherJobGid = 0x70000000u + 43;
}  // namespace

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
