#include "guest_net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <thread>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "netlink.hpp"

namespace svm {

namespace {

// A.B of an IPv4 /16 prefix.
std::pair<unsigned, unsigned> parse_16(const std::string& prefix) {
    unsigned a, b, c, d, len;
    if (std::sscanf(prefix.c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &len) != 5 || a > 255 || b > 255 || len != 16)
        SVM_THROW("network prefix \"" + prefix + "\" must be an IPv4 /16 such as 10.213.0.0/16");
    return {a, b};
}

std::string dotted(unsigned a, unsigned b, unsigned c, unsigned d) {
    return std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c) + "." + std::to_string(d);
}

bool netns_exists(const std::string& name) { return path_exists("/run/netns/" + name); }

constexpr const char* kNetnsDir = "/run/netns";

// What `ip netns add` does, without starting it: a new network namespace
// kept by a bind mount at /run/netns/<name> (a shared mount point, made so on
// first use), where ip and the kernel's tools find it. The namespace is made
// by a thread of its own (unshare changes the calling thread's only), which
// then ends.
void add_netns(const std::string& name) {
    std::string path = std::string(kNetnsDir) + "/" + name;
    const std::string what = "create the job's network namespace " + name;
    mkdir_p(kNetnsDir, 0755);
    if (::mount("", kNetnsDir, "none", MS_SHARED | MS_REC, nullptr) != 0) {
        if (errno != EINVAL || ::mount(kNetnsDir, kNetnsDir, "none", MS_BIND | MS_REC, nullptr) != 0 ||
            ::mount("", kNetnsDir, "none", MS_SHARED | MS_REC, nullptr) != 0)
            SVM_THROW_ERRNO(what + ": make " + kNetnsDir + " a shared mount point");
    }
    UniqueFd f(::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
    if (!f) SVM_THROW_ERRNO(what + ": create " + path);
    f = UniqueFd();
    int err = 0;
    std::thread([&] {
        if (::unshare(CLONE_NEWNET) != 0 ||
            ::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0)
            err = errno;
    }).join();
    if (err != 0) {
        ::unlink(path.c_str());
        SVM_THROW(errno_message(what, err));
    }
}

// What `ip netns delete` does: the bind mount detached and its file removed
// (the namespace goes once nothing holds it).
void delete_netns(const std::string& name) {
    std::string path = std::string(kNetnsDir) + "/" + name;
    if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
        SVM_THROW_ERRNO("delete network namespace " + name + ": unmount " + path);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        SVM_THROW_ERRNO("delete network namespace " + name + ": remove " + path);
}

constexpr int kVniWaitMs = 3000;

// The host sides that talk to each other: every node with the head node
// (index 0), where the job's VM record is collected.
bool relay_peer(const JobSegment& s, size_t i) { return s.node_index == 0 || i == 0; }

}  // namespace

GuestAddress segment_address(const std::string& prefix, int node_index) {
    auto [a, b] = parse_16(prefix);
    if (node_index < 0 || node_index >= kMaxSegmentGuests)
        SVM_THROW("a VM job may span at most " + std::to_string(kMaxSegmentGuests) + " nodes");
    unsigned off = static_cast<unsigned>(node_index) + 10;
    GuestAddress g;
    g.ip = dotted(a, b, off >> 8, off & 255);
    char mac[32];
    std::snprintf(mac, sizeof mac, "52:54:00:%02x:%02x:%02x", (off >> 16) & 255, (off >> 8) & 255, off & 255);
    g.mac = mac;
    return g;
}

GuestAddress segment_host_side(int node_index) {
    GuestAddress g = segment_address("169.254.0.0/16", node_index);
    g.mac[7] = '1';  // 52:54:01:...
    return g;
}

std::string segment_host_ip(const std::string& prefix) {
    auto [a, b] = parse_16(prefix);
    return dotted(a, b, 255, 254);
}

GuestAddress fabric_address(const std::string& prefix, uint32_t job_id, int node_index) {
    auto [a, b] = parse_16(prefix);
    if (node_index < 0 || node_index > 240) SVM_THROW("a VM job over IPoIB may span at most 241 nodes");
    unsigned third = job_id % 254 + 1, fourth = static_cast<unsigned>(node_index) + 10;
    GuestAddress g;
    g.ip = dotted(a, b, third, fourth);
    char mac[32];
    std::snprintf(mac, sizeof mac, "52:54:%02x:%02x:%02x:%02x", a, b, third, fourth);
    g.mac = mac;
    return g;
}

uint32_t job_vni(uint32_t job_id) { return (job_id == 0 ? 0 : (job_id - 1) % 0xffffffu) + 1; }

JobSegment plan_segment(uint32_t job_id, int node_index, const std::vector<std::string>& nodes,
                        const std::vector<std::string>& underlay_ips, const std::string& prefix,
                        const std::string& underlay_netns, int port, int mtu) {
    if (nodes.size() != underlay_ips.size()) SVM_THROW("one underlay address per node of the job is needed");
    if (node_index < 0 || static_cast<size_t>(node_index) >= nodes.size())
        SVM_THROW("node index " + std::to_string(node_index) + " is outside the job's node list");
    JobSegment s;
    s.job_id = job_id;
    s.vni = job_vni(job_id);
    s.node_index = node_index;
    s.netns = "svmj" + std::to_string(job_id) + "n" + std::to_string(node_index);
    s.underlay_netns = underlay_netns;
    char vx[16];
    std::snprintf(vx, sizeof vx, "svx%x", job_id);
    s.vxlan = vx;
    s.tap = "svmtap";
    s.host_ip = segment_host_ip(prefix);
    s.port = port;
    s.mtu = mtu;
    s.peers.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
        s.peers.push_back({nodes[i], underlay_ips[i], segment_address(prefix, static_cast<int>(i)),
                           segment_host_side(static_cast<int>(i))});
    return s;
}

SegmentEntries segment_entries(const JobSegment& s) {
    SegmentEntries e;
    for (size_t i = 0; i < s.peers.size(); ++i) {
        if (static_cast<int>(i) == s.node_index) continue;
        const SegmentPeer& p = s.peers[i];
        // Static neighbours on the VXLAN port: with "proxy" the VXLAN device
        // answers a guest's ARP for a peer itself, so no broadcast leaves the node.
        e.neighbours.push_back({p.guest.ip, p.guest.mac, s.vxlan});
        e.forwarding.push_back({p.guest.mac, s.vxlan, p.underlay_ip});
        if (!relay_peer(s, i)) continue;
        e.neighbours.push_back({p.host.ip, p.host.mac, s.bridge});
        // The peer's host side: also in the bridge's table, so that nothing
        // for it is ever flooded to the guest's tap.
        e.forwarding.push_back({p.host.mac, s.vxlan, p.underlay_ip});
        e.forwarding.push_back({p.host.mac, s.vxlan, ""});
    }
    return e;
}

std::string segment_guard_rules(const JobSegment& s) {
    const GuestAddress& g = s.self().guest;
    std::string tap = "\"" + s.tap + "\"";
    // Frames from the tap (which the guest cannot forge) carry the guest's own
    // MAC and IPv4 address, or are dropped, towards the VXLAN and the host alike.
    return "table bridge svm_guard {\n"
           "  chain from_guest {\n"
           "    ether saddr != " +
           g.mac +
           " drop\n"
           "    ether type != { ip, arp } drop\n"
           "    ether type ip ip saddr != " +
           g.ip +
           " drop\n"
           "    ether type ip ip daddr 169.254.0.0/16 drop\n"
           "    ether type arp arp daddr ip 169.254.0.0/16 drop\n"
           "    ether type arp arp saddr ether != " +
           g.mac +
           " drop\n"
           "    ether type arp arp saddr ip != { 0.0.0.0, " +
           g.ip +
           " } drop\n"
           "  }\n"
           "  chain forward {\n"
           "    type filter hook forward priority 0; policy accept;\n"
           "    iifname " +
           tap +
           " jump from_guest\n"
           "  }\n"
           "  chain input {\n"
           "    type filter hook input priority 0; policy accept;\n"
           "    iifname " +
           tap +
           " jump from_guest\n"
           "  }\n"
           "}\n";
}

namespace {

constexpr const char* kUnderlayTable = "inet svm_underlay";

std::string job_chain(uint32_t job_id) { return "job_" + std::to_string(job_id); }

// The job id in a VXLAN's name, "svx<job id in hex>".
uint32_t job_of_vxlan(const std::string& vxlan) {
    std::string hex = vxlan.substr(3);
    if (hex.empty() || hex.size() > 8 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
        SVM_THROW("not a job's VXLAN: " + vxlan);
    return static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
}

bool nft_accepts(const std::string& netns, const std::string& command) {
    try {
        load_nft_rules(netns, command);
        return true;
    } catch (const Error&) {
        return false;
    }
}

}  // namespace

std::string underlay_guard_rules(int port) {
    std::string p = std::to_string(port);
    // Input: a VXLAN packet is taken only from the underlay addresses of the
    // job whose VNI it carries (its chain accepts them; an unknown VNI, or a
    // chain that returns, falls to the drop). Output: no socket of this
    // namespace sends to the VXLAN port: "meta skuid" matches only sockets
    // that have an owner (a file), which the kernel's VXLAN socket has not.
    return std::string("create table ") + kUnderlayTable +
           "\n"
           "table " +
           kUnderlayTable +
           " {\n"
           "  map vni_peers { typeof @th,96,24 : verdict; }\n"
           "  chain input {\n"
           "    type filter hook input priority -10; policy accept;\n"
           "    udp dport " +
           p +
           " @th,96,24 vmap @vni_peers\n"
           "    udp dport " +
           p +
           " counter drop\n"
           "  }\n"
           "  chain output {\n"
           "    type filter hook output priority -10; policy accept;\n"
           "    udp dport " +
           p +
           " meta skuid >= 0 counter drop\n"
           "  }\n"
           "}\n";
}

std::string segment_underlay_rules(const JobSegment& s) {
    std::set<std::string> peers;
    for (const auto& p : s.peers) peers.insert(p.underlay_ip);
    peers.erase(s.self().underlay_ip);
    std::string chain = std::string(kUnderlayTable) + " " + job_chain(s.job_id);
    std::string r = "add chain " + chain + "\n";
    if (!peers.empty()) {
        r += "add rule " + chain + " ip saddr {";
        const char* sep = " ";
        for (const auto& ip : peers) r += sep + ip, sep = ", ";
        r += " } accept\n";
    }
    return r + "add element " + kUnderlayTable + " vni_peers { " + std::to_string(s.vni) + " : jump " +
           job_chain(s.job_id) + " }\n";
}

void ensure_underlay_guard(const std::string& underlay_netns, int port) {
    // Made once per namespace by the first prolog; "create" makes concurrent
    // prologs race safely: one transaction wins, the others find the table.
    const std::string list = std::string("list table ") + kUnderlayTable;
    if (nft_accepts(underlay_netns, list)) return;
    try {
        load_nft_rules(underlay_netns, underlay_guard_rules(port));
    } catch (Error& e) {
        if (nft_accepts(underlay_netns, list)) return;
        SVM_CONTEXT(e, "install the node's VXLAN guard (table " + std::string(kUnderlayTable) + ")");
        throw;
    }
}

void remove_segment_underlay_rules(const std::string& underlay_netns, uint32_t job_id) {
    std::string chain = std::string(kUnderlayTable) + " " + job_chain(job_id);
    // The chain exists only where this job's element was added with it (one
    // transaction, refused whole while another job's holds the VNI).
    if (!nft_accepts(underlay_netns, "list chain " + chain)) return;
    load_nft_rules(underlay_netns, std::string("delete element ") + kUnderlayTable + " vni_peers { " +
                                       std::to_string(job_vni(job_id)) + " }\nflush chain " + chain +
                                       "\ndelete chain " + chain + "\n");
}

namespace {

// The VXLAN, made in the underlay (its UDP socket lives there) and placed in
// the job's namespace at once: moving a device between namespaces afterwards
// waits for the kernel's RCU grace periods (17 to 30 ms here). A VNI in use
// may be this job's own, from its last run here (a requeued job): the kernel
// frees the devices of a deleted namespace in the background, later. So it
// is tried again for a while.
void add_segment_vxlan(const JobSegment& s) {
    UniqueFd job_ns = open_netns(s.netns);
    VxlanSpec v{s.vxlan, s.mtu, s.vni, s.self().underlay_ip, static_cast<uint16_t>(s.port), job_ns.get()};
    Rtnl underlay(s.underlay_netns);
    const Deadline deadline{Milliseconds(kVniWaitMs)};
    for (;; pause_for(Milliseconds(50))) {
        try {
            underlay.add_vxlan(v);
            return;
        } catch (const NetlinkRefusal& e) {
            if (e.err() != EEXIST) {
                Error n = e;
                SVM_CONTEXT(n, "the job's network segment (VNI " + std::to_string(s.vni) + ", local " +
                                   s.self().underlay_ip + ") in " + s.netns);
                throw n;
            }
            if (deadline.expired())
                throw VniInUse{"the job's network segment (VXLAN " + std::to_string(s.vni) +
                               ") is in use on this node by another live job (job ids 16,777,215 apart): " + e.what()};
        }
    }
}

}  // namespace

// Everything by this process (route netlink, libnftables): no program is
// started, which is most of what `ip`, `bridge` and `nft` would cost.
void setup_segment(const JobSegment& s) {
    add_netns(s.netns);
    ensure_underlay_guard(s.underlay_netns, s.port);
    add_segment_vxlan(s);
    try {
        load_nft_rules(s.underlay_netns, segment_underlay_rules(s));
    } catch (Error& err) {
        SVM_CONTEXT(err, "let the job's peers (only) into its VXLAN (VNI " + std::to_string(s.vni) + ")");
        throw;
    }
    Rtnl job(s.netns);
    job.set_up("lo");
    job.add_bridge(s.bridge, s.self().host.mac);
    job.set_mtu(s.bridge, s.mtu);
    int bridge = job.link_index(s.bridge);
    job.set_master(s.vxlan, bridge);
    job.add_address(bridge, s.host_ip, s.prefix_len);
    job.add_address(bridge, s.self().host.ip, 16);
    job.set_up(s.vxlan);
    job.set_up(s.bridge);
    int vxlan = job.link_index(s.vxlan);
    SegmentEntries e = segment_entries(s);
    for (const auto& n : e.neighbours) job.replace_neighbour(n.dev == s.bridge ? bridge : vxlan, n.ip, n.mac);
    for (const auto& f : e.forwarding) job.replace_forwarding(vxlan, f.mac, f.dst);
    try {
        load_nft_rules(s.netns, segment_guard_rules(s));
    } catch (Error& err) {
        SVM_CONTEXT(err, "install the guest's address guard (network namespace " + s.netns + ")");
        throw;
    }
}

void remove_segment(const std::string& netns, const std::string& underlay_netns, const std::string& vxlan) {
    if (netns.rfind("svmj", 0) != 0 || vxlan.rfind("svx", 0) != 0)
        SVM_THROW("not a job's network: " + netns + ", " + vxlan);
    if (underlay_netns.empty() || netns_exists(underlay_netns)) {
        remove_segment_underlay_rules(underlay_netns, job_of_vxlan(vxlan));
        Rtnl(underlay_netns).delete_link(vxlan);
    }
    if (!netns_exists(netns)) return;
    delete_netns(netns);
}

std::string resolve_underlay(const std::string& name_template, const std::string& node) {
    std::string name = name_template;
    for (size_t p; (p = name.find("%n")) != std::string::npos;) name.replace(p, 2, node);
    struct in_addr a {};
    if (::inet_pton(AF_INET, name.c_str(), &a) == 1) return name;
    struct addrinfo hints {};
    hints.ai_family = AF_INET;
    struct addrinfo* res = nullptr;
    int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
    if (rc != 0 || !res)
        SVM_THROW("cannot resolve the underlay address of node " + node + " (" + name + "): " + gai_strerror(rc));
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
    ::freeaddrinfo(res);
    return buf;
}

void enter_netns(const std::string& name) {
    UniqueFd fd = open_netns(name);
    if (::setns(fd.get(), CLONE_NEWNET) != 0) SVM_THROW_ERRNO("enter network namespace " + name);
}

}  // namespace svm
