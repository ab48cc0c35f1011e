// Unit tests for the job's building blocks: the node configuration, the
// ledger, the doctor's Slurm and group checks (the guest's: guest/tests/test_core_guest.cpp).
#include <sys/stat.h>
#include <unistd.h>

#include "catch.hpp"

#include "config.hpp"
#include "doctor.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "ledger.hpp"
#include "proc.hpp"
#include "support.hpp"

TEST_CASE("configuration: defaults, %n, unknown keys refused", "[core]") {
    auto c = svm::parse_config(R"({"state_dir": "/run/x/%n", "domain_type": "qemu",
        "network": {"prefix": "10.1.0.0/16", "netns": "u-%n"}})",
                               "node7", "test.json");
    CHECK(c.state_dir == "/run/x/node7");
    CHECK(c.job_dir(42) == "/run/x/node7/job_42");
    CHECK(c.ledger_path(42) == "/run/x/node7/ledger/job_42.json");
    CHECK(c.boot_timeout_s == 300);
    CHECK(c.network.netns == "u-node7");
    CHECK(c.network.underlay == "%n");
    CHECK(c.network.mtu == 1450);
    try {
        svm::parse_config(R"({"stat_dir": "/x"})", "n", "bad.json");
        FAIL("accepted an unknown key");
    } catch (const svm::Error& e) {
        CHECK(std::string(e.what()).find("unknown key \"stat_dir\"") != std::string::npos);
        CHECK(std::string(e.what()).find("bad.json") != std::string::npos);
    }
    CHECK_THROWS_AS(svm::parse_config(R"({"domain_type": "xen"})", "n", "x"), svm::Error);
    CHECK_THROWS_AS(svm::parse_config(R"({"network": {"bridge": "b"}})", "n", "x"), svm::Error);
}

TEST_CASE("the example configurations in etc/ parse", "[core]") {
    for (const auto& f : svm::list_dir(std::string(SVM_SOURCE_DIR) + "/etc")) {
        if (f.rfind("slurm-vm", 0) != 0 || f.find(".json") == std::string::npos ||
            f.find("schema") != std::string::npos)
            continue;
        INFO(f);
        CHECK_NOTHROW(svm::load_config(std::string(SVM_SOURCE_DIR) + "/etc/" + f, "node1"));
    }
}

TEST_CASE("ledger: recorded before, undone in reverse, idempotent", "[core]") {
    svm::test::TempDir d_dir("svm-unit");
    std::string d = d_dir.path();
    std::string path = d + "/job_5.json";
    {
        auto l = svm::Ledger::load(path, 5);
        CHECK_FALSE(l.exists_on_disk());
        for (const char* k : {"a", "b", "c"}) {
            svm::Json j(json_object());
            json_object_set_new(j.get(), "name", json_string(k));
            l.record("step", std::move(j));
        }
        CHECK(l.exists_on_disk());
        CHECK((svm::read_file(path).find("\"c\"") != std::string::npos));
    }
    auto l = svm::Ledger::load(path, 5);
    REQUIRE(l.entries().size() == 3);
    std::vector<std::string> order;
    auto undo = [&](const svm::LedgerEntry& e) {
        order.push_back(*svm::json_get_string(e.data.get(), "name"));
        if (order.size() == 2) SVM_THROW("injected");
    };
    auto failures = svm::undo_all(l, undo);
    CHECK(order == std::vector<std::string>{"c", "b", "a"});  // every entry tried despite the failure
    REQUIRE(failures.size() == 1);
    CHECK(failures[0].find("injected") != std::string::npos);
    CHECK(svm::path_exists(path));  // kept: not clean
    order.clear();
    auto l2 = svm::Ledger::load(path, 5);
    auto ok = [&](const svm::LedgerEntry&) { order.push_back("x"); };
    CHECK(svm::undo_all(l2, ok).empty());
    CHECK_FALSE(svm::path_exists(path));
    auto l3 = svm::Ledger::load(path, 5);  // nothing left: a second epilog is a no-op
    CHECK(svm::undo_all(l3, ok).empty());
}

TEST_CASE("doctor says when the running Slurm is not the plugin's release", "[core]") {
    std::string cfg = "Configuration data as of now\nSLURM_VERSION           = 24.11.5\n";
    CHECK(svm::check_slurm_release(cfg, "24.11").status == svm::CheckStatus::ok);
    auto old = svm::check_slurm_release(cfg, "22.05");
    CHECK(old.status == svm::CheckStatus::fail);
    CHECK(old.message.find("24.11.5") != std::string::npos);
    CHECK(old.message.find("22.05") != std::string::npos);
    CHECK(old.fix.find("24.11") != std::string::npos);
    // 24.1 is not 24.11, nor 22.05 22.5.
    CHECK(svm::check_slurm_release("SLURM_VERSION = 24.1.0\n", "24.11").status == svm::CheckStatus::fail);
    CHECK(svm::check_slurm_release("SLURM_VERSION = 22.05.8\n", "22.05").status == svm::CheckStatus::ok);
    CHECK(svm::check_slurm_release("ClusterName = x\n", "22.05").status == svm::CheckStatus::warn);
}

TEST_CASE("doctor checks the Slurm settings slurm-vm relies on", "[core]") {
    std::string good =
        "Configuration data as of now\nPrologFlags             = Alloc,Contain\n"
        "ProctrackType           = proctrack/cgroup\nTaskPlugin              = task/cgroup,task/affinity\n"
        "Prolog                  = /usr/sbin/slurm-vm-prolog\nEpilog                  = /usr/sbin/slurm-vm-epilog\n"
        "PlugStackConfig         = /etc/slurm/plugstack.conf\n";
    CHECK(svm::slurm_config_value(good, "PlugStackConfig") == "/etc/slurm/plugstack.conf");
    CHECK(svm::slurm_config_value(good, "Prolog") == "/usr/sbin/slurm-vm-prolog");  // not PrologFlags
    auto r = svm::check_slurm_config(good, "required /usr/lib/slurm/slurm-vm.so config=/etc/slurm-vm/slurm-vm.json\n");
    CHECK_FALSE(svm::doctor_failed(r));
    std::string bad =
        "PrologFlags             = Alloc\nProctrackType           = proctrack/linuxproc\n"
        "TaskPlugin              = task/affinity\nProlog                  = (null)\n";
    auto b = svm::check_slurm_config(bad, "");
    CHECK(svm::doctor_failed(b));
    int fails = 0;
    for (const auto& c : b) {
        if (c.status == svm::CheckStatus::fail) {
            ++fails;
            CHECK_FALSE(c.fix.empty());
        }
    }
    CHECK(fails == 5);  // prologflags, proctrack, prolog, epilog, plugstack
    // RunInJob: no guest starts with it (Slurm 24.11), whatever else is set.
    std::string in_job = good;
    in_job.replace(in_job.find("Alloc,Contain"), 13, "Alloc,Contain,RunInJob");
    auto j = svm::check_slurm_config(in_job, "required /usr/lib/slurm/slurm-vm.so\n");
    REQUIRE(j.front().name == "slurm-prologflags");
    CHECK(j.front().status == svm::CheckStatus::fail);
    CHECK(j.front().fix.find("remove RunInJob") != std::string::npos);
}

TEST_CASE("doctor checks that the jobs' guest groups hold no group of the site", "[core]") {
    svm::test::TempDir t;
    svm::NodeConfig cfg;
    cfg.job_gid_base = 0x70000000u;
    const uint32_t max = 67043328;
    std::string nss = svm::path_join(t.path(), "nsswitch.conf");
    svm::replace_file(nss, "passwd: files\ngroup:  files   # sss later\n", 0644);
    std::vector<gid_t> asked;
    svm::GroupSource src;
    src.nsswitch = nss;
    src.all = [] { return std::vector<std::pair<gid_t, std::string>>{{0, "root"}, {1000, "users"}}; };
    src.by_gid = [&](gid_t g) -> std::optional<std::string> {
        asked.push_back(g);
        return std::nullopt;
    };
    auto r = svm::check_job_groups(cfg, max, src);
    REQUIRE(r.size() == 1);
    CHECK(r[0].status == svm::CheckStatus::ok);
    REQUIRE(asked.size() == 64);  // both ends and 62 between
    CHECK(asked.front() == 0x70000000u);
    CHECK(asked.back() == 0x70000000u + max);

    // Enumerated: a group inside the range fails, named.
    src.all = [] { return std::vector<std::pair<gid_t, std::string>>{{0x70000000u + 77, "ad-staff"}}; };
    r = svm::check_job_groups(cfg, max, src);
    CHECK(r[0].status == svm::CheckStatus::fail);
    CHECK(r[0].message.find("ad-staff (1879048269)") != std::string::npos);
    // Not enumerable (SSSD's default), found by a sampled gid.
    src.all = [] { return std::vector<std::pair<gid_t, std::string>>{}; };
    src.by_gid = [&](gid_t g) -> std::optional<std::string> {
        if (g == 0x70000000u + max) return "DOMAIN\\group";
        return std::nullopt;
    };
    r = svm::check_job_groups(cfg, max, src);
    CHECK(r[0].status == svm::CheckStatus::fail);
    CHECK(r[0].message.find("DOMAIN\\group") != std::string::npos);
    // SSSD serves groups and its default id-mapping range covers the base: a warning...
    src.by_gid = [](gid_t) -> std::optional<std::string> { return std::nullopt; };
    svm::replace_file(nss, "group: files sss systemd\n", 0644);
    r = svm::check_job_groups(cfg, max, src);
    CHECK(r[0].status == svm::CheckStatus::warn);
    CHECK(r[0].fix.find("2000200000") != std::string::npos);
    // ... which a base above that range silences.
    cfg.job_gid_base = 2000200000u;
    CHECK(svm::check_job_groups(cfg, max, src)[0].status == svm::CheckStatus::ok);
    // A MaxJobId above the range the groups may take.
    CHECK(svm::check_job_groups(cfg, 0x7fffffffu, src)[0].status == svm::CheckStatus::fail);
    // The real name service answers for a group every system has.
    CHECK(svm::group_of_gid(0) == std::optional<std::string>("root"));
    CHECK_FALSE(svm::group_of_gid(0x70000000u + 12345).has_value());
}
