// The srun relay's protocol end to end on this host: the guest's shim (bash,
// /dev/tcp) talks through a TCP port (socat stands in for ssh -R) to the
// relay, which runs the `srun` found in PATH. Here that is a script showing
// what it got; the cluster test (test_srun_batch.sh) uses Slurm's.
#include "catch.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "fs.hpp"
#include "proc.hpp"
#include "srun_relay.hpp"

TEST_CASE("srun in the guest runs through the relay: arguments, directory, output, status", "[srun]") {
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
