// cgroup v1 and v2 against fake trees: a directory shaped like /sys/fs/cgroup
// and one like /proc (PID/cgroup), as Slurm's cgroup plugins leave them.
#include <unistd.h>

#include <chrono>
#include <thread>

#include "catch.hpp"

#include "cgroup.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace {

constexpr const char* kScope = "/system.slice/n1_slurmstepd.scope";
constexpr const char* kTask = "/system.slice/n1_slurmstepd.scope/job_42/step_extern/user/task_0";
constexpr const char* kStepd = "/system.slice/n1_slurmstepd.scope/job_42/step_extern/slurm";

// A temporary /sys/fs/cgroup and /proc; removed with the object.
struct FakeCgroups {
    std::string base = svm::trim(svm::run_checked({"mktemp", "-d", "/tmp/svm-cg.XXXXXX"}));
    std::string root = base + "/cgroup";
    std::string proc = base + "/proc";
    ~FakeCgroups() { svm::remove_tree(base); }

    // A cgroup directory with the interface files the kernel would make.
    void cgroup(const std::string& path, std::map<std::string, std::string> files = {}) {
        svm::mkdir_p(root + path);
        files.emplace("cgroup.procs", "");
        for (const auto& [name, text] : files) svm::write_file_atomic(root + path + "/" + name, text);
    }
    void process(int pid, const std::string& cgroup_file) {
        svm::mkdir_p(proc + "/" + std::to_string(pid));
        svm::write_file_atomic(proc + "/" + std::to_string(pid) + "/cgroup", cgroup_file);
    }
    std::string read(const std::string& path) { return svm::read_file(root + path); }
};

// Slurm's cgroup/v2 layout of job 42 on node n1 (multiple slurmd on a host:
// <node>_slurmstepd.scope): 4 CPUs and 2 GiB for the job, the extern step's
// sleep (pid 100) in task_0, its slurmstepd (pid 101) in slurm.
void slurm_v2_job(FakeCgroups& t) {
    t.cgroup("", {{"cgroup.controllers", "cpuset cpu io memory pids\n"}, {"cpuset.cpus.effective", "0-7\n"}});
    t.cgroup(kScope, {{"memory.max", "max\n"}, {"cpuset.cpus.effective", "0-7\n"}});
    t.cgroup(std::string(kScope) + "/job_42", {{"memory.max", "2147483648\n"}, {"cpuset.cpus.effective", "2-5\n"}});
    t.cgroup(std::string(kScope) + "/job_42/step_extern",
             {{"memory.max", "max\n"}, {"cpuset.cpus.effective", "2-5\n"}});
    t.cgroup(std::string(kScope) + "/job_42/step_extern/user",
             {{"memory.max", "4294967296\n"}, {"cpuset.cpus.effective", "2-5\n"}});
    t.cgroup(kTask, {{"memory.max", "max\n"}, {"cpuset.cpus.effective", "2-5\n"}, {"cgroup.procs", "100\n"}});
    t.cgroup(kStepd, {{"cgroup.procs", "101\n"}});
    t.process(100, std::string("0::") + kTask + "\n");
    t.process(101, std::string("0::") + kStepd + "\n");
}

}  // namespace

TEST_CASE("the cgroup version is what the node mounts", "[cgroup]") {
    FakeCgroups t;
    svm::mkdir_p(t.root + "/memory");
    CHECK_FALSE(svm::cgroup_unified(t.root));  // v1: one directory per hierarchy
    svm::mkdir_p(t.root + "/unified");
    svm::write_file_atomic(t.root + "/unified/cgroup.controllers", "");
    CHECK_FALSE(svm::cgroup_unified(t.root));  // hybrid: v1 for Slurm too
    svm::write_file_atomic(t.root + "/cgroup.controllers", "cpuset cpu memory\n");
    CHECK(svm::cgroup_unified(t.root));
}

TEST_CASE("a process's v2 cgroup is the path of its 0:: line", "[cgroup]") {
    FakeCgroups t;
    t.process(7, "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_1\n");
    CHECK(svm::unified_cgroup_of(7, t.proc) == "/system.slice/slurmstepd.scope/job_7/step_0/user/task_1");
    t.process(8, "12:freezer:/slurm/uid_1/job_8\n1:name=systemd:/system.slice/slurmd.service\n0::/init.scope\n");
    CHECK(svm::unified_cgroup_of(8, t.proc) == "/init.scope");
    CHECK(svm::cgroups_of(8, t.proc) ==
          std::map<std::string, std::string>{{"freezer", "/slurm/uid_1/job_8"},
                                             {"name=systemd", "/system.slice/slurmd.service"}});
    t.process(9, "4:memory:/slurm/uid_1/job_9\n");
    CHECK(svm::unified_cgroup_of(9, t.proc).empty());
    CHECK_THROWS_AS(svm::unified_cgroup_of(10, t.proc), svm::Error);  // no such process
}

TEST_CASE("the guest's v2 cgroup is a leaf of its own below the extern task", "[cgroup]") {
    CHECK(svm::guest_cgroup_v2(kTask) == std::string(kTask) + "/slurm_vm");
    CHECK(svm::guest_cgroup_v2("/system.slice/slurmstepd.scope/job_7/step_extern/user/task_special") ==
          "/system.slice/slurmstepd.scope/job_7/step_extern/user/task_special/slurm_vm");
    // Already there: unchanged (a second join is harmless).
    CHECK(svm::guest_cgroup_v2(std::string(kTask) + "/slurm_vm") == std::string(kTask) + "/slurm_vm");
    // slurmstepd's own leaf: beside the step's tasks instead.
    CHECK(svm::guest_cgroup_v2(kStepd) == "/system.slice/n1_slurmstepd.scope/job_42/step_extern/user/slurm_vm");
    CHECK(svm::guest_cgroup_v2("/slurmstepd.scope/job_3/step_extern") ==
          "/slurmstepd.scope/job_3/step_extern/slurm_vm");
    CHECK_THROWS_AS(svm::guest_cgroup_v2("/system.slice/slurmd.service"), svm::Error);
    CHECK_THROWS_AS(svm::guest_cgroup_v2("/system.slice/slurmstepd.scope/job_42"), svm::Error);
    CHECK_THROWS_AS(svm::guest_cgroup_v2("/system.slice/slurmstepd.scope/job_x/step_0/user/task_0"), svm::Error);
}

TEST_CASE("join_cgroups_of on v2 moves the process into the guest's leaf", "[cgroup]") {
    FakeCgroups t;
    slurm_v2_job(t);
    std::string leaf = std::string(kTask) + "/slurm_vm";
    // The kernel makes cgroup.procs on mkdir; a fake tree has it beforehand.
    t.cgroup(leaf);
    svm::join_cgroups_of(100, 555, t.root, true, t.proc);
    CHECK(t.read(leaf + "/cgroup.procs") == "555");
    CHECK(t.read(std::string(kTask) + "/cgroup.procs") == "100\n");  // the task's own leaf untouched
    // Without out_of_step_signals: the model's own cgroup (a fake file is
    // overwritten where the kernel would add the process).
    svm::join_cgroups_of(100, 556, t.root, false, t.proc);
    CHECK_THAT(t.read(std::string(kTask) + "/cgroup.procs"), Catch::StartsWith("556"));
}

TEST_CASE("join_cgroups_of on v2 creates the leaf and names what failed", "[cgroup]") {
    FakeCgroups t;
    slurm_v2_job(t);
    // A plain directory gets no cgroup.procs: the write fails, naming the file and the cgroup.
    try {
        svm::join_cgroups_of(100, 555, t.root, true, t.proc);
        FAIL("no error");
    } catch (const svm::Error& e) {
        CHECK(svm::path_exists(t.root + kTask + "/slurm_vm"));
        CHECK(e.chain().find("slurm_vm/cgroup.procs") != std::string::npos);
        CHECK(e.chain().find("move process 555 into the job's cgroup") != std::string::npos);
    }
}

TEST_CASE("join_cgroups_of on v2 refuses a model outside any job", "[cgroup]") {
    FakeCgroups t;
    slurm_v2_job(t);
    t.process(200, "0::/system.slice/slurmd.service\n");
    try {
        svm::join_cgroups_of(200, 555, t.root, true, t.proc);
        FAIL("no error");
    } catch (const svm::Error& e) {
        CHECK(e.chain().find("is in no job cgroup") != std::string::npos);
        CHECK(e.chain().find("PrologFlags=Contain") != std::string::npos);
    }
}

TEST_CASE("join_cgroups_of on v1 puts the freezer at the job level", "[cgroup]") {
    FakeCgroups t;
    const std::string job = "/slurm_n1/uid_1/job_42";
    for (const char* h : {"freezer", "memory", "cpu,cpuacct"}) t.cgroup(std::string("/") + h);
    t.cgroup("/freezer" + job);
    t.cgroup("/freezer" + job + "/step_extern");
    t.cgroup("/memory" + job + "/step_extern/task_0");
    t.cgroup("/cpu,cpuacct" + job + "/step_extern/task_0");
    t.process(100, "9:freezer:" + job + "/step_extern\n4:memory:" + job + "/step_extern/task_0\n3:cpu,cpuacct:" + job +
                       "/step_extern/task_0\n1:name=systemd:/\n0::/\n");
    svm::join_cgroups_of(100, 555, t.root, true, t.proc);
    CHECK(t.read("/freezer" + job + "/cgroup.procs") == "555");
    CHECK(t.read("/freezer" + job + "/step_extern/cgroup.procs").empty());
    CHECK(t.read("/memory" + job + "/step_extern/task_0/cgroup.procs") == "555");
    CHECK(t.read("/cpu,cpuacct" + job + "/step_extern/task_0/cgroup.procs") == "555");
    t.process(101, "9:freezer:/\n0::/\n");
    CHECK_THROWS_AS(svm::join_cgroups_of(101, 556, t.root, true, t.proc), svm::Error);
}

TEST_CASE("the guest's CPUs on v2 are the nearest cpuset.cpus.effective", "[cgroup]") {
    FakeCgroups t;
    slurm_v2_job(t);
    // The guest's leaf has no cpuset files of its own (its parent enables no controllers).
    t.cgroup(std::string(kTask) + "/slurm_vm");
    t.process(555, std::string("0::") + kTask + "/slurm_vm\n");
    CHECK(svm::cgroup_cpus(555, t.root, t.proc) == std::vector<int>{2, 3, 4, 5});
    CHECK(svm::cgroup_cpus(100, t.root, t.proc) == std::vector<int>{2, 3, 4, 5});
    CHECK(svm::cgroup_dir(555, "cpuset", t.root, t.proc) == t.root + kTask + "/slurm_vm");
    // Nowhere a cpuset: a clear error, not an empty guest.
    FakeCgroups bare;
    bare.cgroup("", {{"cgroup.controllers", "memory\n"}});
    bare.cgroup("/slurmstepd.scope/job_1/step_extern/user/task_0");
    bare.process(5, "0::/slurmstepd.scope/job_1/step_extern/user/task_0\n");
    CHECK_THROWS_WITH(svm::cgroup_cpus(5, bare.root, bare.proc), Catch::Contains("has no cpuset"));
}

TEST_CASE("the guest's memory limit on v2 is the tightest memory.max above it", "[cgroup]") {
    FakeCgroups t;
    slurm_v2_job(t);
    t.cgroup(std::string(kTask) + "/slurm_vm");
    t.process(555, std::string("0::") + kTask + "/slurm_vm\n");
    CHECK(svm::cgroup_memory_limit(555, t.root, t.proc) == 2147483648LL);  // the job's, below the step's 4 GiB
    svm::write_file_atomic(t.root + kTask + "/memory.max", "1073741824\n");
    CHECK(svm::cgroup_memory_limit(555, t.root, t.proc) == 1073741824LL);
    // "max" everywhere: no limit.
    for (const char* d : {"/job_42", "/job_42/step_extern/user", "/job_42/step_extern/user/task_0"})
        svm::write_file_atomic(t.root + kScope + d + "/memory.max", "max\n");
    CHECK_FALSE(svm::cgroup_memory_limit(555, t.root, t.proc).has_value());
    svm::write_file_atomic(t.root + kScope + "/job_42/memory.max", "lots\n");
    CHECK_THROWS_WITH(svm::cgroup_memory_limit(555, t.root, t.proc), Catch::Contains("job_42/memory.max"));
}

TEST_CASE("the memory limit on v1 ignores the no-limit value", "[cgroup]") {
    FakeCgroups t;
    const std::string job = "/slurm_n1/uid_1/job_42";
    t.cgroup("/memory" + job, {{"memory.limit_in_bytes", "2147483648\n"}});
    t.cgroup("/memory" + job + "/step_extern/task_0", {{"memory.limit_in_bytes", "9223372036854771712\n"}});
    t.cgroup("/cpuset" + job + "/step_extern", {{"cpuset.cpus", "1,3\n"}});
    t.process(100, "4:memory:" + job + "/step_extern/task_0\n2:cpuset:" + job + "/step_extern\n");
    CHECK(svm::cgroup_memory_limit(100, t.root, t.proc) == 2147483648LL);
    CHECK(svm::cgroup_cpus(100, t.root, t.proc) == std::vector<int>{1, 3});
}

TEST_CASE("remove_job_cgroups on v2 removes the job's empty directories in its node's scope", "[cgroup]") {
    FakeCgroups t;
    t.cgroup("", {{"cgroup.controllers", "cpuset cpu memory\n"}});
    // Directories only (rmdir of a real cgroup ignores its interface files).
    for (const char* d : {"/system.slice/n1_slurmstepd.scope/job_42/step_extern/user/task_0/slurm_vm",
                          "/system.slice/n1_slurmstepd.scope/job_42/step_0/slurm",
                          "/system.slice/n1_slurmstepd.scope/job_420/step_extern",
                          "/system.slice/n2_slurmstepd.scope/job_42/step_extern", "/system.slice/slurmd.service/job_42",
                          "/system.slice/n1_slurmstepd.scope/job_43/step_extern/user/task_0/slurm_vm"})
        svm::mkdir_p(t.root + d);
    // job 43's guest is still there: its leaf and everything above stays.
    svm::write_file_atomic(t.root + "/system.slice/n1_slurmstepd.scope/job_43/step_extern/user/task_0/slurm_vm/qemu",
                           "");
    CHECK(svm::remove_job_cgroups(42, t.root, "n1") == 7);
    CHECK_FALSE(svm::path_exists(t.root + "/system.slice/n1_slurmstepd.scope/job_42"));
    CHECK(svm::path_exists(t.root + "/system.slice/n1_slurmstepd.scope"));
    CHECK(svm::path_exists(t.root + "/system.slice/n1_slurmstepd.scope/job_420/step_extern"));
    CHECK(svm::path_exists(t.root + "/system.slice/n2_slurmstepd.scope/job_42/step_extern"));  // another node's
    CHECK(svm::path_exists(t.root + "/system.slice/slurmd.service/job_42"));                   // not a stepd scope
    CHECK(svm::remove_job_cgroups(43, t.root, "n1") == 0);
    CHECK(svm::path_exists(t.root + "/system.slice/n1_slurmstepd.scope/job_43/step_extern/user/task_0/slurm_vm"));
    // No node given: every slurmstepd scope of the host.
    CHECK(svm::remove_job_cgroups(42, t.root) == 2);
    CHECK_FALSE(svm::path_exists(t.root + "/system.slice/n2_slurmstepd.scope/job_42"));
    CHECK(svm::remove_job_cgroups(42, t.root, "n1") == 0);  // twice is harmless
}

// Slurm 26.05's cgroup/v2 names the job's directory by its SLUID
// (CgroupJobIdPaths=no, the default), as seen in the lab: the adopted
// extern task is task_special.
TEST_CASE("a SLUID names the job's v2 cgroup from Slurm 26.05", "[cgroup]") {
    CHECK(svm::is_sluid("s8A1M8JTMTWS00"));
    CHECK_FALSE(svm::is_sluid("S8A1M8JTMTWS00"));
    CHECK_FALSE(svm::is_sluid("s8A1M8JTMTWS0"));
    CHECK_FALSE(svm::is_sluid("s8A1M8JTMTWS00I"));
    CHECK_FALSE(svm::is_sluid("s8A1M8JTMTWSOO"));  // no O in Crockford's base 32
    CHECK_FALSE(svm::is_sluid("../etc/passwd00"));
    CHECK_FALSE(svm::is_sluid(""));
    const std::string task = "/system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS00/step_extern/user/task_special";
    CHECK(svm::job_level_path(task) == "/system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS00");
    CHECK(svm::guest_cgroup_v2(task) == task + "/slurm_vm");
    CHECK(svm::guest_cgroup_v2("/system.slice/slurmstepd.scope/s8A1M8JTMTWS00/step_extern/slurm") ==
          "/system.slice/slurmstepd.scope/s8A1M8JTMTWS00/step_extern/user/slurm_vm");
    // Shaped as one, but not below slurmstepd's scope: not a job.
    CHECK(svm::job_level_path("/user.slice/s8A1M8JTMTWS00/step_0") == "/user.slice/s8A1M8JTMTWS00/step_0");
    CHECK_THROWS_AS(svm::guest_cgroup_v2("/user.slice/s8A1M8JTMTWS00/step_0/user/task_0"), svm::Error);
}

TEST_CASE("remove_job_cgroups on v2 removes the directory named by the job's SLUID", "[cgroup]") {
    FakeCgroups t;
    t.cgroup("", {{"cgroup.controllers", "cpuset cpu memory\n"}});
    svm::mkdir_p(t.root + "/system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS00/step_extern/user/task_special/slurm_vm");
    svm::mkdir_p(t.root + "/system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS01/step_extern");
    CHECK(svm::remove_job_cgroups(1, t.root, "n1") == 0);  // without its SLUID, the job's directory is not found
    CHECK(svm::remove_job_cgroups({1, "s8A1M8JTMTWS00"}, t.root, "n1") == 5);
    CHECK_FALSE(svm::path_exists(t.root + "/system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS00"));
    CHECK(svm::path_exists(t.root + "/system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS01/step_extern"));  // another job
    CHECK(svm::remove_job_cgroups({1, "../s8A1M8JTMTWS01"}, t.root, "n1") == 0);  // not a SLUID: ignored
    CHECK(svm::path_exists(t.root + "/system.slice/n1_slurmstepd.scope/s8A1M8JTMTWS01/step_extern"));
}

TEST_CASE("remove_job_cgroups on v2 finds slurmstepd's scope without a node prefix", "[cgroup]") {
    FakeCgroups t;
    t.cgroup("", {{"cgroup.controllers", "cpuset cpu memory\n"}});
    svm::mkdir_p(t.root + "/system.slice/slurmstepd.scope/job_9/step_extern/user/task_0/slurm_vm");
    svm::mkdir_p(t.root + "/system.slice/slurmstepd.scope/system");
    CHECK(svm::remove_job_cgroups(9, t.root, "n1") == 5);
    CHECK(svm::list_dir(t.root + "/system.slice/slurmstepd.scope") == std::vector<std::string>{"system"});
}

TEST_CASE("remove_job_cgroups on v2 ends what is left in the guest's leaf", "[cgroup]") {
    FakeCgroups t;
    t.cgroup("", {{"cgroup.controllers", "cpuset cpu memory\n"}});
    std::string leaf = "/system.slice/slurmstepd.scope/job_5/step_extern/user/task_0/slurm_vm";
    t.cgroup(leaf, {{"cgroup.kill", ""}, {"cgroup.events", "populated 1\nfrozen 0\n"}});
    std::string done = "/system.slice/slurmstepd.scope/job_6/step_extern/user/task_0/slurm_vm";
    t.cgroup(done, {{"cgroup.kill", ""}, {"cgroup.events", "populated 0\nfrozen 0\n"}});
    // A fake leaf stays populated: killed, awaited (2 s at most), and kept.
    CHECK(svm::remove_job_cgroups(5, t.root) == 0);
    CHECK(t.read(leaf + "/cgroup.kill") == "1");
    // An empty leaf is not killed.
    svm::remove_job_cgroups(6, t.root);
    CHECK(t.read(done + "/cgroup.kill").empty());
    // Nothing to kill with (before Linux 5.14), nothing to read: no error.
    svm::remove_tree(t.root + leaf + "/cgroup.kill");
    svm::remove_tree(t.root + leaf + "/cgroup.events");
    CHECK(svm::remove_job_cgroups(5, t.root) == 0);
}

TEST_CASE("OOM kills are read from the process's memory cgroup, v1 and v2", "[cgroup]") {
    {
        FakeCgroups t;
        const std::string task = "/slurm_n1/uid_1/job_42/step_extern/task_0";
        t.cgroup("/memory" + task, {{"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"}});
        t.process(100, "4:memory:" + task + "\n");
        CHECK(svm::cgroup_oom_kills(100, t.root, t.proc) == 2);
        svm::write_file_atomic(t.root + "/memory" + task + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
        CHECK_FALSE(svm::cgroup_oom_kills(100, t.root, t.proc).has_value());  // a kernel before 4.13
    }
    {
        FakeCgroups t;
        slurm_v2_job(t);
        t.cgroup(std::string(kTask) + "/slurm_vm", {{"memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"}});
        t.process(555, std::string("0::") + kTask + "/slurm_vm\n");
        CHECK(svm::cgroup_oom_kills(555, t.root, t.proc) == 1);
        CHECK_FALSE(svm::cgroup_oom_kills(100, t.root, t.proc).has_value());  // no memory.events there
    }
}

TEST_CASE("the job level of a Slurm cgroup path", "[cgroup]") {
    CHECK(svm::job_level_path("/slurm_node1/uid_2001/job_42/step_extern/task_0") == "/slurm_node1/uid_2001/job_42");
    CHECK(svm::job_level_path("/slurm/uid_1/job_7/step_extern") == "/slurm/uid_1/job_7");
    CHECK(svm::job_level_path("/slurm/uid_1/job_7") == "/slurm/uid_1/job_7");
    CHECK(svm::job_level_path("/slurm/uid_1/job_x/step_0") == "/slurm/uid_1/job_x/step_0");
    CHECK(svm::job_level_path("/user.slice") == "/user.slice");
}

TEST_CASE("remove_job_cgroups with a wait removes a cgroup once its last process has left", "[cgroup]") {
    std::string root = svm::trim(svm::run_checked({"mktemp", "-d", "/tmp/svm-cg.XXXXXX"}));
    std::string leaf = root + "/freezer/slurm_n1/uid_1/job_42/step_extern";
    svm::mkdir_p(leaf);
    svm::write_file_atomic(leaf + "/exiting", "");  // rmdir refused until it goes, as for a process leaving
    CHECK(svm::remove_job_cgroups(42, root) == 0);  // no wait: refused once, left
    std::thread leaves([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        ::unlink((leaf + "/exiting").c_str());
    });
    auto start = std::chrono::steady_clock::now();
    int removed = svm::remove_job_cgroups(42, root, "", std::chrono::seconds(5));
    auto took = std::chrono::steady_clock::now() - start;
    leaves.join();
    CHECK(removed == 2);
    CHECK_FALSE(svm::path_exists(root + "/freezer/slurm_n1/uid_1/job_42"));
    CHECK(took < std::chrono::seconds(2));  // retried, not slept to the end
    // One that stays is given up after the wait.
    svm::mkdir_p(leaf);
    svm::write_file_atomic(leaf + "/busy", "");
    start = std::chrono::steady_clock::now();
    CHECK(svm::remove_job_cgroups(42, root, "", std::chrono::milliseconds(300)) == 0);
    took = std::chrono::steady_clock::now() - start;
    CHECK(took >= std::chrono::milliseconds(250));
    CHECK(svm::path_exists(leaf));
    svm::remove_tree(root);
}

TEST_CASE("remove_job_cgroups removes only the job's empty directories, deepest first", "[cgroup]") {
    std::string root = svm::trim(svm::run_checked({"mktemp", "-d", "/tmp/svm-cg.XXXXXX"}));
    for (const char* d : {"memory/slurm_n1/uid_1/job_42/step_extern/task_0", "freezer/slurm_n1/uid_1/job_42",
                          "memory/slurm_n1/uid_1/job_420/step_0", "cpuset/slurm_n1/uid_1/job_43"})
        svm::mkdir_p(root + "/" + d);
    svm::write_file_atomic(root + "/cpuset/slurm_n1/uid_1/job_43/keep", "");  // a non-empty one stays
    CHECK(svm::remove_job_cgroups(42, root) == 4);
    CHECK_FALSE(svm::path_exists(root + "/memory/slurm_n1/uid_1/job_42"));
    CHECK_FALSE(svm::path_exists(root + "/freezer/slurm_n1/uid_1/job_42"));
    CHECK(svm::path_exists(root + "/memory/slurm_n1/uid_1/job_420/step_0"));
    CHECK(svm::remove_job_cgroups(43, root) == 0);
    CHECK(svm::path_exists(root + "/cpuset/slurm_n1/uid_1/job_43"));
    svm::remove_tree(root);
}
