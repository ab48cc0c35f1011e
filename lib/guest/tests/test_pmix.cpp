// srun --mpi=pmix: what a task's PMIx environment becomes in the guest.
#include "catch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "error.hpp"
#include "guest_exec.hpp"
#include "pmix.hpp"
#include "proc.hpp"
#include "support.hpp"

using Env = std::vector<std::string>;

namespace {

// What Slurm 22.05's mpi/pmix_v4 gives a task (seen in the test cluster).
Env slurm_pmix_env(const std::string& uri = "pmix-server.4208;tcp4://127.0.0.1:38309",
                   const std::string& spool = "/var/spool/slurmd") {
    return {"SLURM_MPI_TYPE=pmix",
            "SLURM_JOB_ID=2175",
            "SLURM_STEP_ID=0",
            "PMIX_NAMESPACE=slurm.pmix.2175.0",
            "PMIX_RANK=1",
            "PMIX_SERVER_URI2=" + uri,
            "PMIX_SERVER_URI21=" + uri,
            "PMIX_SERVER_URI3=" + uri,
            "PMIX_SERVER_URI4=" + uri,
            "PMIX_SERVER_URI41=" + uri,
            "PMIX_SECURITY_MODE=munge,native",
            "PMIX_GDS_MODULE=ds21,ds12,hash",
            "PMIX_SERVER_TMPDIR=" + spool + "/pmix.2175.0/",
            "PMIX_DSTORE_21_BASE_PATH=" + spool + "/pmix.2175.0//pmix_dstor_ds21_4208",
            "PMIX_SYSTEM_TMPDIR=/tmp",
            "PMIX_VERSION=4.2.2",
            "PMIX_HOSTNAME=node1"};
}

// A node's spool with the step's PMIx directory, as slurmstepd makes it:
// root's, written by no one else, holding the user's pmix.2175.0.
struct Spool {
    svm::test::TempDir tmp{"svm-pmix"};
    std::string dir = tmp.path() + "/pmix.2175.0";
    Spool() { REQUIRE(::mkdir(dir.c_str(), 0700) == 0); }
    Env env(const std::string& uri = "pmix-server.4208;tcp4://127.0.0.1:38309") const {
        return slurm_pmix_env(uri, tmp.path());
    }
};

}  // namespace

TEST_CASE("a PMIx server URI on the loopback gives its port, any other none", "[pmix]") {
    CHECK(svm::pmix_loopback_port("pmix-server.1;tcp4://127.0.0.1:38309") == 38309);
    CHECK(svm::pmix_loopback_port("pmix-server.1;tcp://127.0.0.1:1") == 1);
    for (const char* bad : {"pmix-server.1;tcp4://10.0.0.1:38309", "pmix-server.1;tcp4://127.0.0.1:",
                            "pmix-server.1;tcp4://127.0.0.1:65536", "pmix-server.1;tcp4://127.0.0.1:0",
                            "pmix-server.1;tcp4://127.0.0.1:123456", "pmix-server.1;tcp4://127.0.0.1:80x",
                            "tcp4://127.0.0.1:38309", "pmix-server.1;usock:/tmp/x", "", ";"})
        CHECK(svm::pmix_loopback_port(bad) == 0);
}

TEST_CASE("a PMIx step gives its server's port and the step's directory", "[pmix]") {
    Spool spool;
    auto s = svm::pmix_step(spool.env());
    REQUIRE(s);
    CHECK(s->port == 38309);
    CHECK(s->tmpdir == spool.dir);
    CHECK_FALSE(svm::pmix_step({"SLURM_MPI_TYPE=none", "SLURM_JOB_ID=1"}));
    CHECK_FALSE(svm::pmix_step({"SLURM_JOB_ID=1"}));
}

TEST_CASE("what cannot reach a guest is refused with one sentence", "[pmix]") {
    CHECK_THROWS_AS(svm::pmix_step({"SLURM_MPI_TYPE=pmi2", "PMI_FD=5"}), svm::UserError);
    CHECK_THROWS_WITH(svm::pmix_step({"SLURM_MPI_TYPE=pmi2"}), Catch::Contains("use --mpi=pmix"));
    Spool spool;
    Env two_ports = spool.env();
    two_ports.push_back("PMIX_SERVER_URI5=pmix-server.4208;tcp4://127.0.0.1:1000");
    CHECK_THROWS_AS(svm::pmix_step(two_ports), svm::UserError);
    CHECK_THROWS_AS(svm::pmix_step(spool.env("pmix-server.4208;tcp4://192.168.1.2:38309")), svm::UserError);
    Env no_dir = spool.env();
    no_dir.erase(std::remove_if(no_dir.begin(), no_dir.end(),
                                [](const std::string& kv) { return kv.rfind("PMIX_SERVER_TMPDIR=", 0) == 0; }),
                 no_dir.end());
    CHECK_THROWS_WITH(svm::pmix_step(no_dir), Catch::Contains("PMIX_SERVER_TMPDIR"));
}

// srun --mpi=none --export=ALL,PMIX_NAMESPACE=x,PMIX_SERVER_URI4='x;tcp4://
// 127.0.0.1:PORT',PMIX_SERVER_TMPDIR=DIR: no server, and the forward would
// give the guest any port of the host's loopback (another job's PMIx server).
TEST_CASE("PMIx variables that name no PMIx directory of the step's are refused", "[pmix]") {
    Spool spool;
    auto refused = [](const Env& env) {
        CHECK_THROWS_WITH(svm::pmix_step(env), Catch::Contains("do not name its own PMIx server"));
    };
    std::string mine = spool.tmp.path() + "/mine";
    REQUIRE(::mkdir(mine.c_str(), 0700) == 0);
    refused(slurm_pmix_env("x;tcp4://127.0.0.1:22", mine));  // no pmix.2175.0 there
    Env lie = {"SLURM_MPI_TYPE=none",
               "SLURM_JOB_ID=2175",
               "SLURM_STEP_ID=0",
               "PMIX_NAMESPACE=x",
               "PMIX_SERVER_URI4=x;tcp4://127.0.0.1:22",
               "PMIX_SERVER_TMPDIR=" + mine};
    refused(lie);
    // Another step's directory, a link named as the step's, a parent others write.
    Env other = spool.env();
    std::replace(other.begin(), other.end(), std::string("SLURM_STEP_ID=0"), std::string("SLURM_STEP_ID=1"));
    refused(other);
    std::string link_parent = spool.tmp.path() + "/links";
    REQUIRE(::mkdir(link_parent.c_str(), 0755) == 0);
    REQUIRE(::symlink(spool.dir.c_str(), (link_parent + "/pmix.2175.0").c_str()) == 0);
    refused(slurm_pmix_env("pmix-server.4208;tcp4://127.0.0.1:38309", link_parent));
    REQUIRE(::chmod(spool.tmp.path().c_str(), 01777) == 0);
    refused(spool.env());
    REQUIRE(::chmod(spool.tmp.path().c_str(), 0755) == 0);
    CHECK(svm::pmix_step(spool.env()));
}

TEST_CASE("the guest's client gets the task's identity, native security and the hash store", "[pmix]") {
    svm::GuestCommand c;
    c.argv = {"sh", "-c", "env"};
    c.env = slurm_pmix_env();
    c.settings = svm::pmix_guest_settings();
    auto r = svm::run({"/usr/bin/env", "-i", "/bin/sh", "-c", svm::remote_shell_command(c)});
    REQUIRE(r.ok());
    std::string out = "\n" + r.out;
    auto has = [&](const std::string& kv) { return out.find("\n" + kv + "\n") != std::string::npos; };
    CHECK(has("PMIX_NAMESPACE=slurm.pmix.2175.0"));
    CHECK(has("PMIX_RANK=1"));
    CHECK(has("PMIX_SERVER_URI4=pmix-server.4208;tcp4://127.0.0.1:38309"));
    CHECK(has("PMIX_SERVER_URI41=pmix-server.4208;tcp4://127.0.0.1:38309"));
    CHECK(has("PMIX_SECURITY_MODE=native"));
    CHECK(has("PMIX_GDS_MODULE=hash"));
    CHECK(has("PMIX_SYSTEM_TMPDIR=/tmp"));
    // The host's stores and directories stay on the host.
    CHECK(out.find("PMIX_SERVER_TMPDIR") == std::string::npos);
    CHECK(out.find("PMIX_DSTORE") == std::string::npos);
    CHECK(out.find("munge") == std::string::npos);
}

TEST_CASE("the step's forward is one remote forward of the same port, backgrounded once made", "[pmix]") {
    auto o = svm::pmix_forward_options(38309);
    CHECK(std::find(o.begin(), o.end(), "127.0.0.1:38309:127.0.0.1:38309") != o.end());
    CHECK(std::find(o.begin(), o.end(), "ExitOnForwardFailure=yes") != o.end());
    CHECK(std::find(o.begin(), o.end(), "-f") != o.end());
    CHECK(std::find(o.begin(), o.end(), "-N") != o.end());
    CHECK(std::find(o.begin(), o.end(), "-E") == o.end());  // no file the guest's session could fill
}
