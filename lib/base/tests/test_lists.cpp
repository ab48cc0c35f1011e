// CPU lists and Slurm host lists (lib/base/cpuset.hpp, hostlist.hpp).
#include "catch.hpp"

#include "cpuset.hpp"
#include "error.hpp"
#include "hostlist.hpp"

TEST_CASE("cpu lists round-trip and reject garbage", "[core]") {
    CHECK(svm::parse_cpulist("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
    CHECK(svm::format_cpulist({3, 1, 2, 8, 0}) == "0-3,8");
    CHECK(svm::parse_cpulist("").empty());
    CHECK_THROWS_AS(svm::parse_cpulist("3-1"), svm::Error);
    CHECK_THROWS_AS(svm::parse_cpulist("a"), svm::Error);
}

TEST_CASE("Slurm host lists expand like Slurm does", "[core]") {
    CHECK(svm::expand_hostlist("node[1-3],login") == std::vector<std::string>{"node1", "node2", "node3", "login"});
    CHECK(svm::expand_hostlist("n[08-10]") == std::vector<std::string>{"n08", "n09", "n10"});
    CHECK(svm::expand_hostlist("a[1,3]b") == std::vector<std::string>{"a1b", "a3b"});
    CHECK(svm::expand_hostlist("single") == std::vector<std::string>{"single"});
    CHECK_THROWS_AS(svm::expand_hostlist("n[1-"), svm::Error);
}
