// SR-IOV virtual functions handed out one per job per node. The pool state
// (which VF a job holds) lives in DeviceConfig::vf_state_dir/pool.json and is
// only read or changed under pool.lock (flock), so concurrent prologs never
// hand one VF to two jobs. A VF gets deterministic InfiniBand node/port GUIDs
// (site prefix, node id, PF ordinal, VF index) through the mlx5
// sriov/N/{node,port,policy} files, or a deterministic MAC (sriov/N/mac) on
// Ethernet. Two ledger records, each undone idempotently:
//   vf_reservation {"job"}                 -> release(): the job's VF back to the pool
//   vf_config {"pf","index","vf","link_layer","set":{...},"previous":{...}}
//                                           -> undo_config(): previous values restored
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "device_config.hpp"
#include "json.hpp"
#include "pci_address.hpp"
#include "sysfs.hpp"

namespace svm {

struct VfAssignment {
    std::string job;
    PciAddress pf;
    int index = 0;  // VF number on its PF (virtfnN)
    PciAddress vf;
    int pf_ordinal = 0;      // position of the PF in devices.vf_providers
    std::string link_layer;  // "infiniband" or "ethernet"
    int numa_node = -1;
    std::string node_guid, port_guid, mac;  // what this VF is given
    Json to_json() const;
};

// The ledger record "vf_reservation": the job that holds a VF of the pool.
struct VfReservationRecord {
    static constexpr const char* kind = "vf_reservation";
    std::string job;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("job", t.job);
    }
    Json to_json() const;
    static VfReservationRecord from_json(const json_t* j);
};

// The ledger record "vf_config": a VF's identity as set, and as it was.
struct VfConfigRecord {
    static constexpr const char* kind = "vf_config";
    PciAddress pf;
    int index = 0;
    PciAddress vf;
    std::string link_layer;
    // sriov/<index>/<attr> -> value; previous: "" when the file did not exist.
    std::map<std::string, std::string> set, previous;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("pf", t.pf);
        v("index", t.index);
        v("vf", t.vf);
        v("link_layer", t.link_layer);
        v("set", t.set);
        v("previous", t.previous);
    }
    Json to_json() const;
    static VfConfigRecord from_json(const json_t* j);
};

// Deterministic identities: GUID = prefix(4 bytes):node_id(2):pf_ordinal(1):2*index(+1 for the port).
std::string vf_node_guid(const DeviceConfig& cfg, int node_id, int pf_ordinal, int index);
std::string vf_port_guid(const DeviceConfig& cfg, int node_id, int pf_ordinal, int index);
std::string vf_mac(const DeviceConfig& cfg, int node_id, int pf_ordinal, int index);
// devices.node_id, else a 16-bit hash of the host name.
int vf_node_id(const DeviceConfig& cfg, const std::string& hostname);

class VfPool {
public:
    VfPool(const SysfsRoot& root, SysfsWriter& writer, const DeviceConfig& cfg, std::string hostname = "");

    // The VF `r.job` holds, or the first free one (PFs on numa_node first),
    // recorded as the job's. Throws when the pool is exhausted or has no VFs.
    VfAssignment reserve(const VfReservationRecord& r, std::optional<int> numa_node = std::nullopt);
    // Returns the job's VF to the pool; harmless when it holds none.
    void release(const VfReservationRecord& r);
    // VF address -> job, as the pool state says now.
    std::map<std::string, std::string> holders() const;

    VfConfigRecord prepare_config(const VfAssignment& a) const;  // reads current values
    void apply_config(const VfConfigRecord& r);
    void undo_config(const VfConfigRecord& r);

private:
    std::vector<VfAssignment> candidates(const std::string& job, std::optional<int> numa_node) const;
    std::string lock_path() const;
    std::string state_path() const;
    std::string link_layer_of(const VfProviderConfig& p) const;
    const SysfsRoot& root_;
    SysfsWriter& writer_;
    const DeviceConfig& cfg_;
    std::string hostname_;
};

}  // namespace svm
