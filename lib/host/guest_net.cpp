#include "guest_net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

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

// argv run in network namespace `netns` ("" = this one): ip and bridge enter
// it themselves (-n); anything else is started in it (setns in the child:
// one program fewer than `ip netns exec`, whose mounts nothing here needs).
RunResult run_in(const std::string& netns, std::vector<std::string> argv, const std::string& input = "") {
    UniqueFd ns;
    RunOptions o;
    if (!netns.empty() && (argv[0] == "ip" || argv[0] == "bridge")) {
        argv.insert(argv.begin() + 1, {"-n", netns});
    } else if (!netns.empty()) {
        ns = UniqueFd(::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
        if (!ns) SVM_THROW_ERRNO("open network namespace " + netns);
        o.netns_fd = ns.get();
    }
    o.stdin_data = input;
    o.timeout_ms = 60000;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    return run(argv, o);
}

void run_in_checked(const std::string& netns, const std::vector<std::string>& argv, const std::string& what,
                    const std::string& input = "") {
    RunResult r = run_in(netns, argv, input);
    if (!r.ok())
        SVM_THROW(what + (netns.empty() ? "" : " (network namespace " + netns + ")") + ": " + trim(r.err + r.out));
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

// `ip link add` of a VXLAN failed because its VNI (or name) is taken.
bool vni_in_use(const RunResult& r) {
    std::string err = r.err + r.out;
    return err.find("VNI") != std::string::npos || err.find("exists") != std::string::npos;
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

std::string segment_ip_batch(const JobSegment& s) {
    std::string b =
        "link set lo up\n"
        "link add " +
        s.bridge +
        " type bridge\n"
        "link set " +
        s.bridge + " mtu " + std::to_string(s.mtu) +
        "\n"
        "link set " +
        s.vxlan + " master " + s.bridge +
        "\n"
        "link set " +
        s.bridge + " address " + s.self().host.mac +
        "\n"
        "addr add " +
        s.host_ip + "/" + std::to_string(s.prefix_len) + " dev " + s.bridge +
        "\n"
        "addr add " +
        s.self().host.ip + "/16 dev " + s.bridge +
        "\n"
        "link set " +
        s.vxlan +
        " up\n"
        "link set " +
        s.bridge + " up\n";
    // Static neighbours on the VXLAN port: with "proxy" the VXLAN device
    // answers a guest's ARP for a peer itself, so no broadcast leaves the node.
    for (size_t i = 0; i < s.peers.size(); ++i) {
        if (static_cast<int>(i) == s.node_index) continue;
        b += "neigh replace " + s.peers[i].guest.ip + " lladdr " + s.peers[i].guest.mac + " dev " + s.vxlan +
             " nud permanent\n";
        if (relay_peer(s, i))
            b += "neigh replace " + s.peers[i].host.ip + " lladdr " + s.peers[i].host.mac + " dev " + s.bridge +
                 " nud permanent\n";
    }
    return b;
}

std::string segment_fdb_batch(const JobSegment& s) {
    std::string b;
    for (size_t i = 0; i < s.peers.size(); ++i) {
        if (static_cast<int>(i) == s.node_index) continue;
        b += "fdb replace " + s.peers[i].guest.mac + " dev " + s.vxlan + " dst " + s.peers[i].underlay_ip +
             " self permanent\n";
        if (!relay_peer(s, i)) continue;
        // The peer's host side: also in the bridge's table, so that nothing
        // for it is ever flooded to the guest's tap.
        b += "fdb replace " + s.peers[i].host.mac + " dev " + s.vxlan + " dst " + s.peers[i].underlay_ip +
             " self permanent\n";
        b += "fdb replace " + s.peers[i].host.mac + " dev " + s.vxlan + " master static\n";
    }
    return b;
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

void setup_segment(const JobSegment& s) {
    add_netns(s.netns);
    // Made in the underlay (its UDP socket lives there) and placed in the
    // job's namespace at once: moving a device between namespaces afterwards
    // waits for the kernel's RCU grace periods (17 to 30 ms here).
    std::vector<std::string> add = {"ip",         "link",
                                    "add",        s.vxlan,
                                    "mtu",        std::to_string(s.mtu),
                                    "netns",      s.netns,
                                    "type",       "vxlan",
                                    "id",         std::to_string(s.vni),
                                    "local",      s.self().underlay_ip,
                                    "dstport",    std::to_string(s.port),
                                    "nolearning", "proxy"};
    // A VNI in use may be this job's own, from its last run here (a requeued
    // job): the kernel frees the devices of a deleted namespace in the
    // background, later. So it is tried again for a while.
    RunResult r = run_in(s.underlay_netns, add);
    for (int waited_ms = 0; !r.ok() && vni_in_use(r) && waited_ms < kVniWaitMs; waited_ms += 50) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        r = run_in(s.underlay_netns, add);
    }
    if (!r.ok()) {
        std::string err = trim(r.err + r.out);
        while (!err.empty() && err.back() == '.') err.pop_back();
        if (vni_in_use(r))
            throw VniInUse{"the job's network segment (VXLAN " + std::to_string(s.vni) +
                           ") is in use on this node by another live job (job ids 16,777,215 apart): " + err};
        SVM_THROW("create VXLAN " + s.vxlan + " (VNI " + std::to_string(s.vni) + ", local " + s.self().underlay_ip +
                  (s.underlay_netns.empty() ? "" : ", network namespace " + s.underlay_netns) + ") in " + s.netns +
                  ": " + err);
    }
    run_in_checked(s.netns, {"ip", "-batch", "-"}, "set up the job's bridge and VXLAN port", segment_ip_batch(s));
    std::string fdb = segment_fdb_batch(s);
    if (!fdb.empty()) run_in_checked(s.netns, {"bridge", "-batch", "-"}, "add the job's forwarding entries", fdb);
    run_in_checked(s.netns, {"nft", "-f", "-"}, "install the guest's address guard (nft)", segment_guard_rules(s));
}

void remove_segment(const std::string& netns, const std::string& underlay_netns, const std::string& vxlan) {
    if (netns.rfind("svmj", 0) != 0 || vxlan.rfind("svx", 0) != 0)
        SVM_THROW("not a job's network: " + netns + ", " + vxlan);
    if (underlay_netns.empty() || netns_exists(underlay_netns)) {
        RunResult r = run_in(underlay_netns, {"ip", "link", "del", vxlan});
        if (!r.ok() && run_in(underlay_netns, {"ip", "link", "show", vxlan}).ok())
            SVM_THROW("delete VXLAN " + vxlan + ": " + trim(r.err + r.out));
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
    std::string p = "/run/netns/" + name;
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open network namespace " + p);
    if (::setns(fd.get(), CLONE_NEWNET) != 0) SVM_THROW_ERRNO("enter network namespace " + name);
}

}  // namespace svm
