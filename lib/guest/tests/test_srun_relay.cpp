// The srun relay's protocol end to end on this host: the guest's shim (bash,
// /dev/tcp) talks through a TCP port (socat stands in for ssh -R) to the
// relay, which runs the `srun` found in PATH. Here that is a script showing
// what it got; the cluster test (test_srun_batch.sh) uses Slurm's.
#include "catch.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "fs.hpp"
#include "proc.hpp"
#include "srun_relay.hpp"

TEST_CASE("srun in the guest runs through the relay: arguments, directory, output, status", "[srun][threads]") {
    REQUIRE(svm::run({"sh", "-c", "command -v socat && command -v bash"}).ok());
    std::string dir = svm::run_checked({"mktemp", "-d", "/tmp/svm-srun-test.XXXXXX"});
    dir = svm::trim(dir);
    svm::mkdir_p(dir + "/bin");
    svm::mkdir_p(dir + "/work dir");
    svm::write_file_atomic(dir + "/bin/srun",
                           "#!/bin/sh\necho \"pwd=$(pwd) plan=${SLURM_VM_PLAN:-unset} "
                           "job=${SLURM_JOB_ID:-unset}\"\nfor a in \"$@\"; do echo \"arg=[$a]\"; done\n"
                           "echo to-stderr >&2\nexit 5\n",
                           0755);
    svm::write_file_atomic(dir + "/shim", svm::guest_srun_shim(), 0755);
    std::string old_path = getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin";
    setenv("PATH", (dir + "/bin:" + old_path).c_str(), 1);
    // The batch step's environment goes to srun, less the plugin's own variables.
    setenv("SLURM_VM_PLAN", "/plan.json", 1);
    setenv("SLURM_JOB_ID", "77", 1);
    {
        svm::SrunRelay relay(dir, dir + "/bin/srun");
        relay.start();
        int port = 20000 + static_cast<int>(::getpid() % 20000);
        svm::RunOptions bg;
        bg.timeout_ms = 30000;
        std::thread bridge([&] {
            svm::run({"timeout", "20", "socat", "TCP-LISTEN:" + std::to_string(port) + ",bind=127.0.0.1,reuseaddr,fork",
                      "UNIX-CONNECT:" + relay.socket_path()},
                     bg);
        });
        for (int i = 0; i < 50; ++i) {
            if (svm::run({"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port)}).ok()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        svm::RunOptions o;
        o.env = {"PATH=/usr/bin:/bin", "SLURM_VM_SRUN_PORT=" + std::to_string(port)};
        o.cwd = dir + "/work dir";
        auto r = svm::run({"bash", dir + "/shim", "-N2", "echo", "a b", "it's"}, o);
        CHECK(r.status == 5);
        CHECK(r.out == "pwd=" + dir + "/work dir plan=unset job=77\narg=[-N2]\narg=[echo]\narg=[a b]\narg=[it's]\n");
        CHECK(r.err == "to-stderr\n");
        svm::run({"pkill", "-f", "TCP-LISTEN:" + std::to_string(port)});
        bridge.join();
    }
    setenv("PATH", old_path.c_str(), 1);
    unsetenv("SLURM_VM_PLAN");
    unsetenv("SLURM_JOB_ID");
    // Without a relay the shim says where srun works.
    svm::RunOptions o;
    o.env = {"PATH=/usr/bin:/bin"};
    auto r = svm::run({"bash", dir + "/shim", "hostname"}, o);
    CHECK(r.status == 1);
    CHECK(r.err.find("srun works from the batch script of a VM job") != std::string::npos);
    svm::remove_tree(dir);
}

namespace {
int connect_unix(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

std::string read_line(int fd) {
    std::string out;
    char c;
    while (::read(fd, &c, 1) == 1 && c != '\n') out += c;
    return out;
}

size_t threads_now() { return svm::list_dir("/proc/self/task").size(); }
}  // namespace

TEST_CASE("the srun relay keeps at most its bound of connections and no thread of an ended one", "[srun][threads]") {
    std::string dir = svm::trim(svm::run_checked({"mktemp", "-d", "/tmp/svm-srun-test.XXXXXX"}));
    {
        svm::SrunRelay relay(dir, "/bin/false");
        relay.start();
        size_t before = threads_now();
        // Thousands of connections one after the other (a guest running srun
        // after srun): each ends, and its thread with it.
        for (int i = 0; i < 2000; ++i) {
            int fd = connect_unix(relay.socket_path());
            REQUIRE(fd >= 0);
            REQUIRE(::write(fd, "NOPE\n", 5) == 5);
            CHECK(read_line(fd).rfind("ERR ", 0) == 0);
            ::close(fd);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        CHECK(threads_now() <= before + svm::kMaxRelayConnections);
        // Connections that send nothing: the bound's worth are held, the next
        // one is refused at once with one line.
        std::vector<int> held;
        for (size_t i = 0; i < svm::kMaxRelayConnections; ++i) held.push_back(connect_unix(relay.socket_path()));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        int extra = connect_unix(relay.socket_path());
        REQUIRE(extra >= 0);
        CHECK(read_line(extra).find("connections to the srun relay open already") != std::string::npos);
        ::close(extra);
        CHECK(threads_now() <= before + svm::kMaxRelayConnections + 1);
        for (int fd : held) ::close(fd);
        // Their threads end with them, and the relay takes connections again.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        int again = connect_unix(relay.socket_path());
        REQUIRE(again >= 0);
        REQUIRE(::write(again, "NOPE\n", 5) == 5);
        CHECK(read_line(again).rfind("ERR ", 0) == 0);
        ::close(again);
    }
    svm::run({"rm", "-rf", dir});
}

TEST_CASE("a connection still open when the relay goes is answered without it", "[srun][threads]") {
    std::string dir = svm::trim(svm::run_checked({"mktemp", "-d", "/tmp/svm-srun-test.XXXXXX"}));
    int fd = -1;
    {
        svm::SrunRelay relay(dir, "/bin/false");
        relay.start();
        fd = connect_unix(relay.socket_path());
        REQUIRE(fd >= 0);
        // Its thread waits for the request; the relay ends first (the
        // guest's job is over) and leaves that thread.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // The request comes after: the thread looks the token up in what it
    // holds (not in the relay, which is gone: ASan and TSan would say so),
    // finds nothing and closes the connection.
    const char wait[] = "WAIT 0123456789abcdef\n";
    REQUIRE(::write(fd, wait, sizeof wait - 1) == static_cast<ssize_t>(sizeof wait - 1));
    CHECK(read_line(fd).empty());
    ::close(fd);
    svm::run({"rm", "-rf", dir});
}
