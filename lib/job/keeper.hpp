// The keeper: one root process per VM job and node, living inside the job's
// cgroups (it joins the extern step's), that starts the guest through
// libvirt's embedded driver, relays SSH connections from the job's Unix
// socket to the guest, reports the guest's state, and dies with the job.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>

#include "config.hpp"
#include "domain_xml.hpp"
#include "job_plan.hpp"
#include "sysfs.hpp"

namespace svm {

struct KeeperOptions {
    std::string config_path;
    std::string node;
    uint32_t job_id = 0;
    pid_t join_cgroup_of = 0;  // a process of the job's extern step
    // Called once the plan is read, in the host's network namespace, before
    // anything else (the VM record's relay starts there).
    std::function<void(const JobPlan&)> on_start;
    // Called once the guest is ready with this node's record (JSON): what the
    // VM was, for Slurm accounting (the caller publishes it), in a thread of
    // its own; `cancelled` turns true when a failure is to be published
    // instead (which waits for this to return).
    std::function<void(const JobPlan&, const std::string& record, const std::atomic<bool>& cancelled)> on_ready;
    // Called when the guest could not run or died, with the one-sentence
    // reason the job fails with (the caller publishes it), in the host's
    // network namespace, before run_keeper returns.
    std::function<void(const JobPlan&, const std::string& reason)> on_failure;
};

// This node's accounting record of the job's VM (compact JSON object).
std::string vm_record(const JobPlan& p, long create_ms, long ready_ms, int vcpus, int64_t memory_mib,
                      int64_t hugepage_kib = 0);

// Sizes the guest from the job's cgroups (CPUs one-to-one, memory minus the
// overhead) and builds its domain description. Throws a one-sentence error
// when the job's memory is too small.
DomainSpec guest_domain(const JobPlan& p, const std::vector<int>& cpus, std::optional<int64_t> mem_limit_bytes);

// Backs the guest's memory as the plan's hugepage policy and the node allow
// (hugepages.hpp): sets d.hugepage_kib and rounds d.memory_mib down to whole
// hugepages, or leaves normal pages. Returns one line for the log and
// guest.json; throws one sentence naming the node and what it lacks when the
// policy is "required" and the node cannot.
std::string back_guest_memory(DomainSpec& d, const JobPlan& p, const SysfsRoot& root);

// The most connections the job's SSH socket relays at once (each a thread of
// the keeper, root's though charged to the job's cgroup): one per task of a
// step or per ssh of the user's; past it a client is closed at once.
constexpr size_t kMaxSshConnections = 512;
// Accepts on the job's SSH socket (listen_fd) and relays each client to
// ip:port (the guest's sshd) in a thread of its own, at most
// max_connections at once; returns when accept fails (the socket closed).
void relay_ssh(int listen_fd, const std::string& ip, uint16_t port, size_t max_connections);

// Runs the keeper until the guest stops or SIGTERM; returns the exit status.
// Cuts the console log at path to its last 64 KiB (under a line saying so)
// when it is larger than max_bytes; QEMU appends, so it goes on at the new end.
// True when it was cut.
bool cap_console(const std::string& path, int64_t max_bytes);

int run_keeper(const KeeperOptions& o);

// The image's digest, once per job: the head node's keeper (node index 0)
// starts `slurm-vm-keeper --image-digest FD SIZE` as the job's user, in the
// job's cgroup, on the descriptor it checked again (digest_as_user,
// image_check.hpp), at most kDigestTimeoutMs; the node keeps the digest of
// each version in <state_dir>/digests. The head's entry of the VM record
// carries it (a second write when the guest is ready first); the other
// nodes read nothing for it.
constexpr int kDigestTimeoutMs = 600000;
// That program's side (as the user): prints image_digest(FD, SIZE); 0 or 1.
// It makes itself non-dumpable first, so the user cannot ptrace it.
int image_digest_main(const char* fd_arg, const char* size_arg);

}  // namespace svm
