#include "record_relay.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "job_record.hpp"
#include "log.hpp"
#include "proc.hpp"

namespace svm {

RecordCollector::RecordCollector(const std::vector<std::string>& nodes) : nodes_(nodes.begin(), nodes.end()) {}

bool RecordCollector::add(const std::string& node, const std::string& fields) {
    json_error_t err;
    Json j(json_loads(fields.c_str(), 0, &err));
    std::lock_guard<std::mutex> l(m_);
    if (!nodes_.count(node) || !j || !json_is_object(j.get())) return false;
    auto it = entries_.find(node);
    if (it == entries_.end()) {
        entries_.emplace(node, std::move(j));
    } else {
        // A failure after the ready record: the error goes beside it.
        const char* key;
        json_t* val;
        json_object_foreach(j.get(), key, val) json_object_set(it->second.get(), key, val);
    }
    pending_ = true;
    return true;
}

size_t RecordCollector::count() const {
    std::lock_guard<std::mutex> l(m_);
    return entries_.size();
}

bool RecordCollector::complete() const {
    std::lock_guard<std::mutex> l(m_);
    return entries_.size() == nodes_.size();
}

bool RecordCollector::take_pending() {
    std::lock_guard<std::mutex> l(m_);
    bool was = pending_;
    pending_ = false;
    return was;
}

void RecordCollector::set_pending() {
    std::lock_guard<std::mutex> l(m_);
    pending_ = true;
}

bool RecordCollector::merge_into(json_t* root) {
    std::lock_guard<std::mutex> l(m_);
    bool changed = false;
    for (const auto& [node, fields] : entries_) changed |= merge_node_record(root, node, fields.get(), true);
    return changed;
}

namespace {

RunOptions munge_options(const std::string& input) {
    RunOptions o;
    o.stdin_data = input;
    o.timeout_ms = 20000;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    return o;
}

}  // namespace

std::string seal_entry(const std::string& node, const std::string& fields) {
    Json o(json_object());
    json_object_set_new(o.get(), "node", json_string(node.c_str()));
    json_object_set_new(o.get(), "fields", json_string(fields.c_str()));
    RunResult r = run({"munge"}, munge_options(json_dump(o.get())));
    if (!r.ok()) SVM_THROW("munge could not seal this node's VM record: " + trim(r.err + r.out));
    return trim(r.out);
}

std::optional<SealedEntry> entry_of_unmunge(const std::string& out) {
    size_t body = out.find("\n\n");
    if (out.rfind("STATUS:", 0) != 0 || out.find("Success (0)") > out.find('\n') || body == std::string::npos)
        return std::nullopt;
    size_t uid = out.find("\nUID:");
    if (uid == std::string::npos || uid > body) return std::nullopt;
    std::string line = out.substr(uid + 1, out.find('\n', uid + 1) - uid - 1);
    if (line.size() < 4 || line.substr(line.size() - 4) != " (0)") return std::nullopt;
    json_error_t err;
    Json j(json_loads(out.substr(body + 2).c_str(), 0, &err));
    if (!j || !json_is_object(j.get())) return std::nullopt;
    // Strings, else nothing (json_get_string would throw out of the relay's thread).
    json_t *node = json_object_get(j.get(), "node"), *fields = json_object_get(j.get(), "fields");
    if (!json_is_string(node) || !json_is_string(fields)) return std::nullopt;
    return SealedEntry{json_string_value(node), json_string_value(fields)};
}

std::optional<SealedEntry> open_entry(const std::string& credential) {
    RunResult r = run({"unmunge"}, munge_options(credential));
    if (!r.ok()) {
        log::warn("a VM record entry was refused: " + trim(r.err + r.out).substr(0, 200));
        return std::nullopt;
    }
    return entry_of_unmunge(r.out);
}

namespace {

sockaddr_in address_of(const std::string& ip) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(kRelayPort);
    ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
    return sa;
}

bool write_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

// One hand-over: true once the head acknowledged the credential.
bool hand_over(const sockaddr_in& sa, const std::string& credential) {
    UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s || ::connect(s.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 ||
        !write_all(s.get(), credential))
        return false;
    ::shutdown(s.get(), SHUT_WR);
    char ack[8];
    return ::recv(s.get(), ack, sizeof ack, 0) > 0;  // the head took it
}

}  // namespace

bool send_entry(const std::string& head_ip, const std::string& credential, int timeout_ms,
                const std::atomic<bool>* cancel) {
    const sockaddr_in sa = address_of(head_ip);
    bool sent = false;
    poll_until(Deadline(Milliseconds(timeout_ms)), Milliseconds(500), [&] {
        sent = hand_over(sa, credential);
        return sent || (cancel && *cancel);
    });
    return sent;
}

int relay_listen(const std::string& ip) {
    sockaddr_in sa = address_of(ip);
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(s, 128) != 0) {
        log::warn("the VM record relay cannot listen on " + ip + ":" + std::to_string(kRelayPort) + ": " +
                  std::string(strerror(errno)));
        if (s >= 0) ::close(s);
        return -1;
    }
    return s;
}

void relay_serve(int listen_fd, const std::function<void(const std::string&)>& on_credential) {
    for (;;) {
        int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return;
        }
        UniqueFd conn(c);
        struct timeval tv {
            5, 0
        };
        ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::string cred;
        char buf[4096];
        ssize_t n = -1;
        while (cred.size() < 65536 && (n = ::recv(c, buf, sizeof buf, 0)) > 0) cred.append(buf, static_cast<size_t>(n));
        if (n == 0 && !cred.empty()) {
            on_credential(cred);
            write_all(c, "ok\n");
        }
    }
}

bool publish_collected(uint32_t job_id, RecordCollector& c, int attempts) {
    PublishOptions o;
    o.attempts = attempts;
    o.settled = 0;  // in place at the first read: nothing to write
    o.pause_min_ms = o.pause_max_ms = 0;
    auto r = update_admin_comment(
        job_id, [&](json_t* root) { c.merge_into(root); }, o,
        [&] { return ": " + std::to_string(c.count()) + " node(s)"; });
    return r != CommentUpdate::failed;  // a finished job: nothing more to do for it
}

struct RecordRelay::Shared {
    Shared(uint32_t job, const std::string& own_node, const std::vector<std::string>& nodes)
        : job_id(job), node(own_node), collector(nodes) {}
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;
    ~Shared() {
        if (listen_fd >= 0) ::close(listen_fd);
    }
    const uint32_t job_id;
    const std::string node;
    RecordCollector collector;
    std::mutex write_m;  // one AdminComment update at a time
    std::atomic<bool> stop{false};
    int listen_fd = -1;  // set before the threads start; closed with the last of them
};

RecordRelay::RecordRelay(uint32_t job_id, std::string node, int node_index, std::vector<std::string> nodes,
                         std::optional<RelaySegment> segment)
    : job_id_(job_id),
      node_(std::move(node)),
      segment_(std::move(segment)),
      index_(node_index),
      nodes_(std::move(nodes)),
      shared_(std::make_shared<Shared>(job_id_, node_, nodes_)) {}

RecordRelay::~RecordRelay() {
    shared_->stop = true;
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);  // the listener's accept returns
    for (auto& t : threads_) t.detach();                     // the process ends with the job; they hold shared_
}

void RecordRelay::start() {
    if (index_ != 0 || !segment_ || !threads_.empty()) return;
    std::thread([this] {
        try {
            segment_->enter();  // this thread only
            listen_fd_ = relay_listen(segment_->head_ip);
        } catch (const Error& e) {
            log::warn("the VM record relay cannot start: " + e.chain());
        }
    }).join();
    if (listen_fd_ < 0) return;
    shared_->listen_fd = listen_fd_;
    threads_.emplace_back([sh = shared_] {
        relay_serve(sh->listen_fd, [&sh](const std::string& cred) {
            auto e = open_entry(cred);
            if (!e || e->node == sh->node || !sh->collector.add(e->node, e->fields))
                log::warn("a VM record entry that is not one of the job's other nodes was dropped");
        });
    });
    threads_.emplace_back([sh = shared_] { writer_loop(sh); });
}

// Writes when every node's entry is in, else at most every 5 s.
void RecordRelay::writer_loop(const std::shared_ptr<Shared>& sh) {
    long last = 0;
    for (long t = 0; !sh->stop; ++t) {
        pause_for(Milliseconds(250));
        if ((!sh->collector.complete() && t - last < 20) || !sh->collector.take_pending()) continue;
        std::lock_guard<std::mutex> l(sh->write_m);
        if (!publish_collected(sh->job_id, sh->collector)) sh->collector.set_pending();
        last = t;
    }
}

void RecordRelay::flush() {
    if (index_ != 0 || listen_fd_ < 0) return;
    std::lock_guard<std::mutex> l(shared_->write_m);
    if (shared_->collector.take_pending()) publish_collected(job_id_, shared_->collector);
}

void RecordRelay::submit(const std::string& fields, bool last, const std::atomic<bool>* cancel) {
    if (index_ == 0 && listen_fd_ >= 0) {
        // The head's own entry is written at once: the job's batch step
        // waits for it at its end (Slurm takes no AdminComment of a finished
        // job); the others' entries are batched by writer_loop.
        RecordCollector& c = shared_->collector;
        c.add(node_, fields);
        std::lock_guard<std::mutex> l(shared_->write_m);
        c.take_pending();
        if (!publish_collected(job_id_, c)) c.set_pending();  // writer_loop tries again
        return;
    }
    bool sent = false;
    if (index_ > 0 && segment_) {
        std::thread([&] {
            try {
                std::string cred = seal_entry(node_, fields);
                segment_->enter();  // this thread only
                sent = send_entry(segment_->head_ip, cred, last ? 20000 : 300000, cancel);
            } catch (const Error& e) {
                log::warn("the VM record entry was not handed over: " + e.chain());
            }
        }).join();
        if (cancel && *cancel) return;
        if (sent) log::info("VM record entry handed to the job's head node " + nodes_.front());
    }
    if (!sent) {
        if (segment_) log::warn("the job's head node took no VM record entry: writing it directly");
        PublishOptions po = last ? PublishOptions::for_error() : PublishOptions();
        po.replace = true;
        publish_node_record(job_id_, node_, fields, po);
    }
}

}  // namespace svm
