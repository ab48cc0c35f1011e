#include <sys/stat.h>
#include <unistd.h>

#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"
#include "support.hpp"

TEST_CASE("atomic write replaces content and sets mode") {
    svm::test::TempDir tmp("svm-fs");
    std::string dir = tmp.path();
    std::string f = svm::path_join(dir, "a.json");
    svm::write_file_atomic(f, "one", 0600);
    svm::write_file_atomic(f, "two", 0640);
    CHECK(svm::read_file(f) == "two");
    CHECK(svm::list_dir(dir) == std::vector<std::string>{"a.json"});
    svm::remove_tree(dir);
    CHECK_FALSE(svm::path_exists(dir));
    svm::remove_tree(dir);  // missing is fine
}

TEST_CASE("mkdir_p makes the missing parents 0755 and only the directory itself private", "[fs]") {
    svm::test::TempDir tmp("svm-fs");
    std::string top = tmp.path();
    mode_t old = ::umask(0);
    svm::mkdir_p(top + "/shared/node1/log/", 0750);
    ::umask(old);
    struct stat st;
    REQUIRE(::stat((top + "/shared").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    REQUIRE(::stat((top + "/shared/node1").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    REQUIRE(::stat((top + "/shared/node1/log").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0750);
}

TEST_CASE("read_file names the file in its error") {
    try {
        svm::read_file("/nonexistent/x");
        FAIL("no error");
    } catch (const svm::Error& e) {
        CHECK(std::string(e.what()).find("/nonexistent/x") != std::string::npos);
    }
}

TEST_CASE("run captures output, status and stdin, and times out") {
    auto r = svm::run({"/bin/sh", "-c", "cat; echo err >&2; exit 3"}, {.stdin_data = "hello"});
    CHECK(r.status == 3);
    CHECK(r.out == "hello");
    CHECK(r.err == "err\n");
    svm::RunOptions o;
    o.timeout_ms = 200;
    auto t = svm::run({"/bin/sleep", "5"}, o);
    CHECK(t.timed_out);
    CHECK_THROWS_AS(svm::run_checked({"/bin/false"}), svm::Error);
}

TEST_CASE("shell_quote survives single quotes") {
    auto r = svm::run({"/bin/sh", "-c", "printf %s " + svm::shell_quote("it's $HOME `x`")});
    CHECK(r.out == "it's $HOME `x`");
}

#include "cgroup.hpp"

TEST_CASE("the job level of a Slurm cgroup path", "[cgroup]") {
    CHECK(svm::job_level_path("/slurm_node1/uid_2001/job_42/step_extern/task_0") == "/slurm_node1/uid_2001/job_42");
    CHECK(svm::job_level_path("/slurm/uid_1/job_7/step_extern") == "/slurm/uid_1/job_7");
    CHECK(svm::job_level_path("/slurm/uid_1/job_7") == "/slurm/uid_1/job_7");
    CHECK(svm::job_level_path("/slurm/uid_1/job_x/step_0") == "/slurm/uid_1/job_x/step_0");
    CHECK(svm::job_level_path("/user.slice") == "/user.slice");
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
