// [devices] The device configuration (parser and JSON schema against the
// fixtures), `slurm-vm inventory` and `slurm-vm doctor` on fake trees (the
// doctor's checks themselves: job/tests/test_doctor_devices.cpp), and the
// inventory of a tree replayed from a real GPU node's sysfs.
#include <unistd.h>

#include <map>
#include "catch.hpp"

#include "device_plan.hpp"
#include "device_scenarios.hpp"
#include "fs.hpp"
#include "inventory.hpp"
#include "proc.hpp"
#include "support.hpp"

using namespace svm;
using namespace svm::test;

static const std::string kFixtures = std::string(SVM_SOURCE_DIR) + "/tests/fixtures";
static const std::string kAdmin = std::string(SVM_BINARY_DIR) + "/admin/slurm-vm";

TEST_CASE("device configuration fixtures: valid ones parse, invalid ones are refused by name", "[devices]") {
    DeviceConfig full = load_device_config(kFixtures + "/devices/valid/full.json");
    REQUIRE(full.gpus.size() == 3);
    CHECK(full.gpus[0].nvidia_minor == 0);
    CHECK(full.gpus[2].vfio_group == 20);
    CHECK(full.gpu_by_minor(1)->pci.str() == "0000:1c:00.0");
    REQUIRE(full.vf_providers.size() == 2);
    CHECK(full.vf_providers[1].pci.str() == "0000:ab:00.0");
    CHECK(full.vf_providers[1].link_layer.empty());
    CHECK(full.guid_prefix == "02:c9:fa:ce");
    CHECK(full.node_id == 17);
    CHECK(full.policy.allow_no_reset);
    CHECK_FALSE(full.policy.allow_unsafe_interrupts);
    CHECK(full.unbind_timeout_s == 30);
    for (const auto& f : list_dir(kFixtures + "/devices/valid")) {
        INFO(f);
        CHECK_NOTHROW(load_device_config(kFixtures + "/devices/valid/" + f));
    }
    const std::map<std::string, std::string> expected = {
        {"unknown-gpu-key.json", "devices.gpus[0]: unknown key \"minor\""},
        {"bad-address.json",
         "devices.gpus[0].pci must be a PCI address DDDD:BB:DD.F such as \"0000:3b:00.0\" (it is "
         "\"0000:3b:00\")"},
        {"missing-pci.json", "devices.gpus[0] needs \"pci\" (the GPU's PCI address)"},
        {"gpus-not-array.json", "devices.gpus must be an array"},
        {"short-guid-prefix.json", "devices.guid_prefix must be 4 hex bytes such as \"02:c9:00:00\""},
        {"node-id-range.json", "devices.node_id must be at most 65535 (it is 70000)"},
        {"policy-not-bool.json", "devices.policy.allow_unsafe_interrupts must be true or false"},
        {"bad-link-layer.json", "devices.vf_providers[0].link_layer must be \"infiniband\" or \"ethernet\""},
        {"relative-state-dir.json", "devices.vf_state_dir must be an absolute path"},
        {"unknown-key.json", "devices: unknown key \"gpu\""},
        {"minor-range.json", "devices.gpus[0].nvidia_minor must be at most 255 (it is 300)"},
    };
    auto files = list_dir(kFixtures + "/devices/invalid");
    CHECK(files.size() == expected.size());
    for (const auto& f : files) {
        INFO(f);
        std::string path = kFixtures + "/devices/invalid/" + f;
        std::string err = error_of([&] { load_device_config(path); });
        REQUIRE(expected.count(f));
        CHECK_THAT(err, Catch::Contains(expected.at(f)));
        CHECK_THAT(err, Catch::StartsWith(path + ": devices"));
    }
    CHECK_THAT(error_of([] { config_from(R"({"gpus": [{"pci": "0000:3b:00.0"}, {"pci": "3b:00.0"}]})"); }),
               Catch::Contains("0000:3b:00.0 listed twice"));
}

TEST_CASE("device configuration fixtures agree with etc/slurm-vm.devices.schema.json", "[devices]") {
    // The schema is checked with python3's jsonschema where it is installed.
    std::vector<std::string> files;
    for (const char* kind : {"valid", "invalid"})
        for (const auto& f : list_dir(kFixtures + "/devices/" + kind))
            files.push_back(kFixtures + "/devices/" + kind + "/" + f);
    auto r = run_schema_script(std::string(SVM_SOURCE_DIR) + "/etc/slurm-vm.devices.schema.json",
                               "bad = 0\n"
                               "for path in sys.argv[2:]:\n"
                               "    doc = json.load(open(path)).get('devices', {})\n"
                               "    errs = list(v.iter_errors(doc))\n"
                               "    want_valid = '/valid/' in path\n"
                               "    if bool(errs) == want_valid:\n"
                               "        print('MISMATCH', path, [e.message for e in errs]); bad += 1\n"
                               "sys.exit(1 if bad else 0)\n",
                               files);
    if (!r) return;
    INFO(r->out << r->err);
    CHECK(r->ok());
}

namespace {

const json_t* device_in(const json_t* inv, const std::string& address) {
    size_t i;
    json_t* d;
    json_array_foreach(json_object_get(inv, "devices"), i, d) {
        if (address == json_string_value(json_object_get(d, "address"))) return d;
    }
    return nullptr;
}

std::string s(const json_t* obj, const char* key) {
    json_t* v = json_object_get(obj, key);
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_integer(v)) return std::to_string(json_integer_value(v));
    if (!v || json_is_null(v)) return "null";
    return json_dump(v);
}

}  // namespace

TEST_CASE("inventory describes GPUs, their groups and SR-IOV functions", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    gpu_audio(fs);
    foreign_nvme(fs);
    hca(fs, "0000:5e:00.0", 1, 40, 2);
    DeviceConfig cfg = config_from(R"({"gpus": [{"pci": "0000:3b:00.0"}], "vf_providers": [{"pci": "0000:5e:00.0"}]})");
    Json inv = build_inventory(fs.sysfs_root(), &cfg);
    const json_t* node = json_object_get(inv.get(), "node");
    CHECK(json_dump(node) ==
          R"({"allow_unsafe_interrupts":false,"cmdline_requests_iommu":true,"hugepages":{"hugepages-1048576kB":0,)"
          R"("hugepages-2048kB":0},"interrupt_remapping":"yes","iommu_enabled":true,"iommu_groups":4,)"
          R"("iommu_vendor":"intel","numa_nodes":[{"cpus":"0-7","node":0},{"cpus":"8-15","node":1}],"vfio_pci":true})");
    // GPUs and network functions only; VFs under their PF; the nvme, bridge and audio not listed.
    std::vector<std::string> listed;
    size_t i;
    json_t* d;
    json_array_foreach(json_object_get(inv.get(), "devices"), i, d) listed.push_back(s(d, "address"));
    CHECK(listed == std::vector<std::string>{"0000:3b:00.0", "0000:5e:00.0"});
    const json_t* gpu = device_in(inv.get(), "0000:3b:00.0");
    REQUIRE(gpu);
    CHECK(s(gpu, "vendor_device") == "10de:20b0");
    CHECK(s(gpu, "class") == "0x030200");
    CHECK(s(gpu, "kind") == "gpu");
    CHECK(s(gpu, "driver") == "nvidia");
    CHECK(s(gpu, "numa_node") == "0");
    CHECK(s(gpu, "local_cpus") == "0-7");
    CHECK(s(gpu, "iommu_group") == "7");
    CHECK(s(gpu, "reset_methods") == R"(["flr","bus"])");
    CHECK(s(gpu, "configured") == "gpu");
    CHECK(s(gpu, "group_members") == R"([{"address":"0000:3a:00.0","bridge":true,"driver":"pcieport"},)"
                                     R"({"address":"0000:3b:00.1","bridge":false,"driver":"snd_hda_intel"},)"
                                     R"({"address":"0000:3c:00.0","bridge":false,"driver":"nvme"}])");
    CHECK(s(gpu, "problems") == R"x(["IOMMU group shared with 0000:3c:00.0 (nvme)"])x");
    const json_t* pf = device_in(inv.get(), "0000:5e:00.0");
    REQUIRE(pf);
    CHECK(s(pf, "kind") == "infiniband");
    CHECK(s(pf, "configured") == "vf_provider");
    CHECK(s(pf, "sriov") == R"({"numvfs":2,"totalvfs":8,"vfs":["0000:5e:00.1","0000:5e:00.2"]})");
    CHECK(s(pf, "problems") == "[]");
    // --all lists everything.
    InventoryOptions all;
    all.all = true;
    CHECK(json_array_size(json_object_get(build_inventory(fs.sysfs_root(), &cfg, all).get(), "devices")) == 7);
    // The table names the same things.
    std::string table = format_inventory_table(inv.get());
    CHECK_THAT(table, Catch::Contains("IOMMU: yes (4 groups)"));
    CHECK_THAT(table, Catch::Contains("0000:3b:00.0  10de:20b0"));
    CHECK_THAT(table, Catch::Contains("7 (+0000:3a:00.0,0000:3b:00.1,0000:3c:00.0)"));
    CHECK_THAT(table, Catch::Contains("2/8"));
}

TEST_CASE("inventory of a tree replayed from a real GPU node", "[devices]") {
    // Captured read-only with tests/fixtures/sysfs/capture.sh on a cloud VM with
    // one NVIDIA H200: the guest has no IOMMU, so no groups and NUMA node -1.
    FakeSysfs fs;
    fs.load_manifest(kFixtures + "/sysfs/h200-guest.manifest");
    Json inv = build_inventory(fs.sysfs_root(), nullptr);
    const json_t* gpu = device_in(inv.get(), "0000:00:06.0");
    REQUIRE(gpu);
    CHECK(s(gpu, "vendor") == "10de");
    CHECK(s(gpu, "vendor_device") == "10de:2335");
    CHECK(s(gpu, "class") == "0x030200");
    CHECK(s(gpu, "driver") == "nvidia");
    CHECK(s(gpu, "numa_node") == "-1");
    CHECK(s(gpu, "local_cpus") == "0-15");
    CHECK(s(gpu, "iommu_group") == "null");
    CHECK(s(gpu, "reset_methods") == R"(["flr"])");
    CHECK(s(gpu, "problems") == R"(["no IOMMU group"])");
    const json_t* nic = device_in(inv.get(), "0000:00:03.0");
    REQUIRE(nic);
    CHECK(s(nic, "kind") == "ethernet");
    CHECK(s(nic, "driver") == "virtio-pci");
    const json_t* node = json_object_get(inv.get(), "node");
    CHECK(json_is_false(json_object_get(node, "iommu_enabled")));
    CHECK(json_is_false(json_object_get(node, "vfio_pci")));
    // And the planner says why it cannot be passed through.
    CHECK_THAT(
        error_of([&] { plan_devices_for(fs.sysfs_root(), DeviceConfig{}, {PciAddress::parse("0000:00:06.0")}); }),
        Catch::StartsWith("0000:00:06.0: no IOMMU group") && Catch::Contains("the IOMMU is off"));
}

TEST_CASE("slurm-vm inventory and doctor: help, JSON, exit status", "[devices]") {
    if (!path_exists(kAdmin)) {
        WARN("admin binary not built: " << kAdmin);
        return;
    }
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    TempDir dir;
    std::string cfg = dir.path() + "/node.json";
    // Shares over 9p: the doctor's shares check needs no virtiofsd (Debian 13 has no QEMU one).
    // TCG guests and a KVM device of the test's own (absent): the host's
    // /dev/kvm, present or not, is no part of this test.
    write_file_atomic(cfg, R"({"shares_via": "9p", "domain_type": "qemu", "kvm_device": ")" + dir.path() +
                               R"(/kvm", "devices": {"gpus": [{"pci": "0000:3b:00.0", "nvidia_minor": 0}]}})");

    auto help = run({kAdmin, "inventory", "--help"});
    CHECK(help.status == 0);
    CHECK_THAT(help.out,
               Catch::Contains("--root DIR") && Catch::Contains("--json") && Catch::Contains("--config FILE"));
    CHECK(run({kAdmin, "inventory", "--bogus"}).status == 2);
    auto inv = run({kAdmin, "inventory", "--root", fs.root(), "--json", "--config", cfg});
    REQUIRE(inv.status == 0);
    Json j = json_parse(inv.out, "inventory output");
    const json_t* gpu = device_in(j.get(), "0000:3b:00.0");
    REQUIRE(gpu);
    CHECK(s(gpu, "configured") == "gpu");
    CHECK(s(gpu, "iommu_group") == "7");
    auto table = run({kAdmin, "inventory", "--root", fs.root()});
    CHECK(table.status == 0);
    CHECK_THAT(table.out, Catch::Contains("ADDRESS") && Catch::Contains("0000:3b:00.0"));

    auto dhelp = run({kAdmin, "doctor", "--help"});
    CHECK(dhelp.status == 0);
    CHECK_THAT(dhelp.out, Catch::Contains("interrupt-remapping") && Catch::Contains("--skip"));
    auto ok = run({kAdmin, "doctor", "--root", fs.root(), "--config", cfg, "--skip", "qemu,vfs", "--json"});
    INFO(ok.out << ok.err);
    CHECK(ok.status == 0);
    CHECK(json_is_true(json_object_get(json_parse(ok.out, "doctor").get(), "ok")));
    fs.iommu(false);
    auto fail = run({kAdmin, "doctor", "--root", fs.root(), "--config", cfg, "--skip", "qemu"});
    CHECK(fail.status == 1);
    CHECK_THAT(fail.out, Catch::Contains("[FAIL] iommu: IOMMU off"));
    CHECK_THAT(fail.out, Catch::Contains("fix: enable VT-d/AMD-Vi"));
    auto missing = run({kAdmin, "doctor", "--root", fs.root(), "--config", dir.path() + "/nope.json"});
    CHECK(missing.status == 1);
    CHECK_THAT(missing.err, Catch::Contains("nope.json"));
}
