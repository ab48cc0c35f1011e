// The job network's requests to the kernel, made by this process over route
// netlink: what `ip link/addr/neigh` and `bridge fdb` would send, without
// starting them (a program's start costs more than all the requests of a
// node's part of a job).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "error.hpp"
#include "fs.hpp"

namespace svm {

// A request the kernel refused: its errno and, where the kernel says more
// (extended acknowledgement), its own sentence.
class NetlinkRefusal : public Error {
public:
    NetlinkRefusal(const std::string& what, int err, const std::string& kernel_says);
    int err() const { return err_; }

private:
    int err_;
};

struct VxlanSpec {
    std::string name;
    int mtu = 1450;
    uint32_t vni = 0;
    std::string local_ip;  // IPv4, the node's underlay address
    uint16_t port = 4789;
    // Made in the socket's namespace (its UDP socket lives there) and placed
    // in this one at once (-1: stays where it is made).
    int target_netns_fd = -1;
};

// A route netlink socket of one network namespace: the named one
// (/run/netns/NAME), or the calling thread's for "". The socket stays in
// that namespace whatever the thread does afterwards.
class Rtnl {
public:
    explicit Rtnl(const std::string& netns = "");

    int link_index(const std::string& name);  // throws when there is none
    void add_vxlan(const VxlanSpec& v);       // learning off, ARP proxy on
    void add_bridge(const std::string& name, const std::string& mac);
    void set_mtu(const std::string& name, int mtu);
    void set_master(const std::string& port, int master_index);
    void set_up(const std::string& name);
    bool delete_link(const std::string& name);  // false when there was none
    void add_address(int index, const std::string& ip, int prefix_len);
    // `ip neigh replace IP lladdr MAC dev DEV nud permanent`
    void replace_neighbour(int index, const std::string& ip, const std::string& mac);
    // `bridge fdb replace MAC dev DEV dst IP self permanent`, or with dst ""
    // `bridge fdb replace MAC dev DEV master static`
    void replace_forwarding(int index, const std::string& mac, const std::string& dst);

private:
    void request(std::vector<char>& msg, const std::string& what, std::vector<char>* reply = nullptr);
    UniqueFd fd_;
    std::vector<char> answer_;  // the kernel's replies, read into this
    uint32_t seq_ = 0;
    std::string where_;
};

// The network namespace /run/netns/NAME, opened (close-on-exec).
UniqueFd open_netns(const std::string& name);

// nftables rules (nft -f syntax) loaded into the named network namespace by
// this process (libnftables), or a sentence of why not.
void load_nft_rules(const std::string& netns, const std::string& rules);

}  // namespace svm
