// The guest's shell scripts (lib/guest/scripts, compiled in): the quoting of
// the values given to them, and the seed's user-data for representative
// plans against golden files (lib/guest/tests/golden; SVM_UPDATE_GOLDEN=1
// rewrites them, to be reviewed as a diff).
#include <cstdlib>

#include "catch.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_scenarios.hpp"
#include "guest_script.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "srun_relay.hpp"

namespace {

const std::string kGolden = std::string(SVM_SOURCE_DIR) + "/lib/guest/tests/golden/";

svm::SeedKeys keys() {
    return {"ssh-ed25519 AAAAuser c", "-----BEGIN OPENSSH PRIVATE KEY-----\nu\n-----END OPENSSH PRIVATE KEY-----\n",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nh\n-----END OPENSSH PRIVATE KEY-----\n", "ssh-ed25519 AAAAhost c",
            "node1-vm,10.213.43.10 ssh-ed25519 AAAAhost1\nnode2-vm,10.213.43.11 ssh-ed25519 AAAAhost2\n"};
}

svm::JobPlan base_plan() {
    svm::JobPlan p = svm::test::alice_plan();
    p.ip = "10.213.43.10";
    p.prefix_len = 16;
    p.mac = "52:54:0a:d5:2b:0a";
    return p;
}

// Two guests on the bridge, a working directory, a gateway.
svm::JobPlan two_guests() {
    auto p = base_plan();
    p.workdir = "/home/alice/run dir";
    p.gateway = "10.213.0.1";
    p.peers = {{"node1", "node1-vm", "10.213.43.10"}, {"node2", "node2-vm", "10.213.43.11"}};
    return p;
}

// One guest, its user's names and paths with quotes and shell words in
// them, shares over virtiofs, an Ethernet VF with an interrupt profile.
svm::JobPlan one_guest_shares_vf() {
    auto p = base_plan();
    p.uid = 999;
    p.gid = 998;
    p.user = p.group = "o'brien";
    p.home = "/home/o'brien";
    p.workdir = "/scratch/$(reboot) `x` \"y\"";
    p.shares = {"/home/o'brien", "/scratch/a b"};
    p.shares_via = "virtiofs";
    p.peers = {{"node1", "node1-vm", "10.213.43.10"}};
    p.irq_profile = "latency";
    p.vf_link_layer = "ethernet";
    p.vf_mac = "02:00:12:34:00:01";
    return p;
}

// Two guests with an IPoIB fabric, shares over 9p, a throughput profile.
svm::JobPlan fabric() {
    auto p = base_plan();
    p.fabric_ip = "10.214.43.10";
    p.fabric_prefix_len = 16;
    p.peers = {{"node1", "node1-vm", "10.213.43.10", "10.214.43.10"},
               {"node2", "node2-vm", "10.213.43.11", "10.214.43.11"}};
    p.shares = {"/home/alice"};
    p.shares_via = "9p";
    p.irq_profile = "throughput";
    p.vf_link_layer = "infiniband";
    p.vf_port_guid = "02:C9:00:00:00:03:00:01";
    return p;
}

}  // namespace

TEST_CASE("guest scripts: a value reaches the shell as it is, or is refused", "[seed]") {
    const std::vector<std::string> values = {"",           "plain",      "it's", "''", "$HOME `id`", "$(reboot) \\ \\n",
                                             "a\"b\" c;d", "tab\there *"};
    std::vector<svm::ScriptVar> vars;
    std::string print;
    for (size_t i = 0; i < values.size(); ++i) {
        vars.push_back({"V" + std::to_string(i), values[i]});
        print += "printf '%s\\0' \"$V" + std::to_string(i) + "\"\n";
    }
    vars.push_back({"LINES", "one\ntwo'\n\n", true});
    print += "printf '%s\\0' \"$LINES\"\n";
    auto r = svm::run({"/bin/sh", "-c", svm::sh_assignments(vars) + print});
    REQUIRE(r.status == 0);
    std::string want;
    for (const auto& v : values) want += v + std::string(1, '\0');
    want += "one\ntwo'\n\n" + std::string(1, '\0');
    CHECK(r.out == want);
    CHECK(svm::sh_single_quote("it's", "v") == "'it'\\''s'");
    CHECK(svm::sh_assignments({{"SVM_X", "a b"}}) == "SVM_X='a b'\n");
    // No NUL in any shell word; no line break where one cannot be meant.
    CHECK_THROWS_WITH(svm::sh_single_quote(std::string("a\0b", 3), "the user", true), Catch::Contains("NUL"));
    CHECK_THROWS_WITH(svm::sh_single_quote("a\nb", "the user"),
                      Catch::Contains("the user \"a\nb\" holds a line break"));
    CHECK_THROWS_WITH(svm::sh_assignments({{"x", "1"}}), Catch::Contains("not a shell variable's name"));
    CHECK_THROWS_WITH(svm::sh_assignments({{"1X", "1"}}), Catch::Contains("not a shell variable's name"));
    CHECK_THROWS_WITH(svm::sh_assignments({{"A-B", "1"}}), Catch::Contains("not a shell variable's name"));
    CHECK_THROWS_WITH(svm::guest_script("nonexistent.sh"), Catch::Contains("no guest script"));
    // A value that cannot be meant with a line break never reaches the guest.
    auto p = two_guests();
    p.hostname = "node1-vm\nreboot";
    CHECK_THROWS_WITH(svm::seed_user_data(p, keys()), Catch::Contains("holds a line break"));
    p = two_guests();
    p.peers[1].hostname = "x\n10.0.0.1 evil";
    CHECK_THROWS_WITH(svm::seed_user_data(p, keys()), Catch::Contains("holds a line break"));
    p = two_guests();
    p.node = "node1\nreboot";
    CHECK_THROWS_WITH(svm::seed_user_data(p, keys()), Catch::Contains("holds a line break"));
}

TEST_CASE("guest scripts: embedded as the files are, a header for readers only", "[seed]") {
    const std::string src = std::string(SVM_SOURCE_DIR) + "/lib/guest/scripts/";
    CHECK(svm::guest_script("agent.sh") == svm::read_file(src + "agent.sh"));
    CHECK(svm::guest_srun_shim() == svm::read_file(src + "srun.bash"));
    CHECK(svm::guest_srun_shim().rfind("#!/bin/bash\n", 0) == 0);  // installed as it is
    std::string body = svm::guest_script_body("agent.sh");
    CHECK(body.rfind("exec 3<>\"$1\"", 0) == 0);
    CHECK(svm::agent_script() == body);
}

TEST_CASE("seed: the rendered user-data of representative plans, as the golden files say", "[seed]") {
    const bool update = std::getenv("SVM_UPDATE_GOLDEN") != nullptr;
    const std::vector<std::pair<std::string, svm::JobPlan>> plans = {
        {"two-guests", two_guests()}, {"one-guest-shares-vf", one_guest_shares_vf()}, {"fabric", fabric()}};
    for (const auto& [name, plan] : plans) {
        INFO(name);
        std::string ud = svm::seed_user_data(plan, keys());
        CHECK(svm::run({"/bin/sh", "-n"}, {.stdin_data = ud}).status == 0);
        std::string file = kGolden + name + ".user-data";
        if (update) svm::write_file_atomic(file, ud, 0644);
        std::string golden;
        REQUIRE(svm::read_file_if_exists(file, golden));
        CHECK(ud == golden);
        if (update) svm::write_file_atomic(kGolden + name + ".meta-data", svm::seed_meta_data(plan), 0644);
        CHECK(svm::seed_meta_data(plan) == svm::read_file(kGolden + name + ".meta-data"));
        if (update) svm::write_file_atomic(kGolden + name + ".network-config", svm::seed_network_config(plan), 0644);
        CHECK(svm::seed_network_config(plan) == svm::read_file(kGolden + name + ".network-config"));
    }
}
