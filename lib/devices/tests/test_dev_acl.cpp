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
#include "error.hpp"
#include "fs.hpp"
#include "support.hpp"

namespace {
using svm::test::temp_device_stand_in;
constexpr uid_t kNobodyish = 65534;
constexpr gid_t kJobGid = 0x70000000u + 42;
constexpr gid_t kOtherJobGid = 0x70000000u + 43;
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
