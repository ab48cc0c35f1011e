// Time limits and waiting: one clock (std::chrono::steady_clock, the
// kernel's CLOCK_MONOTONIC, which no change of the wall clock moves) for
// every timeout and every duration the project measures.
#pragma once
#include <chrono>
#include <functional>

namespace svm {

using Milliseconds = std::chrono::milliseconds;

// A point in time by which something has to be done: made from how long is
// left (`Deadline(Milliseconds(30000))`), asked how much remains.
class Deadline {
public:
    using Clock = std::chrono::steady_clock;
    explicit Deadline(Milliseconds in) : at_(Clock::now() + in) {}
    explicit Deadline(Clock::time_point at) : at_(at) {}

    Clock::time_point at() const { return at_; }
    // This deadline moved `more` later (a clean-up's time after a step's).
    Deadline extended(Milliseconds more) const { return Deadline(at_ + more); }
    bool expired() const { return Clock::now() >= at_; }
    // What is left, zero once it has passed.
    Milliseconds remaining() const;
    // remaining() for poll(2)'s timeout: zero once passed, at most INT_MAX.
    int remaining_ms() const;

private:
    Clock::time_point at_;
};

// Sleeps this long, or less when a signal comes (as usleep(3) does: a loop
// that waits for a flag which a signal handler sets sees it at once).
void pause_for(Milliseconds d);

// Asks `done` until it says true (true) or the deadline has passed (false),
// pausing `interval` (or what is left of the deadline, if less) between two
// questions. `done` is asked at least once, and once more after the last
// pause: a wait that ends with the deadline still sees what happened by then.
bool poll_until(const Deadline& deadline, Milliseconds interval, const std::function<bool()>& done);

// The monotonic clock in milliseconds, for durations (log lines that say how
// long a step took); timeouts are Deadlines.
long now_ms();

}  // namespace svm
