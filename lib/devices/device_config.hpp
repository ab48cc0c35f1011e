// The "devices" object of the node configuration (schema:
// etc/slurm-vm.devices.schema.json): which PCI functions are passthrough GPUs,
// which physical functions provide SR-IOV VFs, GUID/MAC numbering, site policy.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "json.hpp"
#include "pci_address.hpp"

namespace svm {

struct GpuConfig {
    PciAddress pci;
    std::optional<int> nvidia_minor;  // /dev/nvidiaN that Slurm's gres.conf names
    std::optional<int> vfio_group;    // /dev/vfio/N that gres.conf names (checked against sysfs)
};

struct VfProviderConfig {
    PciAddress pci;          // the physical function
    std::string link_layer;  // "infiniband", "ethernet", or "" = read from sysfs
};

struct DevicePolicy {
    bool allow_unsafe_interrupts = false;  // accept no interrupt remapping / allow_unsafe_interrupts=Y
    bool allow_no_reset = false;           // accept devices without a kernel reset method
};

struct DeviceConfig {
    std::vector<GpuConfig> gpus;
    std::vector<VfProviderConfig> vf_providers;
    // First 4 bytes of every VF GUID ("02:c9:00:00"); the rest is node id, PF and VF index.
    std::string guid_prefix = "02:00:00:00";
    std::optional<int> node_id;  // 0..65535; default: derived from the host name
    DevicePolicy policy;
    std::string vf_state_dir = "/run/slurm-vm/vf-pool";  // pool state and lock
    int unbind_timeout_s = 10;
    // Tests only: a program that plays the kernel for a fake sysfs_root; every
    // sysfs write goes to it as `PROGRAM ROOT FILE VALUE` (exit status = errno).
    // Refused when sysfs_root is "/".
    std::string emulated_kernel;

    const GpuConfig* gpu_by_minor(int minor) const;
    const GpuConfig* gpu_by_pci(const PciAddress& a) const;
};

// etc/slurm-vm.devices.schema.json (compiled in), parsed once.
const json_t* device_config_schema();
// Parses the "devices" object (null or absent = no devices): validated
// against device_config_schema() before any value is read (an unknown key, a
// wrong type or range is one sentence naming its path, "devices.gpus[0].pci
// must be ..."), then a function or nvidia minor listed twice is refused.
DeviceConfig parse_device_config(const json_t* devices);
// Loads a node configuration file and parses its "devices" member.
DeviceConfig load_device_config(const std::string& path);

}  // namespace svm
