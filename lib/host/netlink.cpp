#include "netlink.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace svm {

namespace {

constexpr size_t kAlign = 4;
size_t aligned(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// One request: its header, its family's header, then attributes (nested
// ones through begin/end).
class Message {
public:
    Message(uint16_t type, uint16_t flags, const void* family_header, size_t len) {
        nlmsghdr h{};
        h.nlmsg_type = type;
        h.nlmsg_flags = static_cast<uint16_t>(flags | NLM_F_REQUEST | NLM_F_ACK);
        append(&h, sizeof h);
        append(family_header, len);
    }
    void attr(uint16_t type, const void* data, size_t len) {
        nlattr a{static_cast<uint16_t>(NLA_HDRLEN + len), type};
        append(&a, sizeof a);
        append(data, len);
    }
    template <class T>
    void attr(uint16_t type, T value) {
        attr(type, &value, sizeof value);
    }
    void attr(uint16_t type, const std::string& s) { attr(type, s.c_str(), s.size() + 1); }
    size_t begin(uint16_t type) {
        size_t at = b_.size();
        attr(type, nullptr, 0);
        return at;
    }
    void end(size_t at) {
        uint16_t len = static_cast<uint16_t>(b_.size() - at);
        std::memcpy(b_.data() + at, &len, sizeof len);
    }
    std::vector<char>& bytes() { return b_; }

private:
    void append(const void* p, size_t n) {
        size_t at = b_.size();
        b_.resize(at + aligned(n), 0);
        if (n) std::memcpy(b_.data() + at, p, n);
        uint32_t len = static_cast<uint32_t>(b_.size());
        std::memcpy(b_.data(), &len, sizeof len);
    }
    std::vector<char> b_;
};

in_addr ipv4(const std::string& ip) {
    in_addr a{};
    if (::inet_pton(AF_INET, ip.c_str(), &a) != 1) SVM_THROW("not an IPv4 address: \"" + ip + "\"");
    return a;
}

std::array<unsigned char, 6> mac_bytes(const std::string& mac) {
    std::array<unsigned char, 6> m{};
    char end;
    if (std::sscanf(mac.c_str(), "%2hhx:%2hhx:%2hhx:%2hhx:%2hhx:%2hhx%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
                    &end) != 6)
        SVM_THROW("not a MAC address: \"" + mac + "\"");
    return m;
}

ifinfomsg link_header(int index = 0, unsigned flags = 0, unsigned change = 0) {
    ifinfomsg h{};
    h.ifi_family = AF_UNSPEC;
    h.ifi_index = index;
    h.ifi_flags = flags;
    h.ifi_change = change;
    return h;
}

// The calling thread in network namespace `name` for the guard's lifetime
// ("" = stays where it is).
class InNetns {
public:
    explicit InNetns(const std::string& name) {
        if (name.empty()) return;
        UniqueFd target = open_netns(name);
        back_ = UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
        if (!back_) SVM_THROW_ERRNO("open this thread's network namespace");
        if (::setns(target.get(), CLONE_NEWNET) != 0) SVM_THROW_ERRNO("enter network namespace " + name);
    }
    ~InNetns() {
        // Staying in the job's namespace would put whatever this thread does
        // next there: nothing can go on.
        if (back_ && ::setns(back_.get(), CLONE_NEWNET) != 0) std::abort();
    }
    InNetns(const InNetns&) = delete;
    InNetns& operator=(const InNetns&) = delete;

private:
    UniqueFd back_;
};

// The kernel's own sentence in an extended acknowledgement, if any.
std::string kernel_says(const nlmsghdr* h) {
    if (!(h->nlmsg_flags & NLM_F_ACK_TLVS)) return "";
    size_t off = NLMSG_HDRLEN + sizeof(nlmsgerr);  // NETLINK_CAP_ACK: the request is not echoed
    while (off + NLA_HDRLEN <= h->nlmsg_len) {
        const auto* a = reinterpret_cast<const nlattr*>(reinterpret_cast<const char*>(h) + off);
        if (a->nla_len < NLA_HDRLEN || off + a->nla_len > h->nlmsg_len) break;
        if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG)
            return std::string(reinterpret_cast<const char*>(a) + NLA_HDRLEN,
                               ::strnlen(reinterpret_cast<const char*>(a) + NLA_HDRLEN, a->nla_len - NLA_HDRLEN));
        off += aligned(a->nla_len);
    }
    return "";
}

}  // namespace

UniqueFd open_netns(const std::string& name) {
    std::string path = "/run/netns/" + name;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open network namespace " + path);
    return fd;
}

NetlinkRefusal::NetlinkRefusal(const std::string& what, int err, const std::string& kernel_says)
    : Error(errno_message(what, err) + (kernel_says.empty() ? "" : " (" + kernel_says + ")"), __FILE__, __LINE__,
            __func__),
      err_(err) {}

Rtnl::Rtnl(const std::string& netns) : answer_(32768), where_(netns.empty() ? "" : " in network namespace " + netns) {
    InNetns in(netns);
    fd_ = UniqueFd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (!fd_) SVM_THROW_ERRNO("open a route netlink socket" + where_);
    int on = 1;
    ::setsockopt(fd_.get(), SOL_NETLINK, NETLINK_CAP_ACK, &on, sizeof on);
    ::setsockopt(fd_.get(), SOL_NETLINK, NETLINK_EXT_ACK, &on, sizeof on);
}

void Rtnl::request(std::vector<char>& msg, const std::string& what, std::vector<char>* reply) {
    auto* h = reinterpret_cast<nlmsghdr*>(msg.data());
    h->nlmsg_seq = ++seq_;
    if (::send(fd_.get(), msg.data(), msg.size(), 0) != static_cast<ssize_t>(msg.size()))
        SVM_THROW_ERRNO(what + where_ + ": send");
    for (;;) {
        ssize_t n = ::recv(fd_.get(), answer_.data(), answer_.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) SVM_THROW_ERRNO(what + where_ + ": receive");
        for (auto* r = reinterpret_cast<nlmsghdr*>(answer_.data()); NLMSG_OK(r, static_cast<unsigned>(n));
             r = NLMSG_NEXT(r, n)) {
            if (r->nlmsg_seq != seq_) continue;
            if (r->nlmsg_type != NLMSG_ERROR) {
                if (reply && reply->empty())
                    reply->assign(reinterpret_cast<char*>(r), reinterpret_cast<char*>(r) + r->nlmsg_len);
                continue;
            }
            int err = -reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(r))->error;
            if (err == 0) return;
            throw NetlinkRefusal(what + where_, err, kernel_says(r));
        }
    }
}

int Rtnl::link_index(const std::string& name) {
    ifinfomsg h = link_header();
    Message m(RTM_GETLINK, 0, &h, sizeof h);
    m.attr(IFLA_EXT_MASK, uint32_t{RTEXT_FILTER_SKIP_STATS});
    m.attr(IFLA_IFNAME, name);
    std::vector<char> reply;
    request(m.bytes(), "find network device " + name, &reply);
    if (reply.size() < NLMSG_LENGTH(sizeof(ifinfomsg)))
        SVM_THROW("find network device " + name + where_ + ": no answer");
    return reinterpret_cast<const ifinfomsg*>(NLMSG_DATA(reinterpret_cast<const nlmsghdr*>(reply.data())))->ifi_index;
}

void Rtnl::add_vxlan(const VxlanSpec& v) {
    ifinfomsg h = link_header();
    Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &h, sizeof h);
    m.attr(IFLA_MTU, static_cast<uint32_t>(v.mtu));
    if (v.target_netns_fd >= 0) m.attr(IFLA_NET_NS_FD, static_cast<uint32_t>(v.target_netns_fd));
    m.attr(IFLA_IFNAME, v.name);
    size_t info = m.begin(IFLA_LINKINFO);
    m.attr(IFLA_INFO_KIND, std::string("vxlan"));
    size_t data = m.begin(IFLA_INFO_DATA);
    m.attr(IFLA_VXLAN_ID, v.vni);
    m.attr(IFLA_VXLAN_LOCAL, ipv4(v.local_ip));
    m.attr(IFLA_VXLAN_PORT, htons(v.port));
    m.attr(IFLA_VXLAN_LEARNING, uint8_t{0});
    m.attr(IFLA_VXLAN_PROXY, uint8_t{1});
    m.end(data);
    m.end(info);
    request(m.bytes(), "create VXLAN " + v.name);
}

// Its address given, not the lowest of its ports' (which would change as
// ports come and go).
void Rtnl::add_bridge(const std::string& name, const std::string& mac) {
    ifinfomsg h = link_header();
    Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &h, sizeof h);
    m.attr(IFLA_IFNAME, name);
    m.attr(IFLA_ADDRESS, mac_bytes(mac));
    size_t info = m.begin(IFLA_LINKINFO);
    m.attr(IFLA_INFO_KIND, std::string("bridge"));
    m.end(info);
    request(m.bytes(), "create bridge " + name);
}

// Set on its own, as `ip link set DEV mtu N` does: a bridge then keeps it
// whatever ports join.
void Rtnl::set_mtu(const std::string& name, int mtu) {
    ifinfomsg h = link_header();
    Message m(RTM_NEWLINK, 0, &h, sizeof h);
    m.attr(IFLA_IFNAME, name);
    m.attr(IFLA_MTU, static_cast<uint32_t>(mtu));
    request(m.bytes(), "set the MTU of " + name);
}

void Rtnl::set_master(const std::string& port, int master_index) {
    ifinfomsg h = link_header();
    Message m(RTM_NEWLINK, 0, &h, sizeof h);
    m.attr(IFLA_IFNAME, port);
    m.attr(IFLA_MASTER, static_cast<uint32_t>(master_index));
    request(m.bytes(), "attach " + port + " to its bridge");
}

void Rtnl::set_up(const std::string& name) {
    ifinfomsg h = link_header(0, IFF_UP, IFF_UP);
    Message m(RTM_NEWLINK, 0, &h, sizeof h);
    m.attr(IFLA_IFNAME, name);
    request(m.bytes(), "bring " + name + " up");
}

bool Rtnl::delete_link(const std::string& name) {
    ifinfomsg h = link_header();
    Message m(RTM_DELLINK, 0, &h, sizeof h);
    m.attr(IFLA_IFNAME, name);
    try {
        request(m.bytes(), "delete " + name);
    } catch (const NetlinkRefusal& e) {
        if (e.err() == ENODEV) return false;
        throw;
    }
    return true;
}

void Rtnl::add_address(int index, const std::string& ip, int prefix_len) {
    ifaddrmsg h{};
    h.ifa_family = AF_INET;
    h.ifa_prefixlen = static_cast<unsigned char>(prefix_len);
    h.ifa_index = static_cast<unsigned>(index);
    Message m(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &h, sizeof h);
    in_addr a = ipv4(ip);
    m.attr(IFA_LOCAL, a);
    m.attr(IFA_ADDRESS, a);
    request(m.bytes(), "add address " + ip + "/" + std::to_string(prefix_len));
}

void Rtnl::replace_neighbour(int index, const std::string& ip, const std::string& mac) {
    ndmsg h{};
    h.ndm_family = AF_INET;
    h.ndm_ifindex = index;
    h.ndm_state = NUD_PERMANENT;
    Message m(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, &h, sizeof h);
    m.attr(NDA_DST, ipv4(ip));
    m.attr(NDA_LLADDR, mac_bytes(mac));
    request(m.bytes(), "add neighbour " + ip + " at " + mac);
}

void Rtnl::replace_forwarding(int index, const std::string& mac, const std::string& dst) {
    ndmsg h{};
    h.ndm_family = AF_BRIDGE;
    h.ndm_ifindex = index;
    // As bridge(8) sends them: "self permanent", or "master static".
    h.ndm_state = dst.empty() ? NUD_NOARP | NUD_REACHABLE : NUD_NOARP | NUD_PERMANENT;
    h.ndm_flags = dst.empty() ? NTF_MASTER : NTF_SELF;
    Message m(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, &h, sizeof h);
    m.attr(NDA_LLADDR, mac_bytes(mac));
    if (!dst.empty()) m.attr(NDA_DST, ipv4(dst));
    request(m.bytes(), "add forwarding entry " + mac + (dst.empty() ? "" : " to " + dst));
}

void load_nft_rules(const std::string& netns, const std::string& rules) {
    InNetns in(netns);
    std::unique_ptr<nft_ctx, void (*)(nft_ctx*)> ctx(nft_ctx_new(NFT_CTX_DEFAULT), nft_ctx_free);
    if (!ctx) SVM_THROW("nftables: no context");
    nft_ctx_buffer_output(ctx.get());
    nft_ctx_buffer_error(ctx.get());
    if (nft_run_cmd_from_buffer(ctx.get(), rules.c_str()) != 0) {
        std::string why = nft_ctx_get_error_buffer(ctx.get());
        while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
        SVM_THROW("nftables refused the rules: " + why);
    }
}

}  // namespace svm
