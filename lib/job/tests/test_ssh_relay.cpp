// The keeper's relay of the job's SSH socket (lib/job/keeper.cpp relay_ssh):
// a user's flood of connections gets at most its bound of root's threads.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "catch.hpp"

#include "fs.hpp"
#include "keeper.hpp"
#include "support.hpp"

namespace {

using svm::UniqueFd;

// A stand-in for the guest's sshd on 127.0.0.1: each connection gets a
// banner and is held until its client closes; counts those open at once.
struct FakeSshd {
    UniqueFd listener;
    uint16_t port = 0;
    std::atomic<int> open{0}, most{0}, total{0};
    std::mutex mu;
    std::vector<std::thread> threads;
    std::thread acceptor;

    FakeSshd() {
        listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        REQUIRE(listener);
        struct sockaddr_in sa {};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
        REQUIRE(::listen(listener.get(), 128) == 0);
        socklen_t len = sizeof sa;
        REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len) == 0);
        port = ntohs(sa.sin_port);
        acceptor = std::thread([this] {
            for (;;) {
                int c = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
                if (c < 0) return;
                ++total;
                int now = ++open;
                for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
                }
                std::lock_guard<std::mutex> l(mu);
                threads.emplace_back([this, c] {
                    (void)!::write(c, "SSH-2.0-fake\n", 13);
                    char b[256];
                    while (::read(c, b, sizeof b) > 0) {
                    }
                    --open;
                    ::close(c);
                });
            }
        });
    }
    ~FakeSshd() {
        ::shutdown(listener.get(), SHUT_RDWR);
        acceptor.join();
        for (auto& t : threads) t.join();
    }
};

UniqueFd connect_to(const std::string& path) {
    UniqueFd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, path.c_str());
    REQUIRE(::connect(c.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    return c;
}

// What the client reads first: the banner, "" for a closed connection,
// "timeout" for nothing within 10 s.
std::string first_read(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return "timeout";
    char b[64];
    ssize_t n = ::read(fd, b, sizeof b);
    return n <= 0 ? "" : std::string(b, static_cast<size_t>(n));
}

}  // namespace

TEST_CASE("the job's SSH socket relays at most its bound of connections at once", "[core][threads]") {
    svm::test::TempDir t;
    FakeSshd sshd;
    std::string path = svm::path_join(t.path(), "ssh.sock");
    UniqueFd l = svm::test::listening_socket(path);
    const size_t bound = 4;
    std::thread relay(svm::relay_ssh, l.get(), "127.0.0.1", sshd.port, bound);

    // A flood of 12: the first 4 reach the guest, the 8 others are closed.
    std::vector<UniqueFd> clients;
    int banners = 0, closed = 0;
    for (int i = 0; i < 12; ++i) {
        clients.push_back(connect_to(path));
        std::string got = first_read(clients.back().get());
        if (got == "SSH-2.0-fake\n") ++banners;
        if (got.empty()) ++closed;
    }
    CHECK(banners == 4);
    CHECK(closed == 8);
    CHECK(sshd.most == 4);

    // A relayed connection that ends frees its place: once the relay's
    // thread for it has ended, a moment after the guest's side saw the close
    // (until then a new one is closed at once, and tried again here).
    clients[0] = UniqueFd();
    for (int i = 0; i < 100 && sshd.open > 3; ++i) ::usleep(20000);
    UniqueFd again;
    for (int i = 0; i < 100 && !again; ++i) {
        again = connect_to(path);
        if (first_read(again.get()) == "SSH-2.0-fake\n") break;
        again = UniqueFd();
        ::usleep(20000);
    }
    CHECK(again.get() >= 0);
    CHECK(sshd.most == 4);
    CHECK(sshd.total == 5);

    clients.clear();
    again = UniqueFd();
    ::shutdown(l.get(), SHUT_RDWR);  // the relay's loop ends
    relay.join();
    for (int i = 0; i < 250 && sshd.open > 0; ++i) ::usleep(20000);
    CHECK(sshd.open == 0);
    CHECK(svm::kMaxSshConnections >= 256);
}
