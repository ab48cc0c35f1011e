// Fake nodes shared by the [devices] tests.
#pragma once
#include <string>

#include "device_config.hpp"
#include "fake_sysfs.hpp"
#include "json.hpp"

namespace svm::test {

// IOMMU on with interrupt remapping, vfio-pci loaded, two NUMA nodes, the usual drivers.
inline void base_node(FakeSysfs& fs) {
    fs.iommu(true).vfio_pci().numa_node(0, "0-7").numa_node(1, "8-15");
    for (const char* d : {"nvidia", "snd_hda_intel", "mlx5_core", "pcieport", "nvme"}) fs.driver(d);
    fs.hugepages(2048, 0).hugepages(1048576, 0);
}

// A GPU 0000:3b:00.0 (nvidia, minor 0) in IOMMU group 7 with its root port
// 0000:3a:00.0 (a bridge, same group), NUMA node 0.
inline void one_gpu(FakeSysfs& fs, const std::string& driver = "nvidia") {
    fs.add({.address = "0000:3a:00.0",
            .vendor = 0x8086,
            .device = 0x2030,
            .klass = 0x060400,
            .driver = "pcieport",
            .numa_node = 0,
            .iommu_group = 7});
    FakeDevice gpu{.address = "0000:3b:00.0",
                   .vendor = 0x10de,
                   .device = 0x20b0,
                   .klass = 0x030200,
                   .driver = driver,
                   .native_driver = std::string("nvidia"),
                   .numa_node = 0,
                   .iommu_group = 7,
                   .parent = "0000:3a:00.0"};
    fs.add(gpu);
    fs.nvidia_minor("0000:3b:00.0", 0);
}

inline void gpu_audio(FakeSysfs& fs) {
    fs.add({.address = "0000:3b:00.1",
            .vendor = 0x10de,
            .device = 0x1aef,
            .klass = 0x040300,
            .driver = "snd_hda_intel",
            .numa_node = 0,
            .iommu_group = 7,
            .reset_methods = std::nullopt,
            .parent = "0000:3a:00.0"});
}

// An NVMe drive 0000:3c:00.0 (nvme) in one_gpu's IOMMU group 7: an endpoint
// foreign to the job in the GPU's group.
inline void foreign_nvme(FakeSysfs& fs) {
    fs.add({.address = "0000:3c:00.0",
            .vendor = 0x144d,
            .device = 0xa808,
            .klass = 0x010802,
            .driver = "nvme",
            .numa_node = 0,
            .iommu_group = 7});
}

// An HCA physical function with `vfs` VFs (each in its own group).
inline void hca(FakeSysfs& fs, const std::string& address, int numa, int group, int vfs, int total = 8) {
    fs.add({.address = address,
            .vendor = 0x15b3,
            .device = 0x101b,
            .klass = 0x020700,
            .driver = "mlx5_core",
            .numa_node = numa,
            .iommu_group = group,
            .sriov_totalvfs = total,
            .sriov_numvfs = vfs});
}

// The buses of eight_gpu_functions's GPUs (0000:BUS:00.0), four per NUMA node.
inline constexpr const char* kEightGpuBuses[] = {"1b", "1c", "1d", "1e", "9b", "9c", "9d", "9e"};

// Eight GPUs alone, four per NUMA node (groups 10-13 and 20-23, minors 0-7).
inline void eight_gpu_functions(FakeSysfs& fs) {
    for (int i = 0; i < 8; ++i) {
        std::string a = std::string("0000:") + kEightGpuBuses[i] + ":00.0";
        fs.add({.address = a,
                .vendor = 0x10de,
                .device = 0x2330,
                .klass = 0x030200,
                .driver = "nvidia",
                .numa_node = i / 4,
                .iommu_group = (i < 4 ? 10 : 16) + i});
        fs.nvidia_minor(a, i);
    }
}

// Eight GPUs, four per NUMA node (groups 10-13 and 20-23, minors 0-7), and an
// HCA with four VFs on each node.
inline void eight_gpus(FakeSysfs& fs) {
    eight_gpu_functions(fs);
    hca(fs, "0000:2b:00.0", 0, 30, 4);
    hca(fs, "0000:ab:00.0", 1, 40, 4);
}

inline DeviceConfig config_from(const std::string& devices_json) {
    Json j = json_parse(devices_json, "test config");
    return parse_device_config(j.get());
}

}  // namespace svm::test
