// One writer per job for the VM record (job_record.hpp): the keeper of the
// job's head node (index 0) collects every node's entry and alone writes the
// job's AdminComment; the other nodes' keepers send theirs to it over the
// job's own segment (host side to host side, host/guest_net.hpp), sealed with
// munge (only root's credentials are taken, each once: munged refuses a
// replay). So a job makes one read and one write to slurmctld per batch of
// entries, not one read-merge-write race per node.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "json.hpp"

namespace svm {

// The entries received so far (thread-safe; pure: no I/O).
class RecordCollector {
public:
    explicit RecordCollector(const std::vector<std::string>& nodes);
    // Takes NODE's entry (a JSON object's text); its keys go over those of an
    // earlier one of that node (an error beside the ready record). Merged
    // into the AdminComment, the collected entry replaces what a requeued
    // job's earlier run left there. False (and nothing kept) for a node not
    // of the job or a value that is not an object.
    bool add(const std::string& node, const std::string& fields);
    size_t count() const;
    bool complete() const;
    // Whether entries came since the last take_pending() (and clears it).
    bool take_pending();
    void set_pending();
    // Merges every entry into root (an AdminComment object, see
    // merge_node_record); true when root changed.
    bool merge_into(json_t* root);

private:
    std::set<std::string> nodes_;
    std::map<std::string, Json> entries_;
    bool pending_ = false;
    mutable std::mutex m_;
};

struct SealedEntry {
    std::string node, fields;
};
// {"node": NODE, "fields": FIELDS} as a munge credential (`munge`).
std::string seal_entry(const std::string& node, const std::string& fields);
// The entry of a credential that munged decodes as root's; nullopt for
// anything else (invalid, expired, replayed, another uid, not an entry).
std::optional<SealedEntry> open_entry(const std::string& credential);
// The entry in `unmunge` output if its status is success and its uid 0.
std::optional<SealedEntry> entry_of_unmunge(const std::string& unmunge_output);

// Transport (TCP on the job's segment, from inside the job's namespace).
constexpr int kRelayPort = 7390;
// Sends a credential to the head's host side, retrying until timeout_ms.
bool send_entry(const std::string& head_ip, const std::string& credential, int timeout_ms,
                const std::atomic<bool>* cancel = nullptr);
// Listens on ip:kRelayPort; returns the socket (-1 and a log line on failure).
int relay_listen(const std::string& ip);
// Accepts until the socket is shut down; every credential read (at most 64
// KiB, then EOF) goes to on_credential.
void relay_serve(int listen_fd, const std::function<void(const std::string&)>& on_credential);

// Writes the collected entries into the job's AdminComment: one read and
// one write through scontrol (and a read to check, which writes again only
// if another writer changed it meanwhile). True when all are in place.
bool publish_collected(uint32_t job_id, RecordCollector& c, int attempts = 3);

// A keeper's side of it. The head (node index 0) listens on its host side of
// the segment from start() (in the job's namespace) and writes the record
// (at once when every node's entry is in, else at most every few seconds);
// the others send theirs to it. Without a segment (no guest network), or
// when the head cannot be reached, an entry is written directly
// (publish_node_record: the former read-merge-write, racy between nodes).
// The job's segment as the relay uses it, given by its caller (the keeper,
// from host/guest_net.hpp): where the head listens, and how a thread enters
// the job's network namespace.
struct RelaySegment {
    std::string head_ip;          // the head node's host side on the segment
    std::function<void()> enter;  // moves the calling thread (only) into the job's namespace; throws svm::Error
};

class RecordRelay {
public:
    // segment: nullopt without a guest network.
    RecordRelay(uint32_t job_id, std::string node, int node_index, std::vector<std::string> nodes,
                std::optional<RelaySegment> segment);
    ~RecordRelay();
    void start();  // head only; from a thread in the host's namespace
    // This node's entry; the head writes its own at once (and returns
    // after), the others' as they come.
    // `cancel` (a ready record overtaken by a failure) stops the hand-over.
    void submit(const std::string& fields, bool last, const std::atomic<bool>* cancel = nullptr);
    // Head: writes what came since the last write (the keeper is ending).
    void flush();

private:
    // What the head's threads (the listener and the writer) share with the
    // relay: each holds it, so that one still busy when the relay goes (it
    // is left: the process ends with the job) never touches the relay.
    struct Shared;
    static void writer_loop(const std::shared_ptr<Shared>& sh);
    uint32_t job_id_;
    std::string node_;
    std::optional<RelaySegment> segment_;
    int index_;
    std::vector<std::string> nodes_;
    std::shared_ptr<Shared> shared_;
    int listen_fd_ = -1;
    std::vector<std::thread> threads_;
};

}  // namespace svm
