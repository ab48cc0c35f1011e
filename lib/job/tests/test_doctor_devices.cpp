// [devices] `doctor` (lib/job/doctor.hpp) on fake device trees: each check
// OK, WARN or FAIL with its fix, and a node with the IOMMU off.
#include <unistd.h>

#include <map>

#include "catch.hpp"

#include "device_scenarios.hpp"
#include "doctor.hpp"
#include "fs.hpp"
#include "support.hpp"

using namespace svm;
using namespace svm::test;

TEST_CASE("doctor: each check OK, WARN or FAIL with its fix", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    one_gpu(fs);
    hca(fs, "0000:5e:00.0", 1, 40, 2);
    fs.hugepages(1048576, 8);
    DeviceConfig cfg = config_from(R"({"gpus": [{"pci": "0000:3b:00.0"}], "vf_providers": [{"pci": "0000:5e:00.0"}]})");
    DoctorOptions opts;
    opts.qemu_binaries = {"/bin/sh"};  // stands in for QEMU
    opts.slurm_check = [] { return std::vector<CheckResult>{{"slurm", CheckStatus::ok, "hooked", ""}}; };
    auto status_of = [](const std::vector<CheckResult>& rs) {
        std::map<std::string, std::string> m;
        for (const auto& r : rs) m[r.name] = check_status_str(r.status);
        return m;
    };
    auto good = run_doctor(fs.sysfs_root(), &cfg, opts);
    CHECK(status_of(good) == std::map<std::string, std::string>{{"iommu", "OK"},
                                                                {"interrupt-remapping", "OK"},
                                                                {"vfio-pci", "OK"},
                                                                {"gpu 0000:3b:00.0", "OK"},
                                                                {"vfs 0000:5e:00.0", "OK"},
                                                                {"hugepages", "OK"},
                                                                {"qemu", "OK"},
                                                                {"slurm", "OK"},
                                                                {"kvm", "SKIP"},
                                                                {"shares", "SKIP"},
                                                                {"job groups", "SKIP"},
                                                                {"network", "SKIP"}});
    CHECK_FALSE(doctor_failed(good));
    Json j = doctor_to_json(good);
    CHECK(json_is_true(json_object_get(j.get(), "ok")));
    CHECK_THAT(format_doctor(good), Catch::Contains("[OK  ] gpu 0000:3b:00.0: usable: IOMMU group 7, NUMA node 0"));

    // Break things one by one.
    foreign_nvme(fs);
    hca(fs, "0000:5f:00.0", 1, 50, 0, 4);
    fs.interrupt_remapping(false);
    ::unlink(fs.path("sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages").c_str());
    DeviceConfig cfg2 =
        config_from(R"({"gpus": [{"pci": "0000:3b:00.0"}], "vf_providers": [{"pci": "0000:5f:00.0"}]})");
    opts.qemu_binaries = {"/nonexistent/qemu"};
    opts.skip = {"slurm"};
    auto bad = run_doctor(fs.sysfs_root(), &cfg2, opts);
    CHECK(status_of(bad) == std::map<std::string, std::string>{{"iommu", "OK"},
                                                               {"interrupt-remapping", "FAIL"},
                                                               {"vfio-pci", "OK"},
                                                               {"gpu 0000:3b:00.0", "FAIL"},
                                                               {"vfs 0000:5f:00.0", "FAIL"},
                                                               {"hugepages", "WARN"},
                                                               {"qemu", "FAIL"},
                                                               {"slurm", "SKIP"},
                                                               {"kvm", "SKIP"},
                                                               {"shares", "SKIP"},
                                                               {"job groups", "SKIP"},
                                                               {"network", "SKIP"}});
    CHECK(doctor_failed(bad));
    std::string text = format_doctor(bad);
    CHECK_THAT(text, Catch::Contains("[FAIL] vfs 0000:5f:00.0: no VFs (sriov_numvfs is 0 of 4)\n"
                                     "       fix: create them at boot: echo 4 > "));
    CHECK_THAT(text, Catch::Contains("[FAIL] gpu 0000:3b:00.0: 0000:3b:00.0: interrupt remapping is off"));
    CHECK_THAT(text, Catch::Contains("fix: enable x2APIC and interrupt remapping"));
    // With remapping back on, the GPU check names the foreign device.
    fs.interrupt_remapping(true);
    auto gpu = run_doctor(fs.sysfs_root(), &cfg2, opts);
    for (const auto& r : gpu)
        if (r.name == "gpu 0000:3b:00.0") {
            CHECK(r.message ==
                  "0000:3b:00.0: IOMMU group 7 also holds 0000:3c:00.0 (driver nvme), which is not part of this job");
            CHECK_THAT(r.fix, Catch::StartsWith("bind it to vfio-pci or pci-stub permanently"));
        }
}

TEST_CASE("doctor on a node with the IOMMU off", "[devices]") {
    FakeSysfs fs;
    base_node(fs);
    fs.iommu(false);
    fs.add({.address = "0000:3b:00.0", .klass = 0x030200, .driver = "nvidia", .numa_node = 0});
    DeviceConfig cfg = config_from(R"({"gpus": [{"pci": "0000:3b:00.0"}]})");
    DoctorOptions opts;
    opts.skip = {"qemu"};
    auto rs = run_doctor(fs.sysfs_root(), &cfg, opts);
    REQUIRE(rs.size() >= 1);
    CHECK(rs[0].name == "iommu");
    CHECK(rs[0].status == CheckStatus::fail);
    CHECK_THAT(rs[0].message, Catch::Contains("no intel_iommu=on/amd_iommu=on"));
    CHECK_THAT(rs[0].fix, Catch::Contains("intel_iommu=on iommu=pt"));
}
