// The VM record with one writer per job (lib/slurm/record_relay.hpp): the head's
// collection of every node's entry, munge's seal, and the hand-over over TCP.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "catch.hpp"

#include "error.hpp"
#include "job_record.hpp"
#include "proc.hpp"
#include "record_relay.hpp"

using namespace svm;

namespace {

// The head's host side on a job's segment (host/guest_net.hpp
// segment_host_side(0)); the keeper gives it to the relay (RelaySegment).
const std::string kHeadIp = "169.254.0.10";

// Moves this thread into the named network namespace (as the keeper's
// RelaySegment::enter does, through host/guest_net.hpp enter_netns); false
// when it cannot (the caller's checks then fail).
bool enter_named_netns(const std::string& name) {
    int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    int rc = ::setns(fd, CLONE_NEWNET);
    ::close(fd);
    return rc == 0;
}

std::vector<std::string> nodes_of(size_t n) {
    std::vector<std::string> v;
    for (size_t i = 0; i < n; ++i) v.push_back("n" + std::to_string(i));
    return v;
}

bool sh(const std::string& cmd) {
    RunOptions o;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    return run({"bash", "-c", cmd}, o).ok();
}

}  // namespace

TEST_CASE("1,000 nodes' entries arriving at once all end up in one record", "[record][threads]") {
    auto nodes = nodes_of(1000);
    RecordCollector c(nodes);
    std::vector<size_t> order(1000);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(7));
    // Catch's assertions are not thread-safe: the senders count refusals, checked after.
    std::atomic<size_t> refused{0};
    std::vector<std::thread> senders;
    for (size_t t = 0; t < 8; ++t)
        senders.emplace_back([&, t] {
            for (size_t k = t; k < order.size(); k += 8) {
                const std::string& n = nodes[order[k]];
                if (!c.add(n, R"({"image":"/x.qcow2","host":")" + n + R"("})")) ++refused;
            }
        });
    for (auto& s : senders) s.join();
    CHECK(refused == 0);
    CHECK(c.complete());
    CHECK_FALSE(c.add("stranger", "{}"));                                       // not a node of the job
    CHECK_FALSE(c.add("n1", "[1]"));                                            // not an object
    CHECK(c.add("n7", R"({"error":"the guest on n7 shut down or crashed"})"));  // beside its ready record
    // The site's own keys and a requeued run's stale entry: kept, replaced.
    Json root = parse_admin_comment(R"({"site":"keep","slurm_vm":{"v":1,"nodes":{"n5":{"error":"old run"}}}})");
    CHECK(c.take_pending());
    CHECK(c.merge_into(root.get()));
    CHECK_FALSE(c.merge_into(root.get()));  // nothing new: no second write
    json_t* all = json_object_get(json_object_get(root.get(), "slurm_vm"), "nodes");
    CHECK(json_object_size(all) == 1000);
    CHECK(json_string_value(json_object_get(root.get(), "site")) == std::string("keep"));
    CHECK_FALSE(json_object_get(json_object_get(all, "n5"), "error"));
    CHECK(json_string_value(json_object_get(json_object_get(all, "n999"), "host")) == std::string("n999"));
    CHECK(json_object_get(json_object_get(all, "n7"), "error"));
    CHECK(json_object_get(json_object_get(all, "n7"), "image"));
}

TEST_CASE("only root's munge credentials are entries", "[record]") {
    std::string ok =
        "STATUS:          Success (0)\nENCODE_HOST:     h (1.2.3.4)\nUID:             root (0)\n"
        "GID:             root (0)\nLENGTH:          30\n\n{\"node\":\"n2\",\"fields\":\"{}\"}";
    auto e = entry_of_unmunge(ok);
    REQUIRE(e);
    CHECK(e->node == "n2");
    CHECK(e->fields == "{}");
    std::string user = ok;
    user.replace(user.find("root (0)"), 8, "svmuser (2001)");
    CHECK_FALSE(entry_of_unmunge(user));
    std::string replayed = ok;
    replayed.replace(0, 28, "STATUS:          Replayed credential (15)");
    CHECK_FALSE(entry_of_unmunge(replayed));
    CHECK_FALSE(entry_of_unmunge("STATUS:          Success (0)\nUID:             root (0)\n\nnot json"));
}

TEST_CASE("on the kernel: a node's sealed entry reaches the head's relay once", "[record][root][threads]") {
    REQUIRE(::geteuid() == 0);
    if (!sh("echo x | munge | unmunge >/dev/null 2>&1")) {
        WARN("munged is not running here: the hand-over is not tried");
        return;
    }
    const std::string ns = "svmtu-relay";
    sh("ip netns delete " + ns + " 2>/dev/null");
    REQUIRE(sh("ip netns add " + ns + " && ip -n " + ns + " link set lo up && ip -n " + ns + " addr add " + kHeadIp +
               "/16 dev lo"));
    int fd = -1;
    std::thread([&] {
        if (enter_named_netns(ns)) fd = relay_listen(kHeadIp);
    }).join();
    REQUIRE(fd >= 0);
    RecordCollector c(nodes_of(3));
    std::vector<std::string> got;
    std::thread server([&] {
        relay_serve(fd, [&](const std::string& cred) {
            auto e = open_entry(cred);
            if (e && c.add(e->node, e->fields)) got.push_back(e->node);
        });
    });
    std::string cred = seal_entry("n2", R"({"image":"/x"})");
    bool sent = false, again = false;
    std::thread([&] {
        if (!enter_named_netns(ns)) return;
        sent = send_entry(kHeadIp, cred, 5000);
        again = send_entry(kHeadIp, cred, 1000);  // a replay: munged refuses it
    }).join();
    ::shutdown(fd, SHUT_RDWR);
    server.join();
    ::close(fd);
    sh("ip netns delete " + ns);
    CHECK(sent);
    CHECK(again);  // delivered, but not taken
    CHECK(got == std::vector<std::string>{"n2"});
    CHECK(c.count() == 1);
}

TEST_CASE("on the kernel: the head's relay goes while its threads run, which end without it",
          "[record][root][threads]") {
    REQUIRE(::geteuid() == 0);
    const std::string ns = "svmtu-relay-end";
    sh("ip netns delete " + ns + " 2>/dev/null");
    REQUIRE(sh("ip netns add " + ns + " && ip -n " + ns + " link set lo up && ip -n " + ns + " addr add " + kHeadIp +
               "/16 dev lo"));
    RelaySegment segment{kHeadIp, [ns] {
                             if (!enter_named_netns(ns)) SVM_THROW("cannot enter " + ns);
                         }};
    auto relay = std::make_unique<RecordRelay>(4243, "n0", 0, nodes_of(2), segment);
    relay->start();
    // The listener waits in accept, the writer in its pause: the relay goes
    // (the keeper ends) and leaves them. The writer wakes after its pause
    // and the listener's accept fails: both look only at what they hold
    // (the relay's memory is freed; ASan and TSan would say so).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    relay.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    // With the last of them the listening socket is closed: nothing
    // listens on the head's port any more.
    bool refused = false;
    std::thread([&] {
        if (!enter_named_netns(ns)) return;
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(kRelayPort);
        ::inet_pton(AF_INET, kHeadIp.c_str(), &sa.sin_addr);
        int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        refused = ::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno == ECONNREFUSED;
        ::close(s);
    }).join();
    sh("ip netns delete " + ns);
    CHECK(refused);
}

TEST_CASE("a job that has ended takes no more AdminComment updates: no retries", "[record]") {
    CHECK(svm::job_takes_no_updates("slurm_update error: Job has already finished"));
    CHECK(!svm::job_takes_no_updates("slurm_update error: Socket timed out on send/recv operation"));
    CHECK(!svm::job_takes_no_updates(""));
}
