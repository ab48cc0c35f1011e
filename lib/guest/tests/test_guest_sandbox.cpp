// The guest's processes cannot make a file set-user-ID or set-group-ID: the
// filter is checked in a child (it stays with the process that loads it).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "catch.hpp"

#include "fs.hpp"
#include "guest_sandbox.hpp"
#include "support.hpp"

namespace {
// Runs fn in a child under the filter; its exit code.
template <class Fn>
int in_sandbox(Fn fn) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        try {
            svm::forbid_setid_bits();
        } catch (...) {
            _exit(99);
        }
        _exit(fn());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    REQUIRE(WIFEXITED(st));
    return WEXITSTATUS(st);
}
}  // namespace

TEST_CASE("under the guest sandbox no file becomes setuid or setgid, ordinary modes still work") {
    svm::test::TempDir tmp("svm-sandbox");
    std::string dir = tmp.path(), f = dir + "/f", g = dir + "/g";
    svm::write_file_atomic(f, "x", 0644);
    auto errno_of = [](int rc) { return rc == 0 ? 0 : errno; };
    CHECK(in_sandbox([&] { return errno_of(chmod(f.c_str(), 02755)); }) == EPERM);
    CHECK(in_sandbox([&] { return errno_of(chmod(f.c_str(), 04755)); }) == EPERM);
    CHECK(in_sandbox([&] { return errno_of(fchmodat(AT_FDCWD, f.c_str(), 06755, 0)); }) == EPERM);
    CHECK(in_sandbox([&] {
              int fd = open(f.c_str(), O_RDONLY);
              return errno_of(fchmod(fd, 02700));
          }) == EPERM);
    CHECK(in_sandbox([&] { return open(g.c_str(), O_CREAT | O_WRONLY, 02755) < 0 ? errno : 0; }) == EPERM);
    CHECK(in_sandbox([&] { return errno_of(mknod(g.c_str(), S_IFREG | 04644, 0)); }) == EPERM);
    struct stat st;
    REQUIRE(stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0644);
    CHECK_FALSE(svm::path_exists(g));
    // What QEMU and a share server do all day still works.
    CHECK(in_sandbox([&] { return errno_of(chmod(f.c_str(), 0750)); }) == 0);
    CHECK(in_sandbox([&] {
              int fd = open(g.c_str(), O_CREAT | O_WRONLY, 0640);
              return fd < 0 ? errno : 0;
          }) == 0);
    CHECK(in_sandbox([&] { return open(f.c_str(), O_RDONLY) < 0 ? errno : 0; }) == 0);
}
