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

// Takes the lease for ip in dir (creating dir); throws a clear error if a live
// job holds it. Returns the lease file path.
std::string take_lease(const std::string& dir, const std::string& ip, const std::string& owner);
void release_lease(const std::string& lease_file, const std::string& owner);

// Enters the network namespace /run/netns/NAME (the calling thread).
void enter_netns(const std::string& name);

}  // namespace svm
