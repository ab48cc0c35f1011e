// Guest addresses: every node computes every guest's address of a job without
// talking to the others. In a /16 prefix A.B.0.0: guest of the job's i-th node
// is A.B.(job_id % 254 + 1).(i + 10); the MAC is derived from the address.
// Leases (one file per address, O_EXCL) catch the rare clash of two live jobs.
#pragma once
#include <cstdint>
#include <string>

namespace svm {

struct GuestAddress {
    std::string ip;
    std::string mac;
    int prefix_len = 16;
};

GuestAddress guest_address(const std::string& prefix, uint32_t job_id, int node_index);

// Takes the lease for ip in dir (creating dir) and returns the lease file's
// path. When another job holds it: "" with the holder in *held_by, or (no
// held_by) a clear error.
std::string take_lease(const std::string& dir, const std::string& ip, const std::string& owner,
                       std::string* held_by = nullptr);
void release_lease(const std::string& lease_file, const std::string& owner);

// The name of the tap of the job's guest on its node_index-th node ("svm<job
// hex>n<index>", at most 15 characters), and the nft pattern matching every
// tap of the job ("svm<job hex>n*").
std::string guest_tap_name(uint32_t job_id, int node_index);
std::string guest_tap_pattern(uint32_t job_id);

// Isolation between the jobs on a shared bridge: an nftables table of the
// bridge family, one per job ("svm_job_<id>"), filtering what enters the
// bridge from the job's taps (which a guest cannot forge, unlike addresses):
// IPv4 and ARP only, from the job's own /24, to the job's /24, the gateway,
// or addresses outside the guests' prefix. So a guest reaches its job's other
// guests (on this host or, through the uplink, others, whose hosts filter
// their own taps alike) and no guest of another job.
struct JobFilter {
    std::string table;  // "svm_job_<id>"
    std::string rules;  // nft -f input that (re)creates the table
};
JobFilter job_filter(const std::string& prefix, uint32_t job_id, const std::string& gateway);
// Runs `nft -f -` with the rules inside NETNS ("" = this namespace).
void install_job_filter(const std::string& netns, const JobFilter& f);
// Deletes the table; harmless when it is not there.
void remove_job_filter(const std::string& netns, const std::string& table);

// Enters the network namespace /run/netns/NAME (the calling thread).
void enter_netns(const std::string& name);

}  // namespace svm
