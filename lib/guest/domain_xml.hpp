// The libvirt domain XML of a job's guest, built from a plain description.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace svm {

struct ShareSpec {
    std::string source;  // host directory (9p)
    std::string tag;     // mount tag seen by the guest
    // virtio-fs: the vhost-user socket of the virtiofsd serving it (started
    // by the keeper); guest memory is then shared. Empty: 9p from QEMU.
    std::string socket;
};

// A PCI function passed through (already on vfio-pci) and what the guest's
// PCIe layout needs to know about it.
struct HostdevSpec {
    std::string address;  // DDDD:BB:DD.F on the host
    std::string role;     // "gpu", "companion" (same slot and group as a GPU), "vf", or "" (unknown)
    int numa_node = -1;   // host NUMA node of the function, -1 = unknown
};

// The names of the guest's virtio-serial ports of the job's first command,
// run by the guest's agent (seed_agent_script, lib/guest/seed.hpp): its
// command and status, its stdout, its stderr.
inline constexpr size_t kAgentPorts = 3;
inline constexpr const char* kAgentPortNames[kAgentPorts] = {"org.slurm-vm.agent", "org.slurm-vm.agent-out",
                                                             "org.slurm-vm.agent-err"};

struct DomainSpec {
    std::string name;
    std::string uuid;          // a saved guest's, to restore it (libvirt requires the same); "" = libvirt's choice
    std::string type = "kvm";  // "kvm" or "qemu" (TCG)
    std::string emulator = "/usr/bin/qemu-system-x86_64";
    int64_t memory_mib = 1024;
    std::vector<int> host_cpus;  // one vCPU per host CPU, pinned one-to-one
    std::string overlay;         // per-job qcow2 overlay (vda)
    std::string base;            // the user's image, read-only backing
    std::string base_format;     // "qcow2" or "raw": pinned, never probed
    // When set, QEMU gets the base as the descriptor associated under this
    // name (virDomainFDAssociate) and never opens `base` by path.
    std::string base_fdgroup;
    std::string seed;                         // NoCloud seed ISO (vdb, read-only)
    std::string kernel, initrd, cmdline;      // direct kernel boot when kernel is set
    std::string bridge, mac;                  // NIC on this bridge when set
    int mtu = 0;                              // the NIC's MTU (0: the default)
    std::string tap;                          // host tap name (unique on the host; libvirt's
                                              // own vnetN choice races between embedded drivers)
    std::string console_log;                  // serial console written to this file
    std::vector<std::string> agent_channels;  // Unix sockets (servers) of the ports kAgentPortNames, in order
    std::vector<ShareSpec> shares;            // 9p (as QEMU's user) or virtio-fs shares
    // Passed-through functions. With any, the guest is a q35 machine and the
    // functions of one host NUMA node (its GPUs and the VF) sit behind one
    // guest PCIe switch: pcie-root-port -> pcie-switch-upstream-port -> one
    // pcie-switch-downstream-port per host slot (a GPU and its companion
    // functions share one). Peers under one switch is what GPUDirect RDMA
    // between a GPU and the VF needs in the guest. Without any, the guest is
    // unchanged (i440fx "pc", libvirt's own addresses).
    std::vector<HostdevSpec> hostdevs;
    int numa_node = -1;  // bind guest memory to this host node (strict) when >= 0
    // Else: interleave guest memory over these host nodes (devices on several).
    std::vector<int> numa_interleave;
    int64_t hugepage_kib = 0;  // back guest memory with hugepages of this size (memory_mib a multiple)
};

std::string domain_xml(const DomainSpec& s);
std::string xml_escape(const std::string& s);

}  // namespace svm
