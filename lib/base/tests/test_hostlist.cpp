// Host-list expansion's bounds and refusals (lib/base/hostlist.hpp), from
// what tests/fuzz/hostlist.cpp found: a list read back from Slurm is
// untrusted text.
#include <chrono>
#include <set>

#include "catch.hpp"

#include "error.hpp"
#include "hostlist.hpp"

using svm::compress_hostlist;
using svm::expand_hostlist;

TEST_CASE("host lists: unbalanced or nested brackets are refused, not read as names", "[hostlist]") {
    // Found by fuzzing: the stray "]" made "7],7],login1" one name, which
    // written back as a list expanded to other names.
    CHECK_THROWS_AS(expand_hostlist("npd,3,7],7],login1"), svm::Error);
    CHECK_THROWS_AS(expand_hostlist("node]"), svm::Error);
    CHECK_THROWS_AS(expand_hostlist("node[1-2"), svm::Error);
    CHECK_THROWS_AS(expand_hostlist("node[[1-2]]"), svm::Error);
    CHECK(expand_hostlist("node[1-2],login1") == std::vector<std::string>{"node1", "node2", "login1"});
}

TEST_CASE("host lists: an expansion is bounded in names and a name's length", "[hostlist]") {
    auto start = std::chrono::steady_clock::now();
    // 10^10 names written in 21 bytes: refused after the first 100,000.
    CHECK_THROWS_AS(expand_hostlist("a[0-99999]b[0-99999]"), svm::Error);
    CHECK_THROWS_AS(expand_hostlist("n[1-60000],m[1-60000]"), svm::Error);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    CHECK(expand_hostlist("n[1-50000],m[1-50000]").size() == svm::kMaxHostlistNames);
    CHECK_THROWS_AS(expand_hostlist("n[1-2]" + std::string(300, 'x')), svm::Error);
    CHECK(expand_hostlist(std::string(255, 'x')).size() == 1);
}

TEST_CASE("host lists: names written as one list expand back to them", "[hostlist]") {
    std::vector<std::string> names = expand_hostlist("rack[1-2]node[01-04],gpu[001-003]-ib,login1");
    CHECK(names.size() == 12);
    auto back = expand_hostlist(compress_hostlist(names));
    CHECK(std::set<std::string>(back.begin(), back.end()) == std::set<std::string>(names.begin(), names.end()));
}

TEST_CASE("host lists: a name whose number is longer than a range holds is written as it is", "[hostlist]") {
    // Found by tests/fuzz (hostlist): the writer bracketed 10-digit numbers,
    // which the reader refuses (at most 9 digits in a range).
    std::vector<std::string> names{"n2392971000", "n2392971001", "n239297999", "n239297998"};
    std::string list = svm::compress_hostlist(names);
    CHECK(list == "n[239297998-239297999],n2392971000,n2392971001");
    std::vector<std::string> back = svm::expand_hostlist(list);
    CHECK(std::set<std::string>(back.begin(), back.end()) == std::set<std::string>(names.begin(), names.end()));
}
