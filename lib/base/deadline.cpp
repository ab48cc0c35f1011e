#include "deadline.hpp"

#include <algorithm>
#include <climits>
#include <ctime>

namespace svm {

Milliseconds Deadline::remaining() const {
    auto left = std::chrono::ceil<Milliseconds>(at_ - Clock::now());
    return std::max(left, Milliseconds(0));
}

int Deadline::remaining_ms() const {
    return static_cast<int>(std::min<Milliseconds::rep>(remaining().count(), INT_MAX));
}

void pause_for(Milliseconds d) {
    if (d.count() <= 0) return;
    struct timespec ts {};
    ts.tv_sec = static_cast<time_t>(d.count() / 1000);
    ts.tv_nsec = static_cast<long>(d.count() % 1000) * 1000000L;
    ::nanosleep(&ts, nullptr);
}

bool poll_until(const Deadline& deadline, Milliseconds interval, const std::function<bool()>& done) {
    for (;;) {
        if (done()) return true;
        if (deadline.expired()) return false;
        pause_for(std::min(interval, deadline.remaining()));
    }
}

long now_ms() {
    return static_cast<long>(
        std::chrono::duration_cast<Milliseconds>(Deadline::Clock::now().time_since_epoch()).count());
}

}  // namespace svm
