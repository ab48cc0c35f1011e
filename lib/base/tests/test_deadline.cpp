// Deadlines and waiting (lib/base/deadline.hpp): what remains, when it has
// passed, and poll_until's questions and pauses.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <thread>
#include <vector>

#include "catch.hpp"

#include "deadline.hpp"

using namespace svm;

namespace {
long since(long t0) { return now_ms() - t0; }
}  // namespace

TEST_CASE("a deadline says what remains and when it has passed", "[deadline]") {
    const Deadline d{Milliseconds(1000)};
    CHECK_FALSE(d.expired());
    CHECK(d.remaining() > Milliseconds(900));
    CHECK(d.remaining() <= Milliseconds(1000));
    CHECK(d.remaining_ms() > 900);
    CHECK(d.extended(Milliseconds(500)).remaining() > Milliseconds(1400));
    CHECK(d.extended(Milliseconds(500)).at() == d.at() + Milliseconds(500));

    const Deadline passed{Milliseconds(-5)};
    CHECK(passed.expired());
    CHECK(passed.remaining() == Milliseconds(0));  // never negative: a poll(2) timeout of 0
    CHECK(passed.remaining_ms() == 0);
    CHECK(Deadline(Milliseconds(0)).expired());

    // A deadline past what poll(2) takes: its timeout is clamped, not wrapped.
    CHECK(Deadline(Milliseconds(10'000'000'000LL)).remaining_ms() == INT_MAX);
}

TEST_CASE("poll_until asks until the answer is yes, pausing the interval between", "[deadline]") {
    int asked = 0;
    long t0 = now_ms();
    CHECK(poll_until(Deadline(Milliseconds(5000)), Milliseconds(20), [&] { return ++asked == 4; }));
    CHECK(asked == 4);
    long took = since(t0);
    CHECK(took >= 60);   // three pauses of 20 ms
    CHECK(took < 4000);  // and not the deadline

    asked = 0;
    CHECK(poll_until(Deadline(Milliseconds(0)), Milliseconds(1000), [&] { return ++asked > 0; }));
    CHECK(asked == 1);  // asked at least once, even past the deadline
}

TEST_CASE("poll_until gives up at the deadline, having asked once more at its end", "[deadline]") {
    std::vector<long> at;
    long t0 = now_ms();
    CHECK_FALSE(poll_until(Deadline(Milliseconds(250)), Milliseconds(100), [&] {
        at.push_back(since(t0));
        return false;
    }));
    long took = since(t0);
    CHECK(took >= 250);
    CHECK(took < 3000);  // generous: a loaded machine's pauses run late
    // At 0, 100, 200, then at the deadline (the last pause cut to what was
    // left): four questions, fewer only when pauses ran late.
    REQUIRE(at.size() >= 2);
    CHECK(at.size() <= 4);
    CHECK(at.back() >= 250);
    CHECK(at[at.size() - 2] < 250);
}

TEST_CASE("poll_until sees what another thread did by then", "[deadline][threads]") {
    std::atomic<bool> done{false};
    std::thread t([&] {
        pause_for(Milliseconds(50));
        done = true;
    });
    CHECK(poll_until(Deadline(Milliseconds(5000)), Milliseconds(5), [&] { return done.load(); }));
    t.join();
}

TEST_CASE("pause_for sleeps as long as asked, and nothing for nothing", "[deadline]") {
    long t0 = now_ms();
    pause_for(Milliseconds(0));
    pause_for(Milliseconds(-10));
    CHECK(since(t0) < 20);
    t0 = now_ms();
    pause_for(Milliseconds(30));
    CHECK(since(t0) >= 30);
}

TEST_CASE("pause_for ends early when a signal comes, as usleep does", "[deadline]") {
    struct sigaction sa {
    }, old{};
    sa.sa_handler = [](int) {};
    REQUIRE(::sigaction(SIGUSR1, &sa, &old) == 0);  // no SA_RESTART
    pthread_t self = ::pthread_self();
    std::thread t([self] {
        pause_for(Milliseconds(50));
        ::pthread_kill(self, SIGUSR1);
    });
    long t0 = now_ms();
    pause_for(Milliseconds(5000));
    long took = since(t0);
    t.join();
    ::sigaction(SIGUSR1, &old, nullptr);
    CHECK(took < 2000);
}
