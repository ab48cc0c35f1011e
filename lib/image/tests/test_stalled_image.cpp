// An image on a file system that stops answering: root's prolog reads the
// image's header only through a child of the user's, killed at the
// deadline, so it returns in time with one sentence. The file system is a
// real FUSE mount (tests/fixtures/stall_fs.py) whose reads never return.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "catch.hpp"

#include "error.hpp"
#include "image_check.hpp"
#include "support.hpp"
#include "user_open.hpp"

namespace {

// The stalling file system, mounted at dir while this lives.
struct StallFs {
    std::string dir;
    pid_t pid = -1;
    explicit StallFs(const std::string& d, const char* mode = "read") : dir(d) {
        int p[2];
        REQUIRE(::pipe(p) == 0);
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::dup2(p[1], 1);
            ::execlp("python3", "python3", SVM_SOURCE_DIR "/tests/fixtures/stall_fs.py", dir.c_str(), "4194304", mode,
                     nullptr);
            _exit(127);
        }
        ::close(p[1]);
        char buf[8] = {};
        ssize_t n = ::read(p[0], buf, 5);
        ::close(p[0]);
        REQUIRE(n == 5);  // "ready"
    }
    ~StallFs() {
        ::kill(pid, SIGKILL);  // the kernel fails the reads still waiting
        ::waitpid(pid, nullptr, 0);
        ::umount2(dir.c_str(), MNT_DETACH);
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {  // the readers left behind, now ended
        }
    }
};

bool can_mount_fuse() { return ::geteuid() == 0 && ::access("/dev/fuse", R_OK | W_OK) == 0; }

}  // namespace

TEST_CASE("an image whose reads never return is refused within the deadline, in one sentence", "[image][stall]") {
    if (!can_mount_fuse()) FAIL("needs root and /dev/fuse (it mounts the stalling file system)");
    svm::test::TempDir tmp("svm-stall");
    StallFs fs(tmp.path());
    const std::string img = tmp.path() + "/img";
    svm::ImagePolicy policy;
    policy.qemu_img_timeout_ms = 1000;
    svm::Credentials nobody = svm::credentials_for(65534);
    auto t0 = std::chrono::steady_clock::now();
    std::string reason;
    try {
        svm::open_image_as_user(img, nobody, policy);
    } catch (const svm::Error& e) {
        reason = e.reason();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(reason);
    CHECK(reason == img + " could not be read by user nobody within 1 s; check that its file system responds");
    // The deadline, the grace to reap a killed reader and a fork or two.
    CHECK(s < 1.0 + 2.0 + 1.0);
}

TEST_CASE("the header is read through the deadline's child with the user's rights", "[image][stall]") {
    if (::geteuid() != 0) FAIL("needs root (it becomes another user)");
    svm::test::TempDir tmp("svm-look");
    const std::string img = tmp.path() + "/img";
    svm::write_file_atomic(img, std::string(4096, 'a') + std::string(512, 'z'), 0600);  // root's alone
    svm::UniqueFd fd(::open(img.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    svm::ImageLook self = svm::look_at_image(fd.get(), std::nullopt, 1000, img);
    CHECK(self.head.size() == 4608);
    CHECK(self.tail == std::vector<uint8_t>(512, 'z'));
    svm::ImageLook user = svm::look_at_image(fd.get(), svm::credentials_for(65534), 1000, img);
    CHECK(user.head == self.head);  // the descriptor, not the path: nobody reads it through root's opening
    CHECK(user.tail == self.tail);
    CHECK(user.st.st_ino == self.st.st_ino);
    CHECK(svm::look_at_image(fd.get(), svm::credentials_for(65534), 1000, img, false).head.empty());
}

TEST_CASE("a path whose lookup never returns: the opener is given up on in time, either kind", "[image][stall]") {
    if (!can_mount_fuse()) FAIL("needs root and /dev/fuse (it mounts the stalling file system)");
    svm::Credentials nobody = svm::credentials_for(65534);
    for (svm::Opener how : {svm::Opener::shared, svm::Opener::forked}) {
        svm::test::TempDir tmp("svm-stall");
        StallFs fs(tmp.path(), "lookup");
        std::vector<svm::UserOpen> f(1);
        f[0].path = tmp.path() + "/img";
        auto t0 = std::chrono::steady_clock::now();
        CHECK_FALSE(svm::open_as_user(nobody, f, 1000, how));
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK(s < 1.0 + 2.0 + 1.0);  // the deadline, the grace to reap, a fork
        CHECK_FALSE(f[0].fd);
    }
    svm::test::TempDir tmp("svm-stall");
    StallFs fs(tmp.path(), "lookup");
    std::string reason;
    try {
        svm::ImagePolicy policy;
        policy.qemu_img_timeout_ms = 1000;
        svm::open_image_as_user(tmp.path() + "/img", nobody, policy);
    } catch (const svm::Error& e) {
        reason = e.reason();
    }
    CHECK(reason ==
          tmp.path() + "/img could not be opened by user nobody within 1 s; check that its file system responds");
}
