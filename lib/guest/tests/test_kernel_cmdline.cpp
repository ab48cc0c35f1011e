// --vm-cmdline's bound (lib/guest/kernel_cmdline.hpp): the prolog checks it
// again, since the submit side is the user's.
#include <string>

#include "catch.hpp"

#include "kernel_cmdline.hpp"

using namespace svm;

TEST_CASE("a kernel command line is one printable line the kernel can take", "[cmdline]") {
    CHECK_NOTHROW(require_kernel_cmdline(""));
    CHECK_NOTHROW(require_kernel_cmdline("root=/dev/vda1 rw console=ttyS0 quiet"));
    CHECK_NOTHROW(require_kernel_cmdline(std::string(kMaxKernelCmdline, 'x')));
    CHECK_THROWS_WITH(require_kernel_cmdline(std::string(kMaxKernelCmdline + 1, 'x')),
                      Catch::Contains("longer than the kernel takes (2047)"));
    CHECK_THROWS_WITH(require_kernel_cmdline(std::string(64 << 20, 'x')), Catch::Contains("67108864 bytes"));
    CHECK_THROWS_WITH(require_kernel_cmdline("quiet\ninit=/bin/sh"), Catch::Contains("single line"));
    CHECK_THROWS_WITH(require_kernel_cmdline("quiet\x1b[2J"), Catch::Contains("single line"));
}
