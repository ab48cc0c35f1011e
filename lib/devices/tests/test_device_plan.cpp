// [devices] PCI addresses, sysfs reads through libpci, the fake kernel itself,
// and the planner's answers and refusals.
#include <unistd.h>

#include "catch.hpp"

#include "device_plan.hpp"
#include "device_scenarios.hpp"
#include "fs.hpp"
#include "pci_device.hpp"
#include "support.hpp"
#include "vfio_binding.hpp"

using namespace svm;
using namespace svm::test;

TEST_CASE("PCI addresses parse, format and refuse junk", "[devices]") {
    CHECK(PciAddress::parse("0000:3b:00.0").str() == "0000:3b:00.0");
    CHECK(PciAddress::parse("3B:1F.7").str() == "0000:3b:1f.7");
    CHECK(PciAddress::parse("0001:00:00.0").domain == 1);
    auto a = PciAddress::parse("abcd:ef:1f.7");
    CHECK(a.domain == 0xabcd);
    CHECK(a.bus == 0xef);
    CHECK(a.slot == 0x1f);
    CHECK(a.function == 7);
    CHECK(PciAddress::from_devfn(0, 0x5e, a.devfn()).str() == "0000:5e:1f.7");
    CHECK(PciAddress::from_devfn(0, 0x5e, 0x100).str() == "0000:5f:00.0");
    for (const char* bad : {"", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8", "000:3b:00.0", "0000:3b:00.0 ", "zz:00.0",
                            "0000:3b.00.0", "0000:0000:3b:00.0"}) {
        INFO(bad);
        CHECK_FALSE(PciAddress::try_parse(bad));
    }
    CHECK_THAT(error_of([] { PciAddress::parse("3b-00"); }), Catch::Contains("'3b-00'"));
    CHECK(PciAddress::parse("0000:3b:00.0") < PciAddress::parse("0000:3b:00.1"));
}

TEST_CASE("libpci enumerates the fake tree and sysfs attributes are read", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    gpu_audio(fs);
    hca(fs, "0000:5e:00.0", 1, 40, 2);
    SysfsRoot root = fs.sysfs_root();
    auto addrs = list_pci_addresses(root);
    std::vector<std::string> s;
    for (auto& a : addrs) s.push_back(a.str());
    CHECK(s == std::vector<std::string>{"0000:3a:00.0", "0000:3b:00.0", "0000:3b:00.1", "0000:5e:00.0", "0000:5e:00.1",
                                        "0000:5e:00.2"});
    PciDevice gpu = read_pci_device(root, PciAddress::parse("0000:3b:00.0"));
    CHECK(gpu.vendor_device() == "10de:20b0");
    CHECK(gpu.class_str() == "0x030200");
    CHECK(gpu.kind() == "gpu");
    CHECK(gpu.driver == "nvidia");
    CHECK(gpu.numa_node == 0);
    CHECK(gpu.local_cpulist == "0-7");
    CHECK(gpu.iommu_group == 7);
    CHECK(gpu.reset_methods == std::vector<std::string>{"flr", "bus"});
    PciDevice audio = read_pci_device(root, PciAddress::parse("0000:3b:00.1"));
    CHECK_FALSE(audio.can_reset());
    PciDevice pf = read_pci_device(root, PciAddress::parse("0000:5e:00.0"));
    CHECK(pf.kind() == "infiniband");
    CHECK(pf.sriov_totalvfs == 8);
    CHECK(pf.sriov_numvfs == 2);
    REQUIRE(pf.virtfns.size() == 2);
    CHECK(pf.virtfns[1].str() == "0000:5e:00.2");
    PciDevice vf = read_pci_device(root, pf.virtfns[0]);
    CHECK(vf.physfn->str() == "0000:5e:00.0");
    CHECK(vf.iommu_group == 41);
    CHECK(vf.driver == "mlx5_core");

    CHECK_THAT(error_of([&] { read_pci_device(root, PciAddress::parse("0000:99:00.0")); }),
               Catch::Contains("0000:99:00.0: no such PCI device"));
    // A broken device: libpci's fatal error becomes an svm::Error, not exit()
    // (pciutils 3.9, Debian 12); a newer libpci lists it all the same, and
    // reading it then says what is missing.
    ::unlink(fs.path("sys/bus/pci/devices/0000:3b:00.1/vendor").c_str());
    std::string listing = error_of([&] { list_pci_addresses(root); });
    if (!listing.empty()) CHECK_THAT(listing, Catch::Contains("libpci"));
    CHECK_THAT(error_of([&] { scan_pci_devices(root); }), Catch::Contains("0000:3b:00.1"));
    CHECK_THAT(error_of([&] { read_pci_device(root, PciAddress::parse("0000:3b:00.1")); }),
               Catch::Contains("0000:3b:00.1: missing ") && Catch::Contains("0000:3b:00.1/vendor"));
}

TEST_CASE("the fake kernel refuses what Linux refuses", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    hca(fs, "0000:5e:00.0", 1, 40, 2);
    FakeKernel k(fs);
    SysfsRoot root = fs.sysfs_root();
    auto gpu = PciAddress::parse("0000:3b:00.0");
    auto refused = [&](const std::string& file, const std::string& value) {
        size_t before = k.refusals().size();
        CHECK_THROWS_AS(k.write(file, value), SysfsWriteError);
        CHECK(k.refusals().size() == before + 1);
    };
    // Unbinding from a driver that does not hold the device.
    refused(root.pci_driver_file("vfio-pci", "unbind"), gpu.str());
    // Binding a bound device.
    refused(root.pci_driver_file("vfio-pci", "bind"), gpu.str());
    // Binding where driver_override names another driver.
    k.write(root.pci_attr(gpu, "driver_override"), "vfio-pci");
    k.write(root.pci_driver_file("nvidia", "unbind"), gpu.str());
    CHECK(fs.driver_of(gpu.str()).empty());
    refused(root.pci_driver_file("nvidia", "bind"), gpu.str());
    // drivers_probe honours the override; /dev/vfio/7 appears (the bridge does not count).
    CHECK_FALSE(path_exists(root.dev_vfio(7)));
    k.write(root.drivers_probe(), gpu.str());
    CHECK(fs.driver_of(gpu.str()) == "vfio-pci");
    CHECK(path_exists(root.dev_vfio(7)));
    // sriov_numvfs: non-zero over non-zero, and beyond the total.
    auto pf = PciAddress::parse("0000:5e:00.0");
    refused(root.pci_attr(pf, "sriov_numvfs"), "4");
    k.write(root.pci_attr(pf, "sriov_numvfs"), "0");
    CHECK_FALSE(fs.device_exists("0000:5e:00.1"));
    CHECK_FALSE(path_exists(root.pci_attr(pf, "virtfn0")));
    refused(root.pci_attr(pf, "sriov_numvfs"), "9");
    k.write(root.pci_attr(pf, "sriov_numvfs"), "3");
    CHECK(fs.device_exists("0000:5e:00.3"));
    CHECK(fs.driver_of("0000:5e:00.3") == "mlx5_core");
    // Bad GUID, read-only attribute, outside the tree.
    refused(root.pci_attr(pf, "sriov/0/node"), "not-a-guid");
    refused(root.pci_attr(gpu, "vendor"), "0x1234");
    refused("/sys/bus/pci/drivers_probe", gpu.str());
    // Injected failures are not refusals.
    k.fail_write(k.writes() + 1, EIO);
    size_t before = k.refusals().size();
    CHECK_THROWS_AS(k.write(root.drivers_probe(), gpu.str()), SysfsWriteError);
    CHECK(k.refusals().size() == before);
}

TEST_CASE("one GPU: planned, bound to vfio-pci, given back byte for byte", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    SysfsRoot root = fs.sysfs_root();
    DeviceConfig cfg = config_from(R"({"gpus": [{"pci": "0000:3b:00.0", "nvidia_minor": 0}]})");
    DevicePlan plan = plan_devices(root, cfg, {"/dev/nvidia0"});
    REQUIRE(plan.devices.size() == 1);
    CHECK(plan.devices[0].address.str() == "0000:3b:00.0");
    CHECK(plan.devices[0].role == "gpu");
    CHECK(plan.devices[0].needs_bind);
    CHECK(plan.iommu_groups == std::vector<int>{7});
    CHECK(plan.numa_node == 0);
    CHECK(plan.cpus == "0-7");

    auto before = fs.snapshot();
    FakeKernel k(fs);
    VfioBinder b(root, k);
    BindRecord r = b.prepare(plan.devices[0].address);
    CHECK(r.original_driver == "nvidia");
    CHECK(r.iommu_group == 7);
    // The record survives the ledger.
    BindRecord back = BindRecord::from_json(r.to_json().get());
    CHECK(json_dump(back.to_json().get()) == json_dump(r.to_json().get()));
    CHECK(
        json_dump(r.to_json().get()) ==
        R"({"device":"0000:3b:00.0","iommu_group":7,"original_driver":"nvidia","original_override":"","target_driver":"vfio-pci"})");
    b.bind(r);
    CHECK(fs.driver_of("0000:3b:00.0") == "vfio-pci");
    CHECK(path_exists(root.dev_vfio(7)));
    b.verify_group_ready(7);
    CHECK(k.log() == std::vector<std::string>{
                         "sys/bus/pci/devices/0000:3b:00.0/driver_override <- vfio-pci",
                         "sys/bus/pci/drivers/nvidia/unbind <- 0000:3b:00.0",
                         "sys/bus/pci/drivers_probe <- 0000:3b:00.0",
                     });
    int writes = k.writes();
    b.bind(r);  // done twice: nothing more to do
    CHECK(k.writes() == writes);
    b.undo(r);
    CHECK(fs.driver_of("0000:3b:00.0") == "nvidia");
    CHECK_FALSE(path_exists(root.dev_vfio(7)));
    CHECK(fs.changes_since(before) == "");
    writes = k.writes();
    b.undo(r);  // twice: harmless, and no writes
    CHECK(k.writes() == writes);
    CHECK(fs.changes_since(before) == "");
    CHECK(k.refusals().empty());
}

TEST_CASE("a busy device: bounded wait, then a clear error", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    SysfsRoot root = fs.sysfs_root();
    FakeKernel k(fs);
    auto gpu = PciAddress::parse("0000:3b:00.0");
    SECTION("released after a few attempts") {
        k.busy(gpu.str(), 3);
        VfioBinder b(root, k, {.busy_timeout_ms = 5000, .poll_interval_ms = 5});
        b.bind(b.prepare(gpu));
        CHECK(fs.driver_of(gpu.str()) == "vfio-pci");
    }
    SECTION("never released") {
        k.busy(gpu.str(), -1);
        VfioBinder b(root, k, {.busy_timeout_ms = 100, .poll_interval_ms = 10});
        auto before = fs.snapshot();
        BindRecord r = b.prepare(gpu);
        std::string err = error_of([&] { b.bind(r); });
        CHECK_THAT(err, Catch::Contains("bind 0000:3b:00.0 to vfio-pci: 0000:3b:00.0: driver nvidia did not release "
                                        "the device within 0.10 s"));
        CHECK_THAT(err, Catch::Contains("Device or resource busy"));
        CHECK_THAT(err, Catch::Contains("drivers/nvidia/unbind"));
        CHECK(fs.driver_of(gpu.str()) == "nvidia");
        b.undo(r);  // the override written before the unbind goes back
        CHECK(fs.changes_since(before) == "");
    }
    CHECK(k.refusals().empty());
}

TEST_CASE("a group with a foreign endpoint is refused, naming it", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    foreign_nvme(fs);
    DeviceConfig cfg = config_from(R"({"gpus": [{"pci": "0000:3b:00.0"}]})");
    std::string err = error_of([&] { plan_devices(fs.sysfs_root(), cfg, {"/dev/nvidia0"}); });
    CHECK_THAT(err, Catch::StartsWith("0000:3b:00.0: IOMMU group 7 also holds 0000:3c:00.0 (driver nvme), which is not "
                                      "part of this job"));
    // Once the foreign device sits on pci-stub, the group is viable.
    fs.detach("0000:3c:00.0");
    fs.attach("0000:3c:00.0", "pci-stub");
    CHECK(plan_devices(fs.sysfs_root(), cfg, {"/dev/nvidia0"}).devices.size() == 1);
    // Driver-less endpoints are refused too.
    fs.detach("0000:3c:00.0");
    CHECK_THAT(error_of([&] { plan_devices(fs.sysfs_root(), cfg, {"/dev/nvidia0"}); }),
               Catch::Contains("also holds 0000:3c:00.0 (no driver)"));
}

TEST_CASE("another GPU of the node in the same group is refused", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    fs.add({.address = "0000:3b:01.0",
            .vendor = 0x10de,
            .klass = 0x030200,
            .driver = "nvidia",
            .numa_node = 0,
            .iommu_group = 7});
    DeviceConfig cfg = config_from(R"({"gpus": [{"pci": "0000:3b:00.0"}, {"pci": "0000:3b:01.0"}]})");
    CHECK_THAT(error_of([&] { plan_devices_for(fs.sysfs_root(), cfg, {PciAddress::parse("0000:3b:00.0")}); }),
               Catch::Contains("also holds 0000:3b:01.0, another GPU of this node"));
    CHECK(plan_devices_for(fs.sysfs_root(), cfg, {PciAddress::parse("0000:3b:00.0"), PciAddress::parse("0000:3b:01.0")})
              .devices.size() == 2);
}

TEST_CASE("GPU and its audio function travel together", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    gpu_audio(fs);
    SysfsRoot root = fs.sysfs_root();
    DeviceConfig cfg;  // no configuration: minors from the nvidia driver's /proc files
    DevicePlan plan = plan_devices(root, cfg, {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"});
    REQUIRE(plan.devices.size() == 2);
    CHECK(plan.devices[1].address.str() == "0000:3b:00.1");
    CHECK(plan.devices[1].role == "companion");
    CHECK(plan.devices[1].driver == "snd_hda_intel");
    // The audio function has no reset method of its own: not a refusal for a companion.
    auto before = fs.snapshot();
    FakeKernel k(fs);
    VfioBinder b(root, k);
    std::vector<BindRecord> records;
    for (const auto& d : plan.devices) {
        records.push_back(b.prepare(d.address));
        b.bind(records.back());
        // /dev/vfio/7 only once both are on vfio-pci.
        CHECK(path_exists(root.dev_vfio(7)) == (&d == &plan.devices.back()));
    }
    CHECK(fs.driver_of("0000:3b:00.1") == "vfio-pci");
    for (auto it = records.rbegin(); it != records.rend(); ++it) b.undo(*it);
    CHECK(fs.driver_of("0000:3b:00.0") == "nvidia");
    CHECK(fs.driver_of("0000:3b:00.1") == "snd_hda_intel");
    CHECK(fs.changes_since(before) == "");
    CHECK(k.refusals().empty());
}

TEST_CASE("IOMMU off: refused with the reason and the fix", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    fs.add({.address = "0000:3b:00.0", .klass = 0x030200, .driver = "nvidia", .numa_node = 0});
    fs.iommu(false);
    std::string err =
        error_of([&] { plan_devices_for(fs.sysfs_root(), DeviceConfig{}, {PciAddress::parse("0000:3b:00.0")}); });
    CHECK_THAT(err, Catch::StartsWith("0000:3b:00.0: no IOMMU group ("));
    CHECK_THAT(err, Catch::Contains("0000:3b:00.0/iommu_group missing): the IOMMU is off on this node"));
    CHECK_THAT(err, Catch::Contains("intel_iommu=on"));
    CHECK_THAT(err, Catch::Contains("VT-d"));
}

TEST_CASE("interrupt remapping off or unsafe interrupts allowed: refused unless policy allows", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    auto gpu = std::vector<PciAddress>{PciAddress::parse("0000:3b:00.0")};
    DeviceConfig strict;
    DeviceConfig lax = config_from(R"({"policy": {"allow_unsafe_interrupts": true}})");
    CHECK_NOTHROW(plan_devices_for(fs.sysfs_root(), strict, gpu));
    SECTION("remapping off") {
        fs.interrupt_remapping(false);
        CHECK_THAT(error_of([&] { plan_devices_for(fs.sysfs_root(), strict, gpu); }),
                   Catch::StartsWith("0000:3b:00.0: interrupt remapping is off on this node") &&
                       Catch::Contains("proc/interrupts") && Catch::Contains("allow_unsafe_interrupts"));
        CHECK_NOTHROW(plan_devices_for(fs.sysfs_root(), lax, gpu));
    }
    SECTION("intremap=off on the command line") {
        fs.cmdline("root=/dev/sda1 intel_iommu=on intremap=off");
        CHECK_THROWS_WITH(plan_devices_for(fs.sysfs_root(), strict, gpu),
                          Catch::Contains("interrupt remapping is off"));
    }
    SECTION("allow_unsafe_interrupts=Y") {
        fs.allow_unsafe_interrupts(true);
        CHECK_THAT(error_of([&] { plan_devices_for(fs.sysfs_root(), strict, gpu); }),
                   Catch::StartsWith("0000:3b:00.0: vfio_iommu_type1 allow_unsafe_interrupts is Y") &&
                       Catch::Contains("sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"));
        CHECK_NOTHROW(plan_devices_for(fs.sysfs_root(), lax, gpu));
    }
}

TEST_CASE("no reset method: refused unless policy allows", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    fs.add({.address = "0000:3b:00.0",
            .klass = 0x030200,
            .driver = "nvidia",
            .numa_node = 0,
            .iommu_group = 7,
            .reset_methods = std::nullopt});
    auto gpu = std::vector<PciAddress>{PciAddress::parse("0000:3b:00.0")};
    CHECK_THAT(
        error_of([&] { plan_devices_for(fs.sysfs_root(), DeviceConfig{}, gpu); }),
        Catch::StartsWith("0000:3b:00.0: no usable reset method (") && Catch::Contains("0000:3b:00.0/reset_method"));
    CHECK_NOTHROW(plan_devices_for(fs.sysfs_root(), config_from(R"({"policy": {"allow_no_reset": true}})"), gpu));
}

TEST_CASE("eight GPUs on two NUMA nodes: placement follows the devices", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    eight_gpus(fs);
    SysfsRoot root = fs.sysfs_root();
    DeviceConfig cfg;
    DevicePlan p = plan_devices(root, cfg, {"/dev/nvidia5", "/dev/nvidia6"});
    REQUIRE(p.devices.size() == 2);
    CHECK(p.devices[0].address.str() == "0000:9c:00.0");
    CHECK(p.devices[1].address.str() == "0000:9d:00.0");
    CHECK(p.iommu_groups == std::vector<int>{21, 22});
    CHECK(p.numa_node == 1);
    CHECK(p.cpus == "8-15");
    CHECK(p.warnings.empty());
    DevicePlan all = plan_devices(root, cfg,
                                  {"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3", "/dev/nvidia4",
                                   "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7"});
    CHECK(all.devices.size() == 8);
    CHECK_FALSE(all.numa_node);
    CHECK(all.numa_nodes == std::vector<int>{0, 1});
    CHECK(all.cpus == "0-15");
    CHECK(all.warnings.size() == 1);
    CHECK_THAT(error_of([&] { plan_devices(root, cfg, {"/dev/nvidia8"}); }),
               Catch::StartsWith("/dev/nvidia8: no GPU known for NVIDIA minor 8"));
    CHECK_THAT(error_of([&] { plan_devices(root, cfg, {"/dev/sda"}); }),
               Catch::StartsWith("/dev/sda: not a GPU device file"));
    // A configured minor wins over the driver's /proc files.
    DeviceConfig mapped = config_from(R"({"gpus": [{"pci": "0000:1b:00.0", "nvidia_minor": 7}]})");
    CHECK(plan_devices(root, mapped, {"/dev/nvidia7"}).devices[0].address.str() == "0000:1b:00.0");
    // A configured vfio_group that sysfs contradicts.
    DeviceConfig wrong = config_from(R"({"gpus": [{"pci": "0000:1b:00.0", "nvidia_minor": 0, "vfio_group": 99}]})");
    CHECK_THAT(error_of([&] { plan_devices(root, wrong, {"/dev/nvidia0"}); }),
               Catch::Contains("0000:1b:00.0: configured with vfio_group 99 but sysfs puts it in IOMMU group 10"));
}
