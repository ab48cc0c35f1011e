// The node configuration's network, share and registry image keys, and the
// doctor's checks of them (the segments themselves: host/tests/test_guest_net.cpp;
// the shares: guest/tests/test_virtiofs.cpp; images: image/tests/test_oci_image.cpp).
#include "catch.hpp"

#include "config.hpp"
#include "doctor.hpp"
#include "error.hpp"
#include "guest_net.hpp"
#include "virtiofs.hpp"

using namespace svm;

TEST_CASE("network configuration: underlay as a template or a map, old keys refused", "[net]") {
    auto c = parse_config(R"({"network": {"prefix": "10.213.0.0/16", "underlay": {"a": "10.0.0.1"}, "mtu": 1400}})",
                          "a", "t");
    CHECK(c.network.underlay_hosts.at("a") == "10.0.0.1");
    CHECK(c.network.mtu == 1400);
    CHECK_THROWS_WITH(parse_config(R"({"network": {"prefix": "10.213.0.0/16", "isolate_jobs": true}})", "a", "t"),
                      Catch::Contains("network.isolate_jobs is gone"));
    CHECK_THROWS_WITH(parse_config(R"({"network": {"prefix": "10.213.0.0/24"}})", "a", "t"),
                      Catch::Contains("must be an IPv4 /16"));
    CHECK(resolve_underlay("10.9.8.%n", "7") == "10.9.8.7");
    CHECK(resolve_underlay("localhost", "x") == "127.0.0.1");
    CHECK_THROWS_WITH(resolve_underlay("%n.invalid", "nosuch"), Catch::Contains("underlay address of node nosuch"));
}

TEST_CASE("doctor's network check: no network, a missing underlay namespace", "[net]") {
    CHECK(check_guest_network(NetworkConfig{})[0].status == CheckStatus::warn);
    NetworkConfig net;
    net.prefix = "10.213.0.0/16";
    net.netns = "svm-no-such-ns";
    auto r = check_guest_network(net);
    REQUIRE(r.size() >= 3);
    CHECK(r[0].status == CheckStatus::fail);
    CHECK(r[1].status == CheckStatus::ok);  // nft works here
}

TEST_CASE("configuration: shares_via and virtiofsd", "[virtiofs]") {
    CHECK(svm::parse_config("{}", "n1", "t").shares_via == "virtiofs");
    CHECK(svm::parse_config(R"({"shares_via": "9p"})", "n1", "t").shares_via == "9p");
    CHECK_THROWS_WITH(svm::parse_config(R"({"shares_via": "nfs"})", "n1", "t"),
                      Catch::Contains("shares_via must be \"virtiofs\" or \"9p\" (it is \"nfs\")"));
    CHECK_THROWS_WITH(svm::parse_config(R"({"virtiofsd": "virtiofsd"})", "n1", "t"), Catch::Contains("absolute path"));
    CHECK_THROWS_WITH(svm::find_virtiofsd("/nonexistent/virtiofsd"), Catch::Contains("is not an executable"));
}

TEST_CASE("doctor: shares over virtio-fs need a virtiofsd", "[virtiofs]") {
    svm::NodeConfig c = svm::parse_config("{}", "n1", "t");
    auto r = svm::check_shares(c);
    REQUIRE(r.size() == 1);
    CHECK(r[0].status == svm::CheckStatus::ok);  // this machine has one (qemu-system-common)
    CHECK(r[0].message.find("virtio-fs with /") != std::string::npos);
    c.virtiofsd = "/nonexistent/virtiofsd";
    r = svm::check_shares(c);
    CHECK(r[0].status == svm::CheckStatus::fail);
    CHECK(r[0].fix.find("install virtiofsd") != std::string::npos);
    c.shares_via = "9p";
    CHECK(svm::check_shares(c)[0].status == svm::CheckStatus::ok);
    c.shares.clear();
    CHECK(svm::check_shares(c)[0].message == "no shares configured");
}

TEST_CASE("oci: the configuration's oci object", "[oci]") {
    auto c = svm::parse_config(R"({"oci": {"cache_dir": "/var/lib/slurm-vm/%n/oci", "cache_max_gib": 3,
                                   "insecure_registries": ["localhost:5000"]}})",
                               "n1", "t");
    CHECK(c.oci.cache_dir == "/var/lib/slurm-vm/n1/oci");
    CHECK(c.oci.cache_max_bytes == (3ULL << 30));
    CHECK(c.oci.insecure_registries == std::vector<std::string>{"localhost:5000"});
    CHECK(svm::parse_config("{}", "n2", "t").oci.cache_dir == "/var/lib/slurm-vm/n2/oci");
    CHECK_THROWS_AS(svm::parse_config(R"({"oci": {"cache": "/x"}})", "n", "t"), svm::Error);
    CHECK_THROWS_AS(svm::parse_config(R"({"oci": {"cache_dir": "rel"}})", "n", "t"), svm::Error);
}

TEST_CASE("oci: the configuration's layer bounds", "[oci]") {
    auto c = svm::parse_config(R"({"oci": {"max_layer_gib": 2, "max_layer_entries": 50, "reserve_gib": 0}})", "n", "t");
    CHECK(c.oci.max_layer_bytes == (2ULL << 30));
    CHECK(c.oci.max_layer_entries == 50);
    CHECK(c.oci.reserve_bytes == 0);
    CHECK(svm::parse_config("{}", "n", "t").oci.timeout_s == 300);
}
