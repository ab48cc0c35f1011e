#include "catch.hpp"

#include "guest_net.hpp"

using namespace svm;

TEST_CASE("tap names fit IFNAMSIZ and the job's pattern matches only its taps", "[net]") {
    CHECK(guest_tap_name(0x1a, 0) == "svm1an0");
    CHECK(guest_tap_name(0xffffffffu, 240).size() <= 15);
    CHECK(guest_tap_pattern(0x1) == "svm1n*");  // "svm1an0" (job 0x1a) does not match
}

TEST_CASE("the job filter admits only the job's own /24 and the gateway", "[net]") {
    JobFilter f = job_filter("10.213.0.0/16", 300, "10.213.0.1");  // 300 % 254 + 1 = 47
    CHECK(f.table == "svm_job_300");
    CHECK(f.rules.find("iifname != \"svm12cn*\" accept") != std::string::npos);
    CHECK(f.rules.find("ip saddr != 10.213.47.0/24 drop") != std::string::npos);
    CHECK(f.rules.find("ip daddr 10.213.0.0/16 ip daddr != { 10.213.47.0/24, 10.213.0.1 } drop") != std::string::npos);
    CHECK(f.rules.find("arp daddr ip 10.213.0.0/16 arp daddr ip != { 10.213.47.0/24, 10.213.0.1 } drop") !=
          std::string::npos);
    CHECK(f.rules.find("ether type != { ip, arp } drop") != std::string::npos);
    // Re-running replaces the table instead of adding rules twice.
    CHECK(f.rules.rfind("add table bridge svm_job_300\ndelete table bridge svm_job_300\n", 0) == 0);
    JobFilter g = job_filter("10.213.0.0/16", 300, "");
    CHECK(g.rules.find("!= { 10.213.47.0/24 } drop") != std::string::npos);
    CHECK_THROWS_WITH(job_filter("10.213.0.0/24", 1, ""), Catch::Contains("must be an IPv4 /16"));
    CHECK_THROWS(remove_job_filter("", "filter"));  // only our tables
}

#include "doctor.hpp"

TEST_CASE("doctor's network check names a missing bridge and a disabled isolation", "[net]") {
    svm::NetworkConfig net;
    net.bridge = "svm-no-such-br";
    auto r = svm::check_guest_network(net);
    REQUIRE(r.size() >= 2);
    CHECK(r[0].name == "network bridge");
    CHECK(r[0].status == svm::CheckStatus::fail);
    CHECK(r[0].message == "bridge svm-no-such-br not found");
    net.isolate_jobs = false;
    auto off = svm::check_guest_network(net);
    CHECK(off[1].status == svm::CheckStatus::warn);
    CHECK(svm::check_guest_network(svm::NetworkConfig{})[0].status == svm::CheckStatus::warn);
    // nft itself: works on this machine (the cluster's isolation needs it).
    net.isolate_jobs = true;
    auto on = svm::check_guest_network(net);
    CHECK(on[1].name == "network isolation");
    CHECK(on[1].status == svm::CheckStatus::ok);
}
