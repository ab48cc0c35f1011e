#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "catch.hpp"

#include "fs.hpp"
#include "guest_net.hpp"
#include "netlink.hpp"
#include "proc.hpp"

using namespace svm;

namespace {

std::vector<std::string> numbered(const std::string& stem, size_t n) {
    std::vector<std::string> v;
    for (size_t i = 0; i < n; ++i) v.push_back(stem + std::to_string(i + 1));
    return v;
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

// The line of `text` that starts with `start` ("" if none).
std::string line_of(const std::string& text, const std::string& start) {
    size_t at = text.rfind("\n" + start);
    if (text.rfind(start, 0) == 0) at = 0;
    else if (at == std::string::npos) return "";
    else ++at;
    return text.substr(at, text.find('\n', at) - at);
}

bool has_forwarding(const SegmentEntries& e, const ForwardingEntry& want) {
    for (const auto& f : e.forwarding)
        if (f.mac == want.mac && f.dev == want.dev && f.dst == want.dst) return true;
    return false;
}

}  // namespace

TEST_CASE("a 300-node job's plan: addresses, MACs and peers, alike on every node", "[net]") {
    auto nodes = numbered("n", 300);
    std::vector<std::string> under;
    for (size_t i = 0; i < 300; ++i)
        under.push_back("192.168." + std::to_string(i / 200) + "." + std::to_string(i % 200 + 1));
    JobSegment s = plan_segment(337, 250, nodes, under, "10.213.0.0/16", "u", 4789, 1450);
    CHECK(s.vni == 337);
    CHECK(s.netns == "svmj337n250");
    CHECK(s.vxlan == "svx151");
    CHECK(s.host_ip == "10.213.255.254");
    REQUIRE(s.peers.size() == 300);
    std::set<std::string> ips, macs;
    for (const auto& p : s.peers) {
        ips.insert(p.guest.ip);
        macs.insert(p.guest.mac);
        CHECK(p.guest.ip != s.host_ip);
    }
    CHECK(ips.size() == 300);
    CHECK(macs.size() == 300);
    CHECK(s.self().guest.ip == "10.213.1.4");  // 260 = 256 + 4
    CHECK(s.self().underlay_ip == "192.168.1.51");
    // Every other node computes the same plan (but its own index).
    JobSegment t = plan_segment(337, 0, nodes, under, "10.213.0.0/16", "u", 4789, 1450);
    for (size_t i = 0; i < 300; ++i) CHECK(t.peers[i].guest.mac == s.peers[i].guest.mac);
    // Forwarding and neighbour entries: one per other node, to its underlay
    // address; nothing flooded (no all-zero entry), nothing for itself.
    SegmentEntries e = segment_entries(s), head = segment_entries(t);
    // (+ the head's host side: one forwarding entry for the VXLAN, one for
    // the bridge, one neighbour; the head has those for every node.)
    CHECK(e.forwarding.size() == 299 + 2);
    CHECK(e.neighbours.size() == 299 + 1);
    CHECK(has_forwarding(e, {"52:54:01:00:00:0a", "svx151", ""}));  // the head's host side, in the bridge's table
    CHECK(has_forwarding(e, {"52:54:01:00:00:0a", "svx151", "192.168.0.1"}));
    CHECK(head.forwarding.size() == 299 * 3);
    CHECK(head.neighbours.size() == 299 * 2);
    CHECK(segment_host_side(250).ip == "169.254.1.4");
    CHECK(segment_host_side(250).mac == "52:54:01:00:01:04");
    CHECK(has_forwarding(e, {"52:54:00:00:00:0a", "svx151", "192.168.0.1"}));
    for (const auto& f : e.forwarding) {
        CHECK(f.mac != "00:00:00:00:00:00");  // nothing flooded
        CHECK(f.mac != s.self().guest.mac);
        CHECK(f.dev == "svx151");
    }
    for (const auto& n : e.neighbours) {
        CHECK(n.ip != s.self().guest.ip);
        CHECK((n.dev == "svx151" || (n.dev == "svmbr" && n.ip == "169.254.0.10")));
    }
}

TEST_CASE("jobs whose ids are equal modulo 254 get segments of their own", "[net]") {
    auto nodes = numbered("node", 2);
    std::vector<std::string> under = {"10.1.0.1", "10.1.0.2"};
    JobSegment a = plan_segment(83, 0, nodes, under, "10.213.0.0/16", "", 4789, 1450);
    JobSegment b = plan_segment(337, 0, nodes, under, "10.213.0.0/16", "", 4789, 1450);
    CHECK(a.vni != b.vni);
    CHECK(a.netns != b.netns);
    CHECK(a.vxlan != b.vxlan);
    CHECK(job_vni(1) == 1);
    CHECK(job_vni(0xffffff) == 0xffffff);
    CHECK(job_vni(0xffffff + 1) == 1);  // the only collision: ids 16,777,215 apart
    CHECK(job_vni(67043328) <= 0xffffff);
    CHECK_THROWS(plan_segment(1, 2, nodes, under, "10.213.0.0/16", "", 4789, 1450));
    CHECK_THROWS(plan_segment(1, 0, nodes, {"10.1.0.1"}, "10.213.0.0/16", "", 4789, 1450));
    CHECK_THROWS(remove_segment("other", "", "svx1"));  // only ours
}

TEST_CASE("the guard holds the tap to the guest's own MAC and address", "[net]") {
    JobSegment s = plan_segment(9, 1, numbered("n", 2), {"10.1.0.1", "10.1.0.2"}, "10.213.0.0/16", "", 4789, 1450);
    std::string r = segment_guard_rules(s);
    CHECK(r.find("ether saddr != 52:54:00:00:00:0b drop") != std::string::npos);
    CHECK(r.find("ip saddr != 10.213.0.11 drop") != std::string::npos);
    CHECK(r.find("arp saddr ether != 52:54:00:00:00:0b drop") != std::string::npos);
    CHECK(r.find("arp saddr ip != { 0.0.0.0, 10.213.0.11 } drop") != std::string::npos);
    CHECK(r.find("ether type != { ip, arp } drop") != std::string::npos);
    CHECK(r.find("ip daddr 169.254.0.0/16 drop") != std::string::npos);  // never the host sides
    CHECK(count_of(r, "iifname \"svmtap\" jump from_guest") == 2);       // forwarded and to the host
}

// ---- On the real kernel: two "hosts" (underlay namespaces joined by a veth
// pair), a "guest" namespace behind each job's tap.
namespace {

struct Sh {
    static RunResult x(const std::string& cmd) {
        RunOptions o;
        o.timeout_ms = 30000;
        o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
        return run({"bash", "-c", cmd}, o);
    }
};

const char* kNs[] = {"svmtu-h1", "svmtu-h2", "svmtg-83-0", "svmtg-83-1", "svmtg-337-0", "svmtg-337-1"};

struct Lab {
    Lab() {
        clean();
        REQUIRE(
            Sh::x("ip netns add svmtu-h1 && ip netns add svmtu-h2 && "
                  "ip -n svmtu-h1 link add u0 type veth peer name u0 netns svmtu-h2 && "
                  "ip -n svmtu-h1 addr add 10.250.77.1/24 dev u0 && ip -n svmtu-h2 addr add 10.250.77.2/24 dev u0 && "
                  "ip -n svmtu-h1 link set u0 up && ip -n svmtu-h2 link set u0 up")
                .ok());
    }
    ~Lab() { clean(); }
    static void clean() {
        for (uint32_t j : {83u, 337u, 83u + 0xffffffu})
            for (int i : {0, 1}) {
                std::string ns = "svmj" + std::to_string(j) + "n" + std::to_string(i);
                Sh::x("ip netns delete " + ns + " 2>/dev/null");
            }
        for (const char* n : kNs) Sh::x(std::string("ip netns delete ") + n + " 2>/dev/null");
    }
    // A guest: a namespace whose eth0 is the other end of the job's "svmtap".
    static void guest(const JobSegment& s, const std::string& name) {
        const GuestAddress& g = s.self().guest;
        auto r =
            Sh::x("ip netns add " + name + " && ip -n " + s.netns + " link add svmtap type veth peer name eth0 netns " +
                  name + " && ip -n " + s.netns + " link set svmtap master svmbr up && ip -n " + name +
                  " link set eth0 address " + g.mac + " mtu 1450 up && ip -n " + name + " addr add " + g.ip +
                  "/16 dev eth0 && ip -n " + name + " link set lo up");
        REQUIRE(r.ok());
    }
    // TCP to a closed port: "refused" means the peer's kernel answered.
    static bool reaches(const std::string& ns, const std::string& ip) {
        auto r = Sh::x("ip netns exec " + ns + " timeout 3 bash -c 'exec 3<>/dev/tcp/" + ip + "/9' 2>&1");
        return r.out.find("refused") != std::string::npos;
    }
};

}  // namespace

TEST_CASE("on the kernel: each job's guests reach each other over VXLAN, not another job's, not spoofed",
          "[net][root]") {
    REQUIRE(::geteuid() == 0);
    Lab lab;
    std::vector<std::string> nodes = {"h1", "h2"}, under = {"10.250.77.1", "10.250.77.2"};
    for (uint32_t job : {83u, 337u})
        for (int i : {0, 1}) {
            JobSegment s =
                plan_segment(job, i, nodes, under, "10.213.0.0/16", "svmtu-h" + std::to_string(i + 1), 4789, 1450);
            setup_segment(s);
            Lab::guest(s, "svmtg-" + std::to_string(job) + "-" + std::to_string(i));
        }
    // What ip and bridge would have made (the requests are this process's own).
    std::string vx = Sh::x("ip -n svmj83n0 -d link show svx53").out;
    CHECK(vx.find(",UP,LOWER_UP> mtu 1450 qdisc noqueue master svmbr ") != std::string::npos);
    CHECK(vx.find("vxlan id 83 local 10.250.77.1 ") != std::string::npos);
    // (iproute2 6.1 prints the flags after dstport, 6.15 at the line's end)
    CHECK(vx.find(" dstport 4789 ") != std::string::npos);
    CHECK(vx.find(" nolearning ") != std::string::npos);
    CHECK(vx.find(" proxy ") != std::string::npos);
    std::string br = Sh::x("ip -n svmj83n0 addr show svmbr").out;
    CHECK(br.find("mtu 1450 ") != std::string::npos);
    CHECK(br.find("state UP") != std::string::npos);
    CHECK(br.find("link/ether 52:54:01:00:00:0a ") != std::string::npos);
    CHECK(br.find("inet 10.213.255.254/16 ") != std::string::npos);
    CHECK(br.find("inet 169.254.0.10/16 ") != std::string::npos);
    std::string fdb = Sh::x("bridge -n svmj83n0 fdb show dev svx53").out;
    // (the underlay's namespace between: "link-netnsid N")
    CHECK_THAT(line_of(fdb, "52:54:00:00:00:0b dst 10.250.77.2 "), Catch::EndsWith(" self permanent"));
    CHECK_THAT(line_of(fdb, "52:54:01:00:00:0b dst 10.250.77.2 "), Catch::EndsWith(" self permanent"));
    CHECK(fdb.find("52:54:01:00:00:0b master svmbr static") != std::string::npos);
    std::string neigh = Sh::x("ip -n svmj83n0 neigh show").out;
    CHECK(neigh.find("10.213.0.11 dev svx53 lladdr 52:54:00:00:00:0b PERMANENT") != std::string::npos);
    CHECK(neigh.find("169.254.0.11 dev svmbr lladdr 52:54:01:00:00:0b PERMANENT") != std::string::npos);
    CHECK(Sh::x("ip -n svmj83n0 link show lo").out.find("state UNKNOWN") != std::string::npos);  // lo up
    CHECK(Sh::x("ip netns exec svmj83n0 nft list table bridge svm_guard").ok());
    // A request the kernel refuses says why, in the kernel's words where it has them.
    try {
        Rtnl("svmtu-h1").add_vxlan({"svxdup", 1450, 83, "10.250.77.1", 4789, -1});
        FAIL("a second VXLAN with the job's VNI was made");
    } catch (const NetlinkRefusal& e) {
        CHECK(e.err() == EEXIST);
        CHECK(std::string(e.what()).find("VNI") != std::string::npos);
    }
    CHECK_THROWS_WITH(Rtnl("svmj83n0").link_index("nosuch0"), Catch::Contains("No such device"));
    CHECK_THROWS_WITH(load_nft_rules("svmj83n0", "table bridge t { chain c { nosuchword; } }"),
                      Catch::Contains("nosuchword"));
    // The same addresses in both jobs, each on its own segment.
    CHECK(Lab::reaches("svmtg-83-0", "10.213.0.11"));
    CHECK(Lab::reaches("svmtg-337-1", "10.213.0.10"));
    // Nothing else is on a job's segment: job 83's guest 0 finds no third guest.
    CHECK_FALSE(Lab::reaches("svmtg-83-0", "10.213.0.12"));
    // The host side is the job's own namespace's (no other local user's): the
    // underlay does not route to the guests.
    CHECK_FALSE(Lab::reaches("svmtu-h1", "10.213.0.10"));
    // A guest that sends with another MAC or another address: the peer
    // counts what arrives (the replies could not come back anyway: the
    // neighbour entries name the true ones).
    REQUIRE(Sh::x("ip netns exec svmtg-83-1 nft 'add table inet t; add chain inet t c { type filter hook input "
                  "priority 0; }; "
                  "add rule inet t c ether saddr 52:54:00:00:00:0c counter; "
                  "add rule inet t c ip saddr 10.213.0.20 counter'")
                .ok());
    REQUIRE(Sh::x("ip -n svmtg-83-0 addr add 10.213.0.20/16 dev eth0").ok());
    auto arrived = [] {  // {from the spoofed MAC, from the spoofed address}
        Sh::x("ip netns exec svmtg-83-0 timeout 2 socat -u OPEN:/dev/null TCP:10.213.0.11:9,bind=10.213.0.20");
        Sh::x("ip -n svmtg-83-0 link set eth0 address 52:54:00:00:00:0c");
        Sh::x("ip netns exec svmtg-83-0 timeout 2 bash -c 'exec 3<>/dev/tcp/10.213.0.11/9'");
        Sh::x("ip -n svmtg-83-0 link set eth0 address 52:54:00:00:00:0a");
        std::string c = Sh::x("ip netns exec svmtg-83-1 nft list chain inet t c").out;
        size_t mac = c.find("ether saddr"), ip = c.find("ip saddr");
        return std::make_pair(c.find("counter packets 0 ", mac) != mac + c.substr(mac).find("counter"),
                              c.find("counter packets 0 ", ip) != ip + c.substr(ip).find("counter"));
    };
    auto guarded = arrived();
    CHECK_FALSE(guarded.first);
    CHECK_FALSE(guarded.second);
    CHECK(Lab::reaches("svmtg-83-0", "10.213.0.11"));  // its own MAC and address still work
    // Without the guard both would have arrived: the guard is what stops them.
    REQUIRE(Sh::x("ip netns exec svmj83n0 nft delete table bridge svm_guard").ok());
    auto open = arrived();
    CHECK(open.first);
    CHECK(open.second);
    // Another live job with the same VNI on this node fails cleanly.
    JobSegment clash = plan_segment(83 + 0xffffff, 0, nodes, under, "10.213.0.0/16", "svmtu-h1", 4789, 1450);
    CHECK(clash.vni == 83);
    CHECK_THROWS_AS(setup_segment(clash), VniInUse);
    remove_segment(clash.netns, clash.underlay_netns, clash.vxlan);
    CHECK(Lab::reaches("svmtg-83-0", "10.213.0.11"));  // the clash left job 83 alone
    // Removal: twice is harmless; nothing of the job is left in the underlay.
    for (int round = 0; round < 2; ++round)
        for (int i : {0, 1}) remove_segment("svmj83n" + std::to_string(i), "svmtu-h" + std::to_string(i + 1), "svx53");
    CHECK_FALSE(path_exists("/run/netns/svmj83n0"));
    CHECK(Sh::x("ip -n svmtu-h1 -d link show type vxlan").out.find("vxlan id 83 ") == std::string::npos);
    CHECK(Sh::x("ip -n svmtu-h1 -d link show type vxlan").out.empty());  // 337's lives in its namespace
}

TEST_CASE("on the kernel: a job's segment made again at once on the same node (a requeued job, same VNI)",
          "[net][root]") {
    REQUIRE(::geteuid() == 0);
    Lab lab;
    std::vector<std::string> nodes = {"h1", "h2"}, under = {"10.250.77.1", "10.250.77.2"};
    JobSegment s = plan_segment(83, 0, nodes, under, "10.213.0.0/16", "svmtu-h1", 4789, 1450);
    // The kernel frees a deleted namespace's VXLAN (and its VNI) later, in
    // the background: the next setup waits for it instead of refusing.
    for (int round = 0; round < 5; ++round) {
        CAPTURE(round);
        CHECK_NOTHROW(setup_segment(s));
        remove_segment(s.netns, s.underlay_netns, s.vxlan);
    }
    CHECK_FALSE(path_exists("/run/netns/" + s.netns));
}

TEST_CASE("the node's VXLAN guard and a job's part of it, as nft text", "[net]") {
    std::string g = underlay_guard_rules(4790);
    CHECK(g.rfind("create table inet svm_underlay\n", 0) == 0);  // once per namespace: a second is refused whole
    CHECK(g.find("udp dport 4790 @th,96,24 vmap @vni_peers\n") != std::string::npos);
    CHECK(g.find("udp dport 4790 counter drop\n") != std::string::npos);
    CHECK(g.find("type filter hook output priority -10; policy accept;\n    udp dport 4790 meta skuid >= 0 "
                 "counter drop\n") != std::string::npos);
    // Node 1 of a 4-node job whose nodes 2 and 3 share an address: the
    // others, once each, never itself.
    JobSegment s = plan_segment(0x1000005, 1, numbered("n", 4), {"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.3"},
                                "10.213.0.0/16", "u", 4789, 1450);
    CHECK(segment_underlay_rules(s) ==
          "add chain inet svm_underlay job_16777221\n"
          "add rule inet svm_underlay job_16777221 ip saddr { 10.1.0.1, 10.1.0.3 } accept\n"
          "add element inet svm_underlay vni_peers { 6 : jump job_16777221 }\n");
    // A one-node job: no peer, its VNI taken from no one.
    JobSegment one = plan_segment(9, 0, {"n1"}, {"10.1.0.1"}, "10.213.0.0/16", "u", 4789, 1450);
    CHECK(segment_underlay_rules(one) ==
          "add chain inet svm_underlay job_9\nadd element inet svm_underlay vni_peers { 9 : jump job_9 }\n");
}

namespace {

// Crafted VXLAN packets (VNI `vni`, a broadcast frame from guest 1's MAC),
// sent by an ordinary UDP socket in the underlay namespace `ns`, as `who`
// (root, or "nobody": an unprivileged user), from `src` to `dst`.
void inject(const std::string& ns, const std::string& who, const std::string& src, const std::string& dst,
            uint32_t vni) {
    std::string py =
        "import socket,struct\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "s.bind(('" +
        src +
        "',0))\n"
        "p=struct.pack('!II',0x08000000," +
        std::to_string(vni) +
        "<<8)+b'\\xff'*6+bytes.fromhex('52540000000b')+b'\\x08\\x06'+bytes(46)\n"
        "for i in range(20):\n"
        "  try: s.sendto(p,('" +
        dst + "',4789))\n  except OSError: pass\n";
    std::string as = who == "root" ? "" : "setpriv --reuid 65534 --regid 65534 --clear-groups ";
    REQUIRE(Sh::x("ip netns exec " + ns + " " + as + "/usr/bin/python3 -c \"" + py + "\"").ok());
}

// Frames the job's VXLAN device took in, on the job's side.
long vxlan_rx(const std::string& job_ns, const std::string& vxlan) {
    std::string out = Sh::x("ip -n " + job_ns + " -s -o link show " + vxlan).out;
    size_t at = out.find("RX:");
    if (at == std::string::npos) return -1;
    at = out.find('\\', at);  // the figures follow on the next (folded) line
    long bytes = 0, packets = -1;
    std::sscanf(out.c_str() + at + 1, " %ld %ld", &bytes, &packets);
    return packets;
}

}  // namespace

TEST_CASE("on the kernel: only the kernels of the job's other nodes put frames into its VXLAN", "[net][root]") {
    REQUIRE(::geteuid() == 0);
    Lab lab;
    std::vector<std::string> nodes = {"h1", "h2"}, under = {"10.250.77.1", "10.250.77.2"};
    for (int i : {0, 1}) {
        JobSegment s =
            plan_segment(83, i, nodes, under, "10.213.0.0/16", "svmtu-h" + std::to_string(i + 1), 4789, 1450);
        setup_segment(s);
        Lab::guest(s, "svmtg-83-" + std::to_string(i));
    }
    // A third "node", not the job's, on the same underlay; loopback up.
    REQUIRE(Sh::x("ip -n svmtu-h2 addr add 10.250.77.3/24 dev u0 && ip -n svmtu-h1 link set lo up").ok());
    REQUIRE(Lab::reaches("svmtg-83-0", "10.213.0.11"));
    // The VXLAN's socket listens on every address whatever its "local" (so
    // the address alone guards nothing): the firewall does.
    CHECK(Sh::x("ip netns exec svmtu-h1 ss -Hlun sport = 4789").out.find("0.0.0.0:4789") != std::string::npos);
    long before = vxlan_rx("svmj83n0", "svx53");
    REQUIRE(before > 0);
    inject("svmtu-h2", "nobody", "10.250.77.2", "10.250.77.1", 83);  // a user of the peer node
    inject("svmtu-h2", "root", "10.250.77.2", "10.250.77.1", 83);    // any socket, root's too
    inject("svmtu-h2", "nobody", "10.250.77.3", "10.250.77.1", 83);  // another node's
    inject("svmtu-h1", "nobody", "127.0.0.1", "127.0.0.1", 83);      // a user of the node itself
    inject("svmtu-h1", "nobody", "10.250.77.1", "10.250.77.1", 83);
    // Input alone (the peer's output guard gone): only the peer's address passes.
    REQUIRE(Sh::x("ip netns exec svmtu-h2 nft flush chain inet svm_underlay output").ok());
    inject("svmtu-h2", "nobody", "10.250.77.3", "10.250.77.1", 83);
    inject("svmtu-h2", "nobody", "10.250.77.2", "10.250.77.1", 337);  // not a VNI of the job's here
    CHECK(vxlan_rx("svmj83n0", "svx53") == before);
    CHECK(Lab::reaches("svmtg-83-0", "10.213.0.11"));  // the kernels' own traffic passes
    CHECK(Lab::reaches("svmtg-83-1", "10.213.0.10"));
    // Which is what the input guard holds: without the output guard a user
    // of the peer node is let in (the output guard is what stops it).
    before = vxlan_rx("svmj83n0", "svx53");
    inject("svmtu-h2", "nobody", "10.250.77.2", "10.250.77.1", 83);
    CHECK(vxlan_rx("svmj83n0", "svx53") == before + 20);
    // The job's part goes with it, twice harmlessly; the node's table stays.
    for (int round = 0; round < 2; ++round) remove_segment("svmj83n0", "svmtu-h1", "svx53");
    std::string t = Sh::x("ip netns exec svmtu-h1 nft list table inet svm_underlay").out;
    CHECK(t.find("job_83") == std::string::npos);
    CHECK(t.find("elements") == std::string::npos);
    CHECK(t.find("vmap @vni_peers") != std::string::npos);
    // Made again: the existing table is kept, the job's part added again.
    JobSegment again = plan_segment(83, 0, nodes, under, "10.213.0.0/16", "svmtu-h1", 4789, 1450);
    CHECK_NOTHROW(setup_segment(again));
    CHECK(Sh::x("ip netns exec svmtu-h1 nft list chain inet svm_underlay job_83").ok());
    // Another live job with the same VNI leaves job 83's part alone.
    JobSegment clash = plan_segment(83 + 0xffffff, 0, nodes, under, "10.213.0.0/16", "svmtu-h1", 4789, 1450);
    CHECK_THROWS_AS(setup_segment(clash), VniInUse);
    remove_segment(clash.netns, clash.underlay_netns, clash.vxlan);
    CHECK(Sh::x("ip netns exec svmtu-h1 nft list table inet svm_underlay").out.find("jump job_83") !=
          std::string::npos);
    remove_segment(again.netns, again.underlay_netns, again.vxlan);
}

TEST_CASE("on the kernel: prologs that make the node's VXLAN guard at once make one", "[net][root]") {
    REQUIRE(::geteuid() == 0);
    Lab lab;
    std::vector<std::thread> prologs;
    std::atomic<int> failed{0};
    for (int i = 0; i < 6; ++i)
        prologs.emplace_back([&] {
            try {
                ensure_underlay_guard("svmtu-h1", 4789);
            } catch (const Error&) {
                ++failed;
            }
        });
    for (auto& t : prologs) t.join();
    CHECK(failed == 0);
    std::string t = Sh::x("ip netns exec svmtu-h1 nft list table inet svm_underlay").out;
    CHECK(count_of(t, "vmap @vni_peers") == 1);
    CHECK(count_of(t, "meta skuid") == 1);
    ensure_underlay_guard("svmtu-h1", 4789);  // and again later: kept as it is
    CHECK(Sh::x("ip netns exec svmtu-h1 nft list table inet svm_underlay").out == t);
}

TEST_CASE("guest addresses depend on the node index only, IPoIB's on the job too", "[core]") {
    auto a = svm::segment_address("10.213.0.0/16", 0);
    auto b = svm::segment_address("10.213.0.0/16", 300);
    CHECK(a.ip == "10.213.0.10");
    CHECK(a.mac == "52:54:00:00:00:0a");
    CHECK(b.ip == "10.213.1.54");  // 310 = 1 * 256 + 54
    CHECK(b.mac == "52:54:00:00:01:36");
    auto last = svm::segment_address("10.213.0.0/16", svm::kMaxSegmentGuests - 1);
    CHECK(last.ip == "10.213.255.253");
    CHECK(last.ip != svm::segment_host_ip("10.213.0.0/16"));
    CHECK_THROWS_AS(svm::segment_address("10.213.0.0/16", svm::kMaxSegmentGuests), svm::Error);
    CHECK_THROWS_AS(svm::segment_address("10.213.0.0/24", 1), svm::Error);
    CHECK(svm::fabric_address("10.214.0.0/16", 7, 2).ip == "10.214.8.12");
}
