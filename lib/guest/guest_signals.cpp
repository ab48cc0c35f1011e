#include "guest_signals.hpp"

#include <csignal>
#include <utility>

namespace svm {

namespace {
const std::vector<std::pair<int, const char*>> kForwarded = {{SIGTERM, "TERM"}, {SIGINT, "INT"},   {SIGHUP, "HUP"},
                                                             {SIGQUIT, "QUIT"}, {SIGUSR1, "USR1"}, {SIGUSR2, "USR2"}};
}  // namespace

const std::vector<int>& forwarded_signals() {
    static const std::vector<int> sigs = [] {
        std::vector<int> v;
        for (const auto& [sig, name] : kForwarded) v.push_back(sig);
        return v;
    }();
    return sigs;
}

std::string forwarded_signal_name(int sig) {
    for (const auto& [s, name] : kForwarded)
        if (s == sig) return name;
    return "";
}

int forwarded_signal_number(const std::string& name) {
    for (const auto& [s, n] : kForwarded)
        if (name == n) return s;
    return 0;
}

}  // namespace svm
