#include "guest_net.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm {

GuestAddress guest_address(const std::string& prefix, uint32_t job_id, int node_index) {
    unsigned a, b, c, d, len;
    if (std::sscanf(prefix.c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &len) != 5 || a > 255 || b > 255 || len != 16)
        SVM_THROW("network prefix \"" + prefix + "\" must be an IPv4 /16 such as 10.213.0.0/16");
    if (node_index < 0 || node_index > 240) SVM_THROW("a VM job may span at most 241 nodes");
    unsigned third = job_id % 254 + 1, fourth = static_cast<unsigned>(node_index) + 10;
    GuestAddress g;
    g.ip = std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(third) + "." + std::to_string(fourth);
    char mac[32];
    std::snprintf(mac, sizeof mac, "52:54:%02x:%02x:%02x:%02x", a, b, third, fourth);
    g.mac = mac;
    g.prefix_len = 16;
    return g;
}

std::string take_lease(const std::string& dir, const std::string& ip, const std::string& owner,
                       std::string* held_by) {
    mkdir_p(dir, 0755);
    std::string f = path_join(dir, ip);
    int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == EEXIST) {
            std::string holder;
            read_file_if_exists(f, holder);
            if (trim(holder) == owner) return f;  // ours already (prolog re-run)
            if (held_by) {
                *held_by = trim(holder);
                return "";
            }
            SVM_THROW("guest address " + ip + " is still held by " + trim(holder));
        }
        SVM_THROW_ERRNO("create lease " + f);
    }
    UniqueFd g(fd);
    std::string s = owner + "\n";
    if (::write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size())) SVM_THROW_ERRNO("write lease " + f);
    ::fsync(fd);
    return f;
}

void release_lease(const std::string& lease_file, const std::string& owner) {
    std::string holder;
    if (!read_file_if_exists(lease_file, holder)) return;
    if (trim(holder) != owner) return;  // someone else's now: leave it
    remove_tree(lease_file);
}

std::string guest_tap_name(uint32_t job_id, int node_index) {
    char tap[32];
    std::snprintf(tap, sizeof tap, "svm%xn%d", job_id, node_index);  // <= 15 chars (IFNAMSIZ) for index < 1000
    return tap;
}

std::string guest_tap_pattern(uint32_t job_id) {
    char p[32];
    std::snprintf(p, sizeof p, "svm%xn*", job_id);
    return p;
}

JobFilter job_filter(const std::string& prefix, uint32_t job_id, const std::string& gateway) {
    GuestAddress first = guest_address(prefix, job_id, 0);  // validates the prefix
    std::string net16 = prefix;
    std::string job24 = first.ip.substr(0, first.ip.rfind('.')) + ".0/24";
    std::string allowed = "{ " + job24 + (gateway.empty() ? "" : ", " + gateway) + " }";
    JobFilter f;
    f.table = "svm_job_" + std::to_string(job_id);
    std::string t = "bridge " + f.table;
    // `add table` + `delete table` + full definition: re-running replaces it
    // (the prolog run again, or the job's other nodes on the same host).
    f.rules = "add table " + t + "\n"
              "delete table " + t + "\n"
              "table " + t + " {\n"
              "  chain forward {\n"
              "    type filter hook forward priority 0; policy accept;\n"
              "    iifname != \"" + guest_tap_pattern(job_id) + "\" accept\n"
              "    ether type != { ip, arp } drop\n"
              "    ether type ip ip saddr != " + job24 + " drop\n"
              "    ether type ip ip daddr " + net16 + " ip daddr != " + allowed + " drop\n"
              "    ether type arp arp saddr ip != { 0.0.0.0, " + job24 + " } drop\n"
              "    ether type arp arp daddr ip " + net16 + " arp daddr ip != " + allowed + " drop\n"
              "  }\n"
              "}\n";
    return f;
}

namespace {

RunResult nft(const std::string& netns, const std::vector<std::string>& args, const std::string& input = "") {
    std::vector<std::string> argv;
    if (!netns.empty()) argv = {"ip", "netns", "exec", netns};
    argv.push_back("nft");
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.stdin_data = input;
    o.timeout_ms = 20000;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    return run(argv, o);
}

}  // namespace

void install_job_filter(const std::string& netns, const JobFilter& f) {
    RunResult r = nft(netns, {"-f", "-"}, f.rules);
    if (!r.ok())
        SVM_THROW("cannot install the job's network filter (nft table bridge " + f.table +
                  (netns.empty() ? "" : " in netns " + netns) + "): " + trim(r.err + r.out) +
                  " (is nftables installed, with bridge filtering in the kernel?)");
}

void remove_job_filter(const std::string& netns, const std::string& table) {
    if (table.rfind("svm_job_", 0) != 0) SVM_THROW("not a job filter table: " + table);
    RunResult r = nft(netns, {"delete", "table", "bridge", table});
    if (r.ok()) return;
    // Gone already (epilog run twice, or another node of the job on this host).
    RunResult l = nft(netns, {"list", "table", "bridge", table});
    if (!l.ok()) return;
    SVM_THROW("cannot delete nft table bridge " + table + ": " + trim(r.err + r.out));
}

void enter_netns(const std::string& name) {
    std::string p = "/run/netns/" + name;
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open network namespace " + p);
    if (::setns(fd.get(), CLONE_NEWNET) != 0) SVM_THROW_ERRNO("enter network namespace " + name);
}

}  // namespace svm
