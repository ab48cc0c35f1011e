// [devices] The VF pool and the prolog's device steps: claims, exhaustion,
// racing processes, failure at every step with undo back to the original tree.
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include "catch.hpp"

#include "device_scenarios.hpp"
#include "device_steps.hpp"
#include "fs.hpp"
#include "support.hpp"
#include "vf_pool.hpp"

using namespace svm;
using namespace svm::test;

namespace {

// A real ledger file in a directory of its own.
struct MiniLedger {
    TempDir dir{"svm-device-ledger"};
    Ledger ledger = Ledger::load(path_join(dir.path(), "job_1.json"), 1);
    Ledger& fn() { return ledger; }
    const std::vector<LedgerEntry>& entries() const { return ledger.entries(); }
    // Undo in reverse order, every entry tried; read back from the file, as the epilog does.
    void undo(const SysfsRoot& root, SysfsWriter& w, const DeviceConfig& cfg) {
        Ledger again = Ledger::load(ledger.path(), 1);
        for (auto it = again.entries().rbegin(); it != again.entries().rend(); ++it)
            undo_device_entry(root, w, cfg, *it);
    }
    // Entry i's record as written, without the ledger's time stamp.
    std::string record(size_t i) const {
        Json d(json_deep_copy(entries().at(i).data.get()));
        json_object_del(d.get(), "recorded_at");
        return json_dump(d.get());
    }
};

DeviceConfig vf_config(const std::string& state_dir, const std::string& pfs) {
    return config_from(R"({"vf_providers": [)" + pfs + R"(], "guid_prefix": "02:c9:fa:ce", "node_id": 258,
                           "vf_state_dir": ")" +
                       state_dir + R"("})");
}

}  // namespace

TEST_CASE("VF GUIDs and MACs are deterministic and distinct", "[devices]") {
    DeviceConfig cfg = config_from(R"({"guid_prefix": "02:c9:fa:ce", "node_id": 258})");
    CHECK(vf_node_guid(cfg, 258, 1, 3) == "02:c9:fa:ce:01:02:01:06");
    CHECK(vf_port_guid(cfg, 258, 1, 3) == "02:c9:fa:ce:01:02:01:07");
    CHECK(vf_mac(cfg, 258, 1, 3) == "02:c9:01:02:01:03");
    CHECK(vf_node_id(cfg, "any") == 258);
    DeviceConfig nocfg;
    CHECK(vf_node_id(nocfg, "node001") == vf_node_id(nocfg, "node001"));
    CHECK(vf_node_id(nocfg, "node001") != vf_node_id(nocfg, "node002"));
    std::set<std::string> guids;
    for (int pf = 0; pf < 2; ++pf)
        for (int i = 0; i < 128; ++i) {
            guids.insert(vf_node_guid(cfg, 258, pf, i));
            guids.insert(vf_port_guid(cfg, 258, pf, i));
        }
    CHECK(guids.size() == 512);
    CHECK_THROWS_WITH(vf_node_guid(cfg, 258, 0, 128), Catch::Contains("VF index 128"));
}

TEST_CASE("VF pool: one VF per job, near the GPUs, exhausted with a clear error", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    hca(fs, "0000:2b:00.0", 0, 30, 2);
    hca(fs, "0000:ab:00.0", 1, 40, 1);
    TempDir state;
    DeviceConfig cfg = vf_config(state.path(), R"({"pci": "0000:2b:00.0"}, {"pci": "0000:ab:00.0"})");
    SysfsRoot root = fs.sysfs_root();
    FakeKernel k(fs);
    VfPool pool(root, k, cfg, "node001");
    VfAssignment a = pool.reserve({"101"}, 1);
    CHECK(a.vf.str() == "0000:ab:00.1");  // on NUMA node 1, as asked
    CHECK(a.pf_ordinal == 1);
    CHECK(a.link_layer == "infiniband");
    CHECK(a.node_guid == "02:c9:fa:ce:01:02:01:00");
    CHECK(pool.reserve({"101"}, 0).vf == a.vf);                  // asked again: the same VF
    CHECK(pool.reserve({"102"}, 1).vf.str() == "0000:2b:00.1");  // node 1 full: the other node
    CHECK(pool.reserve({"103"}).vf.str() == "0000:2b:00.2");
    CHECK(pool.holders() == std::map<std::string, std::string>{
                                {"0000:2b:00.1", "102"}, {"0000:2b:00.2", "103"}, {"0000:ab:00.1", "101"}});
    std::string err = error_of([&] { pool.reserve({"104"}); });
    CHECK_THAT(err, Catch::StartsWith("VF pool exhausted: all 3 VFs of 0000:2b:00.0, 0000:ab:00.0 are held (by jobs "
                                      "101, 102, 103); job 104 gets none"));
    pool.release({"102"});
    pool.release({"102"});  // twice: harmless
    pool.release({"999"});  // never held: harmless
    CHECK(pool.reserve({"104"}).vf.str() == "0000:2b:00.1");
    CHECK(k.writes() == 0);  // reserving writes only the pool state, never sysfs

    // A PF without VFs.
    hca(fs, "0000:5e:00.0", 0, 60, 0);
    TempDir state2;
    DeviceConfig empty = vf_config(state2.path(), R"({"pci": "0000:5e:00.0"})");
    VfPool pool2(root, k, empty, "node001");
    CHECK_THAT(error_of([&] { pool2.reserve({"1"}); }),
               Catch::StartsWith("no VFs to hand out: 0000:5e:00.0 (sriov_numvfs is 0 of 8)"));
}

TEST_CASE("VF pool: processes racing for VFs never share one", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    hca(fs, "0000:2b:00.0", 0, 30, 8);
    TempDir state;
    DeviceConfig cfg = vf_config(state.path(), R"({"pci": "0000:2b:00.0"})");
    SysfsRoot root = fs.sysfs_root();
    const int kProcs = 8;
    int go[2], results[2];
    REQUIRE(::pipe(go) == 0);
    REQUIRE(::pipe(results) == 0);
    std::vector<pid_t> pids;
    for (int i = 0; i < kProcs; ++i) {
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(go[1]);
            char c;
            (void)!::read(go[0], &c, 1);  // all start together
            int rc = 0;
            std::string line;
            try {
                FakeKernel k(fs);
                VfPool pool(root, k, cfg, "node001");
                line = pool.reserve({"job" + std::to_string(i)}).vf.str() + "\n";
            } catch (const std::exception& e) {
                line = std::string("ERROR ") + e.what() + "\n";
                rc = 1;
            }
            (void)!::write(results[1], line.data(), line.size());
            ::_exit(rc);
        }
        pids.push_back(pid);
    }
    ::close(go[0]);
    ::close(results[1]);
    ::close(go[1]);  // EOF releases every child at once
    std::string out;
    char buf[512];
    ssize_t n;
    while ((n = ::read(results[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(results[0]);
    for (pid_t p : pids) {
        int status = 0;
        ::waitpid(p, &status, 0);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    std::set<std::string> got;
    std::stringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        INFO(line);
        CHECK(line.rfind("0000:2b:", 0) == 0);
        got.insert(line);
    }
    CHECK(got.size() == kProcs);  // eight different VFs
    FakeKernel k(fs);
    CHECK(VfPool(root, k, cfg).holders().size() == kProcs);
}

namespace {

// GPU + audio in group 7 and an HCA with two VFs on NUMA node 0.
void full_node(FakeSysfs& fs) {
    base_node(fs);
    one_gpu(fs);
    gpu_audio(fs);
    hca(fs, "0000:2b:00.0", 0, 30, 2);
}

// That node, its VFs from the HCA 0000:2b:00.0 (vf_config), their state in
// a directory of the test's own.
struct VfNode {
    FakeSysfs fs;
    TempDir state;
    DeviceConfig cfg = vf_config(state.path(), R"({"pci": "0000:2b:00.0"})");
    SysfsRoot root = fs.sysfs_root();
    VfNode() { full_node(fs); }
};

}  // namespace

TEST_CASE_METHOD(VfNode, "prepare_devices: GPU, audio and a VF, recorded before acting, undone to the original tree",
                 "[devices]") {
    DevicePlan plan = plan_devices(root, cfg, {"/dev/nvidia0"});
    auto before = fs.snapshot();
    FakeKernel k(fs);
    MiniLedger ledger;
    // Each record must be in the ledger before its write: count writes at record time.
    std::vector<int> writes_at_record;
    Ledger::set_record_hook_for_tests([&](const LedgerEntry&) { writes_at_record.push_back(k.writes()); });
    PreparedDevices p = prepare_devices(root, k, cfg, plan, {.job = "42"}, ledger.fn());
    Ledger::set_record_hook_for_tests(nullptr);
    REQUIRE(ledger.entries().size() == 5);
    std::vector<std::string> kinds;
    for (auto& e : ledger.entries()) kinds.push_back(e.kind);
    CHECK(kinds == std::vector<std::string>{"vfio_bind", "vfio_bind", "vf_reservation", "vf_config", "vfio_bind"});
    CHECK(writes_at_record == std::vector<int>{0, 3, 6, 6, 9});
    REQUIRE(p.vf);
    CHECK(p.vf->vf.str() == "0000:2b:00.1");
    CHECK(p.hostdevs.size() == 3);
    CHECK(p.numa_node == 0);
    CHECK(fs.driver_of("0000:3b:00.0") == "vfio-pci");
    CHECK(fs.driver_of("0000:3b:00.1") == "vfio-pci");
    CHECK(fs.driver_of("0000:2b:00.1") == "vfio-pci");
    CHECK(path_exists(root.dev_vfio(7)));
    CHECK(path_exists(root.dev_vfio(31)));
    CHECK(trim(read_file(root.pci_attr(PciAddress::parse("0000:2b:00.0"), "sriov/0/node"))) ==
          "02:c9:fa:ce:01:02:00:00");
    CHECK(trim(read_file(root.pci_attr(PciAddress::parse("0000:2b:00.0"), "sriov/0/port"))) ==
          "02:c9:fa:ce:01:02:00:01");
    CHECK(trim(read_file(root.pci_attr(PciAddress::parse("0000:2b:00.0"), "sriov/0/policy"))) == "Follow");
    CHECK(ledger.record(3) ==
          R"({"index":0,"link_layer":"infiniband","pf":"0000:2b:00.0","previous":{"node":"00:00:00:00:00:00:00:00",)"
          R"("policy":"Down","port":"00:00:00:00:00:00:00:00"},"set":{"node":"02:c9:fa:ce:01:02:00:00",)"
          R"("policy":"Follow","port":"02:c9:fa:ce:01:02:00:01"},"vf":"0000:2b:00.1"})");
    CHECK(ledger.record(2) == R"({"job":"42"})");

    ledger.undo(root, k, cfg);
    CHECK(fs.changes_since(before) == "");
    CHECK(VfPool(root, k, cfg).holders().empty());
    ledger.undo(root, k, cfg);  // the epilog after a failed prolog's own undo
    CHECK(fs.changes_since(before) == "");
    CHECK(k.refusals().empty());
}

TEST_CASE("a failure injected at every write of bind + VF claim is undone byte for byte", "[devices]") {
    // Learn how many writes a clean run takes.
    int total = 0;
    {
        FakeSysfs fs;
        full_node(fs);
        TempDir state;
        DeviceConfig cfg = vf_config(state.path(), R"({"pci": "0000:2b:00.0"})");
        FakeKernel k(fs);
        MiniLedger ledger;
        prepare_devices(fs.sysfs_root(), k, cfg, plan_devices(fs.sysfs_root(), cfg, {"/dev/nvidia0"}), {.job = "7"},
                        ledger.fn());
        total = k.writes();
    }
    REQUIRE(total == 12);
    for (int n = 1; n <= total; ++n) {
        DYNAMIC_SECTION("write " << n << " fails") {
            FakeSysfs fs;
            full_node(fs);
            TempDir state;
            DeviceConfig cfg = vf_config(state.path(), R"({"pci": "0000:2b:00.0"})");
            SysfsRoot root = fs.sysfs_root();
            DevicePlan plan = plan_devices(root, cfg, {"/dev/nvidia0"});
            auto before = fs.snapshot();
            FakeKernel k(fs);
            k.fail_write(n, n % 2 ? EIO : ENODEV);
            MiniLedger ledger;
            std::string err = error_of([&] { prepare_devices(root, k, cfg, plan, {.job = "7"}, ledger.fn()); });
            INFO(err);
            CHECK_FALSE(err.empty());
            CHECK_THAT(err, Catch::Contains("0000:"));  // names the device
            ledger.undo(root, k, cfg);
            CHECK(fs.changes_since(before) == "");
            CHECK(VfPool(root, k, cfg).holders().empty());
            ledger.undo(root, k, cfg);
            CHECK(fs.changes_since(before) == "");
            CHECK(k.refusals().empty());
        }
    }
}

TEST_CASE_METHOD(VfNode, "steps recorded but never taken, or taken twice, undo cleanly", "[devices]") {
    auto before = fs.snapshot();
    FakeKernel k(fs);
    VfioBinder b(root, k);
    VfPool pool(root, k, cfg, "node001");
    // Recorded, then a crash before acting: undo finds nothing to do.
    BindRecord r = b.prepare(PciAddress::parse("0000:3b:00.0"));
    VfAssignment a = pool.reserve({"9"});
    VfConfigRecord c = pool.prepare_config(a);
    pool.release({"9"});
    int w = k.writes();
    b.undo(r);
    pool.undo_config(c);
    pool.release({"9"});
    CHECK(k.writes() == w);
    CHECK(fs.changes_since(before) == "");
    // Taken twice (a prolog retried): one undo is enough.
    b.bind(r);
    b.bind(r);
    pool.apply_config(c);
    pool.apply_config(c);
    b.undo(r);
    pool.undo_config(c);
    CHECK(fs.changes_since(before) == "");
    // Records from an unknown kind are refused by name.
    CHECK_THROWS_WITH(undo_device_entry(root, k, cfg, {"domain", Json(json_object())}),
                      Catch::Contains("not a device step"));
    CHECK_THROWS_WITH(BindRecord::from_json(json_parse("{}", "x").get()),
                      Catch::Equals("ledger record \"vfio_bind\": \"device\" is missing"));
    CHECK(k.refusals().empty());
}

TEST_CASE_METHOD(VfNode, "VFs removed under a job: undo gives back what is left", "[devices]") {
    FakeKernel k(fs);
    MiniLedger ledger;
    prepare_devices(root, k, cfg, plan_devices(root, cfg, {"/dev/nvidia0"}), {.job = "5"}, ledger.fn());
    k.write(root.pci_attr(PciAddress::parse("0000:2b:00.0"), "sriov_numvfs"), "0");
    CHECK_NOTHROW(ledger.undo(root, k, cfg));
    CHECK(fs.driver_of("0000:3b:00.0") == "nvidia");
    CHECK(k.refusals().empty());
}

TEST_CASE("GPUs kept on vfio-pci (gres File=/dev/vfio/N): no rebinding, nothing to give back", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs, "vfio-pci");
    fs.add({.address = "0000:3b:00.1",
            .vendor = 0x10de,
            .device = 0x1aef,
            .klass = 0x040300,
            .driver = "vfio-pci",
            .native_driver = std::string("snd_hda_intel"),
            .numa_node = 0,
            .iommu_group = 7,
            .parent = "0000:3a:00.0"});
    SysfsRoot root = fs.sysfs_root();
    REQUIRE(path_exists(root.dev_vfio(7)));
    DeviceConfig cfg = config_from(R"({"gpus": [{"pci": "0000:3b:00.0", "vfio_group": 7}]})");
    DevicePlan plan = plan_devices(root, cfg, {"/dev/vfio/7"});
    REQUIRE(plan.devices.size() == 2);
    CHECK(plan.devices[0].role == "gpu");
    CHECK(plan.devices[1].role == "companion");
    CHECK_FALSE(plan.devices[0].needs_bind);
    CHECK_FALSE(plan.devices[1].needs_bind);
    auto before = fs.snapshot();
    FakeKernel k(fs);
    MiniLedger ledger;
    PreparedDevices p = prepare_devices(root, k, cfg, plan, {.job = "1", .want_vf = false}, ledger.fn());
    CHECK(p.hostdevs.size() == 2);
    CHECK(ledger.entries().empty());
    CHECK(k.writes() == 0);
    CHECK(fs.changes_since(before) == "");
    // Without configuration, the group's endpoints are the allocation.
    CHECK(plan_devices(root, DeviceConfig{}, {"/dev/vfio/7"}).devices.size() == 2);
    CHECK_THROWS_WITH(plan_devices(root, cfg, {"/dev/vfio/8"}),
                      Catch::StartsWith("/dev/vfio/8: IOMMU group 8 does not exist"));
}

TEST_CASE("eight GPUs, two HCAs: the job's VF comes from the HCA next to its GPUs", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    eight_gpus(fs);
    TempDir state;
    DeviceConfig cfg = vf_config(state.path(), R"({"pci": "0000:2b:00.0"}, {"pci": "0000:ab:00.0"})");
    SysfsRoot root = fs.sysfs_root();
    FakeKernel k(fs);
    auto before = fs.snapshot();
    MiniLedger l1, l2;
    PreparedDevices j1 =
        prepare_devices(root, k, cfg, plan_devices(root, cfg, {"/dev/nvidia4", "/dev/nvidia7"}), {.job = "1"}, l1.fn());
    PreparedDevices j2 =
        prepare_devices(root, k, cfg, plan_devices(root, cfg, {"/dev/nvidia0"}), {.job = "2"}, l2.fn());
    REQUIRE(j1.vf);
    REQUIRE(j2.vf);
    CHECK(j1.vf->pf.str() == "0000:ab:00.0");
    CHECK(j1.numa_node == 1);
    CHECK(j1.cpus == "8-15");
    CHECK(j2.vf->pf.str() == "0000:2b:00.0");
    CHECK(j2.cpus == "0-7");
    CHECK(fs.driver_of("0000:9b:00.0") == "vfio-pci");
    CHECK(fs.driver_of("0000:9c:00.0") == "nvidia");
    l1.undo(root, k, cfg);
    l2.undo(root, k, cfg);
    CHECK(fs.changes_since(before) == "");
    CHECK(k.refusals().empty());
}

TEST_CASE("device records through the ledger: a crash after any record is undone from the file", "[devices]") {
    struct Crash {};  // not an svm::Error: nothing on the way catches it
    for (size_t n = 1; n <= 5; ++n) {
        DYNAMIC_SECTION("crash after record " << n) {
            FakeSysfs fs;
            full_node(fs);
            TempDir state, dir;
            DeviceConfig cfg = vf_config(state.path(), R"({"pci": "0000:2b:00.0"})");
            SysfsRoot root = fs.sysfs_root();
            DevicePlan plan = plan_devices(root, cfg, {"/dev/nvidia0"});
            auto before = fs.snapshot();
            FakeKernel k(fs);
            std::string path = path_join(dir.path(), "job_3.json");
            {
                Ledger l = Ledger::load(path, 3);
                size_t seen = 0;
                Ledger::set_record_hook_for_tests([&](const LedgerEntry&) {
                    if (++seen == n) throw Crash{};
                });
                CHECK_THROWS_AS(prepare_devices(root, k, cfg, plan, {.job = "3"}, l), Crash);
                Ledger::set_record_hook_for_tests(nullptr);
            }
            // The epilog, another process: the ledger as its file has it.
            Ledger again = Ledger::load(path, 3);
            CHECK(again.entries().size() == n);
            auto failures = undo_all(again, [&](const LedgerEntry& e) { undo_device_entry(root, k, cfg, e); });
            CHECK(failures.empty());
            CHECK(fs.changes_since(before) == "");
            CHECK(VfPool(root, k, cfg).holders().empty());
            CHECK_FALSE(path_exists(path));
            CHECK(k.refusals().empty());
        }
    }
}

TEST_CASE_METHOD(VfNode, "device records of the previous release are read, unknown or missing keys refused by name",
                 "[devices]") {
    TempDir dir;
    FakeKernel k(fs);
    auto before = fs.snapshot();
    // Bound by the previous release, whose ledger file says so in its words.
    BindRecord r = VfioBinder(root, k).prepare(PciAddress::parse("0000:3b:00.0"));
    VfioBinder(root, k).bind(r);
    std::string path = path_join(dir.path(), "job_5.json");
    write_file_atomic(path,
                      R"({"entries": [{"data": {"device": "0000:3b:00.0", "iommu_group": 7, "original_driver": )"
                      R"("nvidia", "original_override": "", "recorded_at": 1764000000, "target_driver": "vfio-pci"},)"
                      R"( "kind": "vfio_bind"}, {"data": {"job": "5", "recorded_at": 1764000000}, "kind": )"
                      R"("vf_reservation"}], "job_id": 5})",
                      0600);
    Ledger old = Ledger::load(path, 5);
    CHECK(undo_all(old, [&](const LedgerEntry& e) { undo_device_entry(root, k, cfg, e); }).empty());
    CHECK(fs.changes_since(before) == "");

    auto refusal = [](const char* json) {
        return reason_of([&] { BindRecord::from_json(json_parse(json, "record").get()); });
    };
    CHECK(refusal(R"({"device": "0000:3b:00.0", "iommu_group": 7, "original_driver": "nvidia",)"
                  R"( "original_override": "", "target_driver": "vfio-pci", "reset": true})") ==
          "ledger record \"vfio_bind\": unknown key \"reset\" (written by a newer release?)");
    CHECK(refusal(R"({"device": "0000:3b:00.0", "iommu_group": 7, "original_driver": "nvidia",)"
                  R"( "target_driver": "vfio-pci"})") ==
          "ledger record \"vfio_bind\": \"original_override\" is missing");
    CHECK(refusal(R"({"device": "0000:3b:00.0", "iommu_group": "7", "original_driver": "nvidia",)"
                  R"( "original_override": "", "target_driver": "vfio-pci"})") ==
          "ledger record \"vfio_bind\": \"iommu_group\" must be an integer");
    CHECK(reason_of([&] { VfConfigRecord::from_json(json_parse(R"({"pf": "0000:2b:00.0"})", "r").get()); }) ==
          "ledger record \"vf_config\": \"index\" is missing");
    CHECK(reason_of([&] { VfReservationRecord::from_json(json_parse(R"({"job": ""})", "r").get()); }) ==
          "vf_reservation record: \"job\" is empty");
}
