// The keeper hands QEMU the image the prolog checked: reopened as the user
// and compared, so a path swapped after the check is refused, not opened.
#include <sys/stat.h>
#include <unistd.h>

#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "image_check.hpp"
#include "support.hpp"

TEST_CASE("reopening the checked image as the user: the same file passes, a swapped one is refused") {
    REQUIRE(geteuid() == 0);  // changes identity to open as the user
    svm::test::TempDir tmp("svm-reopen");
    std::string dir = tmp.path(), img = dir + "/img.raw";
    svm::write_file_atomic(img, std::string(4096, 'a'), 0644);
    struct stat st;
    REQUIRE(stat(img.c_str(), &st) == 0);
    svm::FileIdentity checked = svm::identity_of(st);
    svm::Credentials nobody = svm::credentials_for(65534);

    svm::UniqueFd fd = svm::reopen_checked_as_user(img, nobody, checked);
    CHECK(fd.get() >= 0);

    svm::write_file_atomic(img, std::string(4096, 'b'), 0644);  // a new file at the same path
    try {
        svm::reopen_checked_as_user(img, nobody, checked);
        FAIL("a swapped image was accepted");
    } catch (const svm::Error& e) {
        CHECK(std::string(e.what()).find("changed since the job started") != std::string::npos);
    }
    REQUIRE(chmod(img.c_str(), 0600) == 0);  // and one the user cannot read is refused as such
    CHECK_THROWS_AS(svm::open_file_as_user(img, nobody), svm::Error);
}
