#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "catch.hpp"

#include "fs.hpp"
#include "support.hpp"
#include "user_open.hpp"

namespace {

const svm::Credentials kNobody{65534, 65534, {65534}, "nobody"};

std::vector<svm::UserOpen> paths(const std::vector<std::pair<std::string, svm::UserOpen::Kind>>& list) {
    std::vector<svm::UserOpen> out(list.size());
    for (size_t i = 0; i < list.size(); ++i) out[i].path = list[i].first, out[i].kind = list[i].second;
    return out;
}

}  // namespace

TEST_CASE("open_as_user opens with the user's rights and groups alone, and leaves this process as it was", "[proc]") {
    if (::geteuid() != 0) {
        WARN("skipped: needs root (it becomes another user)");
        return;
    }
    auto how = GENERATE(svm::Opener::shared, svm::Opener::forked);
    svm::test::TempDir tmp("svm-uopen");
    std::string d = tmp.path();
    ::chmod(d.c_str(), 0755);
    std::string readable = svm::path_join(d, "readable"), secret = svm::path_join(d, "secret"),
                fifo = svm::path_join(d, "fifo"), sub = svm::path_join(d, "sub");
    svm::write_file_atomic(readable, "open to all", 0644);
    svm::write_file_atomic(secret, "root's", 0600);  // root reads it; nobody may not
    REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
    REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
    REQUIRE(::chown(sub.c_str(), 65534, 65534) == 0);

    // Another thread of ours: glibc's set*id would change it too.
    std::atomic<bool> stop{false};
    std::atomic<long> other_euid{-1};
    std::thread other([&] {
        while (!stop) std::this_thread::yield();
        other_euid = ::syscall(SYS_geteuid);
    });
    int dumpable = ::prctl(PR_GET_DUMPABLE);

    using K = svm::UserOpen::Kind;
    using F = svm::UserOpen::Failed;
    auto f = paths({{readable, K::file},
                    {secret, K::file},
                    {fifo, K::file},
                    {svm::path_join(d, "missing"), K::file},
                    {sub, K::directory},
                    {readable, K::directory}});
    REQUIRE(svm::open_as_user(kNobody, f, 10000, how));
    stop = true;
    other.join();

    CHECK(f[0].failed == F::none);
    REQUIRE(f[0].fd);
    char buf[32] = {};
    CHECK(::read(f[0].fd.get(), buf, sizeof buf) == 11);
    CHECK(std::string(buf) == "open to all");
    CHECK(f[0].st.st_size == 11);
    // Root's rights (CAP_DAC_OVERRIDE) did not come along.
    CHECK(f[1].failed == F::open);
    CHECK(f[1].err == EACCES);
    CHECK(!f[1].fd);
    // Not opened: not a regular file.
    CHECK(f[2].failed == F::not_regular);
    CHECK(S_ISFIFO(f[2].st.st_mode));
    CHECK(!f[2].fd);
    CHECK(f[3].failed == F::stat);
    CHECK(f[3].err == ENOENT);
    CHECK(f[4].failed == F::none);
    REQUIRE(f[4].fd);
    CHECK(f[4].st.st_uid == 65534);
    CHECK(S_ISDIR(f[4].st.st_mode));
    CHECK(f[5].failed == F::open);
    CHECK(f[5].err == ENOTDIR);

    // This process: still root in every thread, dumpable as before.
    CHECK(::geteuid() == 0);
    CHECK(::syscall(SYS_getuid) == 0);
    CHECK(other_euid == 0);
    CHECK(::prctl(PR_GET_DUMPABLE) == dumpable);

    // The user's supplementary groups, and only those.
    std::string grp = svm::path_join(d, "group-readable");
    svm::write_file_atomic(grp, "x", 0640);
    REQUIRE(::chown(grp.c_str(), 0, 4242) == 0);
    auto with = paths({{grp, K::file}});
    REQUIRE(svm::open_as_user(svm::Credentials{65534, 65534, {65534, 4242}, ""}, with, 10000, how));
    CHECK(with[0].failed == F::none);
    auto without = paths({{grp, K::file}});
    REQUIRE(svm::open_as_user(kNobody, without, 10000, how));
    CHECK(without[0].failed == F::open);
    CHECK(without[0].err == EACCES);
}
