#include <string>

#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"
#include "seed_iso.hpp"
#include "support.hpp"

// What other readers of ISO 9660 and Rock Ridge make of the image: isoinfo
// (from genisoimage) and blkid. The guests' kernels read it in every cluster
// test (cloud-init's NoCloud in test_stock_images).
TEST_CASE("the seed image: names, modes, contents and label as other readers see them", "[seed]") {
    std::string several_sectors(5000, 'x');
    several_sectors.back() = '\n';
    svm::test::TempDir d("svm-iso");
    std::string iso = svm::path_join(d.path(), "seed.iso");
    svm::write_file_atomic(iso,
                           svm::iso9660_image("cidata", {{"user-data", "#cloud-config\nhello: 1\n"},
                                                         {"network-config", several_sectors},
                                                         {"meta-data", "instance-id: i-1\n"},
                                                         {"empty", ""}}),
                           0600);
    auto list = svm::run({"isoinfo", "-R", "-f", "-i", iso});
    REQUIRE(list.status == 0);
    CHECK(list.out == "/empty\n/meta-data\n/network-config\n/user-data\n");
    auto x = [&](const std::string& f) { return svm::run({"isoinfo", "-R", "-x", f, "-i", iso}).out; };
    CHECK(x("/user-data") == "#cloud-config\nhello: 1\n");
    CHECK(x("/meta-data") == "instance-id: i-1\n");
    CHECK(x("/network-config") == several_sectors);
    CHECK(x("/empty").empty());
    auto modes = svm::run({"isoinfo", "-R", "-l", "-i", iso}).out;
    CHECK(modes.find("-r--r--r--   1    0    0              17 ") != std::string::npos);
    CHECK(modes.find("dr-xr-xr-x") != std::string::npos);
    // busybox's findfs (our test image's init) reads 68 KiB before it looks.
    CHECK(svm::read_file(iso).size() >= 0x11000);
    auto blkid = svm::run({"blkid", "-p", "-o", "export", iso});
    CHECK(blkid.out.find("TYPE=iso9660\n") != std::string::npos);
    CHECK(blkid.out.find("LABEL=cidata\n") != std::string::npos);
}

TEST_CASE("the seed image refuses names it cannot hold", "[seed]") {
    CHECK_THROWS_AS(svm::iso9660_image("cidata", {{"a/b", "x"}}), svm::Error);
    CHECK_THROWS_AS(svm::iso9660_image("cidata", {{"", "x"}}), svm::Error);
    CHECK_THROWS_AS(svm::iso9660_image("cidata", {{"user-data", "x"}, {"USER_DATA", "y"}}), svm::Error);
    CHECK_THROWS_AS(svm::iso9660_image("ci data", {{"user-data", "x"}}), svm::Error);
    CHECK_NOTHROW(svm::iso9660_image("cidata", {{"user-data", "x"}}));
}
