// A job's guest network, one segment per job by construction (no shared
// bridge to filter): on each of the job's nodes the prolog makes a network
// namespace of the job holding a bridge, the guest's tap and a VXLAN device
// whose VNI is the job's. The VXLAN's UDP socket lives in the node's underlay
// namespace (network.netns, or the host's) and its only peers are the job's
// other nodes, by static forwarding entries: every node computes every
// guest's address and MAC from its index in the job's node list, so nothing
// is learnt, nothing is flooded, and ARP is answered on the node (VXLAN proxy
// ARP from static neighbour entries). Addresses depend only on the node index:
// every job has the whole /16 to itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace svm {

struct GuestAddress {
    std::string ip;
    std::string mac;
    int prefix_len = 16;
};

// Guests per job a /16 segment holds: A.B.0.10 .. A.B.255.253 (A.B.255.254 is
// the host side of each node's bridge, A.B.255.255 the broadcast address).
constexpr int kMaxSegmentGuests = 65524;

// The guest of the job's node_index-th node on the job's own segment:
// A.B.0.0 + node_index + 10; MAC 52:54:00:<3 bytes of that offset>.
GuestAddress segment_address(const std::string& prefix, int node_index);
// The host side of the segment on every node (only the job's keeper uses it,
// from inside the job's namespace): A.B.255.254.
std::string segment_host_ip(const std::string& prefix);

// IPoIB (network.fabric "ipoib"): the VFs share the fabric's partition, so
// these addresses still differ between jobs: A.B.(job_id % 254 + 1).(i + 10).
GuestAddress fabric_address(const std::string& prefix, uint32_t job_id, int node_index);

// The job's 24-bit VXLAN network identifier: ((job_id - 1) mod 16,777,215) + 1.
// Two live jobs share one only when their ids differ by a multiple of
// 16,777,215; on a node both run on, the second fails to create its device.
uint32_t job_vni(uint32_t job_id);

// The host side of the job's i-th node on the segment, for the job's own
// host-side helpers between nodes (the VM record's relay, job_record.hpp):
// 169.254.0.0 + 10 + i on the bridge, MAC 52:54:01:<3 bytes of that offset>.
// Guests can never reach it (the guard drops 169.254.0.0/16 from the tap).
GuestAddress segment_host_side(int node_index);

struct SegmentPeer {
    std::string node;
    std::string underlay_ip;  // the node's address on the underlay
    GuestAddress guest;
    GuestAddress host;  // segment_host_side()
};

// Everything one node sets up for its guest of a job (pure: unit-tested).
struct JobSegment {
    uint32_t job_id = 0;
    uint32_t vni = 0;
    int node_index = 0;
    std::string netns;           // the job's namespace on this node: "svmj<job>n<index>"
    std::string underlay_netns;  // where the VXLAN socket lives ("" = the host's)
    std::string vxlan;           // "svx<job hex>"
    std::string bridge = "svmbr";
    std::string tap;      // the guest's tap (made by libvirt in netns)
    std::string host_ip;  // segment_host_ip(), on the bridge, /16
    int prefix_len = 16;
    int port = 4789;
    int mtu = 1450;
    std::vector<SegmentPeer> peers;  // every node of the job, in node-list order
    const SegmentPeer& self() const { return peers.at(static_cast<size_t>(node_index)); }
};

JobSegment plan_segment(uint32_t job_id, int node_index, const std::vector<std::string>& nodes,
                        const std::vector<std::string>& underlay_ips, const std::string& prefix,
                        const std::string& underlay_netns, int port, int mtu);

// What the job's namespace holds for the other nodes, pure as well: static
// ARP neighbours (on the VXLAN port; the head's and every node's host side
// on the bridge) and static forwarding entries to their underlay addresses
// (dst "": an entry of the bridge's own table). And the nft rules that hold
// the tap to the guest's own MAC and IPv4 address.
struct StaticNeighbour {
    std::string ip, mac, dev;
};
struct ForwardingEntry {
    std::string mac, dev, dst;
};
struct SegmentEntries {
    std::vector<StaticNeighbour> neighbours;
    std::vector<ForwardingEntry> forwarding;
};
SegmentEntries segment_entries(const JobSegment& s);
std::string segment_guard_rules(const JobSegment& s);

// Makes it all (namespace, VXLAN made from the underlay directly inside it,
// bridge, entries, guard). A VNI already in use on this node throws VniInUse.
struct VniInUse {
    std::string message;
};
void setup_segment(const JobSegment& s);
// The node's VXLAN guard, one nftables table (inet svm_underlay) in the
// underlay namespace, made by the first prolog and kept: a packet to the
// VXLAN port is taken only from the underlay addresses of the nodes of the job
// whose VNI it carries (map vni_peers: VNI -> jump job_<id>, whose rule
// accepts the job's other nodes), and no socket of the namespace (anyone's,
// root's too; the kernel's VXLAN socket is no one's) may send to that port.
// Pure text (unit-tested); ensure_underlay_guard loads it unless present.
std::string underlay_guard_rules(int port);
void ensure_underlay_guard(const std::string& underlay_netns, int port);
// The job's part of it: its chain and its VNI's element (one transaction,
// refused whole while another job holds the VNI here), and their removal
// (harmless when absent; never another job's).
std::string segment_underlay_rules(const JobSegment& s);
void remove_segment_underlay_rules(const std::string& underlay_netns, uint32_t job_id);

// Removes the job's part of the VXLAN guard, the VXLAN (if still in the
// underlay) and the job's namespace, with all in it; harmless when they are
// gone.
void remove_segment(const std::string& netns, const std::string& underlay_netns, const std::string& vxlan);

// The node's underlay address: "%n"-style template resolved (getaddrinfo,
// IPv4) for a node name.
std::string resolve_underlay(const std::string& name_template, const std::string& node);

// Enters the network namespace /run/netns/NAME (the calling thread).
void enter_netns(const std::string& name);

}  // namespace svm
