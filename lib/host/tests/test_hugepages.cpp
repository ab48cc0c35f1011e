// Hugepage-backed guest memory (lib/host/hugepages.hpp): the free pages of
// the guest's NUMA node decide, on a temporary root.
#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "hugepages.hpp"
#include "support.hpp"

namespace {
using svm::test::HugeTree;
using svm::test::reason_of;

}  // namespace

TEST_CASE("hugepages: the free pages of the guest's NUMA node decide and memory is whole pages", "[placement]") {
    HugeTree t;
    svm::SysfsRoot root(t.root);
    t.proc("meminfo", "MemTotal:       65536000 kB\nHugepagesize:       2048 kB\n");
    t.proc("mounts", "proc /proc proc rw 0 0\nhugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n");
    t.pool(0, 2048, 4096, 4096);
    t.pool(1, 2048, 2048, 1000);
    t.pool(-1, 2048, 6144, 5096);
    CHECK(svm::default_hugepage_kib(root) == 2048);
    CHECK(svm::hugetlbfs_mounted(root, 2048));
    CHECK_FALSE(svm::hugetlbfs_mounted(root, 1048576));

    // Enough on node 0: 3001 MiB rounds down to 1500 pages of 2 MiB.
    auto b = svm::choose_memory_backing(root, "auto", 0, 0, 3001);
    CHECK(b.page_kib == 2048);
    CHECK(b.pages == 1500);
    CHECK(b.memory_mib == 3000);
    CHECK_THAT(b.note, Catch::Contains("1500 pages of 2048 KiB on NUMA node 0") &&
                           Catch::Contains("rounded down from 3001 MiB"));

    // Node 1 has 1000 free pages (2000 MiB): auto falls back and says why.
    b = svm::choose_memory_backing(root, "auto", 0, 1, 3000);
    CHECK(b.page_kib == 0);
    CHECK(b.memory_mib == 3000);
    CHECK(b.note == "normal pages: NUMA node 1 has 1000 free 2048 KiB hugepages and the guest needs 1500 (3000 MiB)");
    // ... and required refuses with the same facts.
    CHECK(reason_of([&] { svm::choose_memory_backing(root, "required", 0, 1, 3000); }) ==
          "hugepages are required by the node configuration, but NUMA node 1 has 1000 free 2048 KiB hugepages and "
          "the guest needs 1500 (3000 MiB)");

    // Not bound to a NUMA node: the system-wide pool.
    b = svm::choose_memory_backing(root, "required", 0, -1, 4096);
    CHECK(b.page_kib == 2048);
    CHECK(b.pages == 2048);

    // Off: never looks.
    b = svm::choose_memory_backing(root, "off", 0, 0, 3001);
    CHECK(b.page_kib == 0);
    CHECK(b.memory_mib == 3001);

    // 1 GiB pages: none offered, then offered but not mounted, then mounted.
    CHECK_THAT(reason_of([&] { svm::choose_memory_backing(root, "required", 1048576, 0, 8192); }),
               Catch::Contains("the kernel offers no 1 GiB hugepages on NUMA node 0"));
    t.pool(0, 1048576, 0, 0);
    CHECK_THAT(reason_of([&] { svm::choose_memory_backing(root, "required", 1048576, 0, 8192); }),
               Catch::Contains("no 1 GiB hugepages are reserved on NUMA node 0"));
    t.pool(0, 1048576, 16, 16);
    CHECK_THAT(reason_of([&] { svm::choose_memory_backing(root, "required", 1048576, 0, 8192); }),
               Catch::Contains("no hugetlbfs with 1 GiB pages is mounted"));
    t.proc("mounts",
           "hugetlbfs /dev/hugepages hugetlbfs rw,relatime 0 0\n"
           "none /dev/hugepages1G hugetlbfs rw,relatime,pagesize=1G 0 0\n");
    CHECK(svm::hugetlbfs_mounted(root, 2048));  // no pagesize=: the default size
    b = svm::choose_memory_backing(root, "required", 1048576, 0, 9000);
    CHECK(b.page_kib == 1048576);
    CHECK(b.pages == 8);
    CHECK(b.memory_mib == 8192);
    // Less than one page.
    CHECK(svm::choose_memory_backing(root, "auto", 1048576, 0, 512).note ==
          "normal pages: the guest's 512 MiB is less than one 1 GiB hugepage");
    CHECK_THROWS_AS(svm::choose_memory_backing(root, "sometimes", 0, 0, 512), svm::Error);
}

TEST_CASE("hugepages: a bare node without pools or mounts runs auto guests on normal pages", "[placement]") {
    HugeTree t;
    svm::SysfsRoot root(t.root);
    CHECK(svm::default_hugepage_kib(root) == 2048);  // no meminfo
    auto b = svm::choose_memory_backing(root, "auto", 0, 1, 1024);
    CHECK(b.page_kib == 0);
    CHECK_THAT(b.note, Catch::StartsWith("normal pages: the kernel offers no 2048 KiB hugepages on NUMA node 1"));
    CHECK_FALSE(svm::hugepage_setup_problem(root, 2048, -1).empty());
}
