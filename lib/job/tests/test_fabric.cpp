// The job's network over IPoIB on the VF (network.fabric "ipoib"): the
// configuration, the guests' names pointing at their fabric addresses, and
// the seed's script that finds the VF's IPoIB interface by its port GUID.
#include "catch.hpp"

#include "config.hpp"
#include "error.hpp"
#include "guest_scenarios.hpp"
#include "proc.hpp"
#include "seed.hpp"

namespace {

svm::JobPlan fabric_plan() {
    svm::JobPlan p = svm::test::alice_plan();
    p.ip = "10.213.43.10";
    p.mac = "52:54:0a:d5:2b:0a";
    p.fabric_ip = "10.214.43.10";
    p.peers = {{"node1", "node1-vm", "10.213.43.10", "10.214.43.10"},
               {"node2", "node2-vm", "10.213.43.11", "10.214.43.11"}};
    p.vf_link_layer = "infiniband";
    p.vf_port_guid = "02:C9:00:00:00:03:00:01";
    return p;
}

}  // namespace

TEST_CASE("network.fabric ipoib needs its prefix and the bridge", "[fabric]") {
    auto base = [](const std::string& net) { return "{\"network\": " + net + "}"; };
    auto c = svm::parse_config(
        base(R"({"prefix": "10.213.0.0/16", "fabric": "ipoib", "fabric_prefix": "10.214.0.0/16"})"), "node1", "test");
    CHECK(c.network.fabric == "ipoib");
    CHECK(c.network.fabric_prefix == "10.214.0.0/16");
    CHECK(svm::parse_config(base(R"({"prefix": "10.213.0.0/16"})"), "n", "t").network.fabric == "segment");
    CHECK_THROWS_WITH(
        svm::parse_config(base(R"({"prefix": "10.213.0.0/16", "fabric": "ipoib"})"), "n", "t"),
        Catch::Contains("network needs \"fabric_prefix\" (an IPv4 /16 for the IPoIB addresses) for fabric \"ipoib\""));
    CHECK_THROWS_WITH(svm::parse_config(base(R"({"fabric": "ipoib", "fabric_prefix": "10.214.0.0/16"})"), "n", "t"),
                      Catch::Contains("network needs \"prefix\""));
    CHECK_THROWS_WITH(svm::parse_config(base(R"({"prefix": "10.213.0.0/16", "fabric": "roce"})"), "n", "t"),
                      Catch::Contains("must be \"segment\" or \"ipoib\""));
    CHECK_THROWS_WITH(svm::parse_config(base(R"({"bridge": "br0", "prefix": "10.213.0.0/16"})"), "n", "t"),
                      Catch::Contains("network.bridge is gone"));
    CHECK_THROWS_WITH(
        svm::parse_config(base(R"({"prefix": "10.213.0.0/16", "fabric": "ipoib", "fabric_prefix": "10.214.0.0/24"})"),
                          "n", "t"),
        Catch::Contains("/16"));
}

TEST_CASE("with a fabric, the guests' names resolve to their IPoIB addresses and the VF's interface gets one",
          "[fabric]") {
    auto p = fabric_plan();
    svm::SeedKeys k{"ssh-ed25519 AAAA u", "PRIVATE", "HOSTPRIVATE", "ssh-ed25519 AAAA h",
                    "node1-vm ssh-ed25519 AAAA h\n"};
    std::string ud = svm::seed_user_data(p, k);
    CHECK(ud.find("10.214.43.11 node2-vm # slurm-vm\n") != std::string::npos);
    CHECK(ud.find("10.213.43.11 node2-vm") == std::string::npos);
    // The bridge NIC keeps its address (the host's SSH reaches the guest there).
    CHECK(ud.find("SVM_MAC='52:54:0a:d5:2b:0a'\nSVM_ADDRESS='10.213.43.10/16'\n") != std::string::npos);
    std::string f = svm::seed_fabric_script(p);
    CHECK(f.find("SVM_PORT_GUID='02:c9:00:00:00:03:00:01'\n") != std::string::npos);
    CHECK(f.find("SVM_FABRIC_ADDRESS='10.214.43.10/16'\n") != std::string::npos);
    CHECK(ud.find(f) != std::string::npos);
    CHECK(svm::run({"sh", "-n", "-c", ud}).ok());
    p.vf_port_guid = "02:c9;reboot";
    CHECK_THROWS_WITH(svm::seed_fabric_script(p), Catch::Contains("is not a GUID"));
    p.fabric_ip.clear();
    CHECK(svm::seed_fabric_script(p).empty());
}

#include "keeper.hpp"

TEST_CASE("the VM record says the fabric address, hugepages and the VF's profile", "[fabric]") {
    auto p = fabric_plan();
    p.irq_profile = "latency";
    std::string r = svm::vm_record(p, 10, 20, 4, 1024, 2048);
    CHECK(r.find("\"fabric_ip\":\"10.214.43.10\"") != std::string::npos);
    CHECK(r.find("\"hugepage_kib\":2048") != std::string::npos);
    CHECK(r.find("\"irq_profile\":\"latency\"") != std::string::npos);
    p.fabric_ip.clear();
    p.vf_link_layer.clear();
    std::string plain = svm::vm_record(p, 10, 20, 4, 1024);
    CHECK(plain.find("fabric_ip") == std::string::npos);
    CHECK(plain.find("hugepage_kib") == std::string::npos);
    CHECK(plain.find("irq_profile") == std::string::npos);
    CHECK(plain.find("\"source\"") == std::string::npos);
    // A catalogue name or a registry reference: what the job named.
    p.image_source = "docker://registry.example/hpc/rocky9:1";
    CHECK(svm::vm_record(p, 10, 20, 4, 1024).find("\"source\":\"docker://registry.example/hpc/rocky9:1\"") !=
          std::string::npos);
    CHECK(svm::JobPlan::from_json(p.to_json(), "t").image_source == p.image_source);
}
