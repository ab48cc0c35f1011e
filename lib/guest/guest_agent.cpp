#include "guest_agent.hpp"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "deadline.hpp"
#include "error.hpp"
#include "guest_signals.hpp"
#include "proc.hpp"

namespace svm {

namespace {

constexpr size_t kMaxCtlLine = 4096;
// How long the task's output may still come once the agent said the task
// ended (the nonces follow at once; a guest that never sends them is cut).
constexpr int kDrainMs = 5000;

}  // namespace

std::string UntilNonce::feed(const char* data, size_t n) {
    if (done_) return "";
    held_.append(data, n);
    size_t at = held_.find(nonce_);
    if (at != std::string::npos) {
        std::string out = held_.substr(0, at);
        held_.clear();
        done_ = true;
        return out;
    }
    // Held back: the longest end of what came that could start the nonce
    // (with a random nonce, rarely more than a byte or two).
    size_t keep = std::min(held_.size(), nonce_.size() - 1);
    while (keep > 0 && held_.compare(held_.size() - keep, keep, nonce_, 0, keep) != 0) --keep;
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string UntilNonce::flush() {
    std::string out;
    out.swap(held_);
    return out;
}

std::string agent_header(const std::string& nonce, size_t command_bytes, size_t stdin_bytes,
                         const std::string& pid_file) {
    return "SVM-AGENT-1 " + nonce + " " + std::to_string(command_bytes) + " " + std::to_string(stdin_bytes) + " " +
           pid_file + "\n";
}

std::optional<int> agent_status(const std::string& line, const std::string& word) {
    if (line.size() <= word.size() + 1 || line.compare(0, word.size() + 1, word + " ") != 0) return std::nullopt;
    std::string n = line.substr(word.size() + 1);
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    int v = std::stoi(n);
    return v <= 255 ? v : 255;
}

std::string agent_nonce() {
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = ::getrandom(b + got, sizeof b - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) SVM_THROW_ERRNO("getrandom");
        got += static_cast<size_t>(n);
    }
    std::string s;
    char h[3];
    for (unsigned char c : b) {
        std::snprintf(h, sizeof h, "%02x", c);
        s += h;
    }
    return s;
}

std::optional<GuestAgent> GuestAgent::take(const std::string& socket_path) {
    UniqueFd s(connect_unix(socket_path));
    if (!s) return std::nullopt;
    struct timeval tv = {10, 0};  // the keeper answers at once
    ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::vector<UniqueFd> fds;
    try {
        if (receive_with_fds(s.get(), fds, 16, 3, "take the guest agent's channels") != "1" || fds.size() != 3)
            return std::nullopt;
    } catch (const Error&) {
        return std::nullopt;
    }
    return GuestAgent(std::move(fds));
}

GuestAgent::GuestAgent(std::vector<UniqueFd> channels) {
    if (channels.size() != 3) SVM_THROW("the guest agent needs 3 channels, not " + std::to_string(channels.size()));
    ctl_ = std::move(channels[0]);
    out_ = std::move(channels[1]);
    err_ = std::move(channels[2]);
}

void GuestAgent::start(const std::string& command, const std::string& stdin_data, const std::string& pid_file) {
    nonce_ = agent_nonce();
    if (!write_fully(ctl_.get(),
                     agent_header(nonce_, command.size(), stdin_data.size(), pid_file) + command + stdin_data))
        SVM_THROW_ERRNO("send the command to the guest's agent");
}

GuestAgent::Reattached GuestAgent::reattach(int timeout_ms) {
    if (!write_fully(ctl_.get(), "reattach\n")) return Reattached::lost;
    const Deadline deadline{Milliseconds(timeout_ms)};
    std::string line;
    while (read_ctl_line(line, deadline.remaining_ms())) {
        if (line == "idle") return Reattached::idle;
        if (line.rfind("nonce ", 0) == 0) {
            std::string n = line.substr(6);
            if (n.size() != 32 || n.find_first_not_of("0123456789abcdef") != std::string::npos) return Reattached::lost;
            nonce_ = n;
            // Lines the agent sent after: the rest of the relay's.
            for (size_t nl; (nl = ctl_buf_.find('\n')) != std::string::npos;) {
                std::string more = ctl_buf_.substr(0, nl);
                ctl_buf_.erase(0, nl + 1);
                note_ctl_line(more, {});
            }
            return Reattached::running;
        }
        note_ctl_line(line, {});  // "exit", "srun": sent before it read ours
    }
    return Reattached::lost;
}

void GuestAgent::note_ctl_line(const std::string& line, const std::function<void()>& tick) {
    std::optional<int> st = agent_status(line, "exit");
    if (st && !status_) {
        status_ = st;
    } else if (line == "srun" && !srun_asked_) {
        srun_asked_ = true;
        if (tick) tick();
    }
}

std::optional<int> GuestAgent::wait(int signal_fd, int out_fd, int err_fd, const std::function<void()>& tick,
                                    const std::function<bool(int)>& carry) {
    UntilNonce streams[2] = {UntilNonce(nonce_), UntilNonce(nonce_)};
    const int dst[2] = {out_fd, err_fd};
    bool ended[2] = {false, false};  // the channel closed (the guest is gone)
    std::optional<int>& status = status_;
    std::optional<Deadline> drained_by;  // set with status
    if (status) drained_by = Deadline(Milliseconds(kDrainMs));
    Deadline next_tick{Milliseconds(200)};
    char buf[65536];
    auto finish = [&](std::optional<int> st) {
        for (int i = 0; i < 2; ++i) write_fully(dst[i], streams[i].flush());
        return st;
    };
    for (;;) {
        bool drained = (streams[0].done() || ended[0]) && (streams[1].done() || ended[1]);
        if (status && (drained || drained_by->expired())) return finish(status);
        struct pollfd p[4] = {{ctl_.get(), POLLIN, 0},
                              {out_.get(), static_cast<short>(streams[0].done() || ended[0] ? 0 : POLLIN), 0},
                              {err_.get(), static_cast<short>(streams[1].done() || ended[1] ? 0 : POLLIN), 0},
                              {signal_fd, POLLIN, 0}};
        int rc = ::poll(p, signal_fd >= 0 ? 4 : 3, 200);
        if (rc < 0 && errno != EINTR) return finish(std::nullopt);
        if (next_tick.expired()) {
            if (tick) tick();
            next_tick = Deadline(Milliseconds(200));
        }
        if (rc <= 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (!(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = ::read(p[i + 1].fd, buf, sizeof buf);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) ended[i] = true;
            else write_fully(dst[i], streams[i].feed(buf, static_cast<size_t>(n)));
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = ::read(ctl_.get(), buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return finish(status);
            if (n > 0) ctl_buf_.append(buf, static_cast<size_t>(n));
            for (size_t nl; (nl = ctl_buf_.find('\n')) != std::string::npos;) {
                std::string line = ctl_buf_.substr(0, nl);
                ctl_buf_.erase(0, nl + 1);
                bool had = status.has_value();
                note_ctl_line(line, tick);
                if (status && !had) drained_by = Deadline(Milliseconds(kDrainMs));
            }
            if (ctl_buf_.size() > kMaxCtlLine) ctl_buf_.clear();
        }
        if (signal_fd >= 0 && (p[3].revents & POLLIN) && !relay_signals(signal_fd, carry)) return finish(std::nullopt);
    }
}

bool GuestAgent::relay_signals(int signal_fd, const std::function<bool(int)>& carry) {
    unsigned char b;
    while (::read(signal_fd, &b, 1) == 1) {
        std::string name = forwarded_signal_name(b);
        if (name.empty() || status_) continue;
        if (carry && !carry(b)) {
            detached_ = true;
            return false;
        }
        if (!write_fully(ctl_.get(), "signal " + name + "\n")) return false;
    }
    return true;
}

bool GuestAgent::read_ctl_line(std::string& line, int timeout_ms) {
    const Deadline deadline{Milliseconds(timeout_ms)};
    char buf[512];
    for (;;) {
        if (size_t nl = ctl_buf_.find('\n'); nl != std::string::npos) {
            line = ctl_buf_.substr(0, nl);
            ctl_buf_.erase(0, nl + 1);
            return true;
        }
        if (ctl_buf_.size() > kMaxCtlLine) ctl_buf_.clear();
        if (deadline.expired()) return false;
        struct pollfd p = {ctl_.get(), POLLIN, 0};
        int rc = ::poll(&p, 1, deadline.remaining_ms());
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) return false;
        ssize_t n = ::read(ctl_.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        ctl_buf_.append(buf, static_cast<size_t>(n));
    }
}

std::optional<int> GuestAgent::sync(int timeout_ms) {
    if (!write_fully(ctl_.get(), "sync\n")) return std::nullopt;
    const Deadline deadline{Milliseconds(timeout_ms)};
    std::string line;
    while (read_ctl_line(line, deadline.remaining_ms()))
        if (std::optional<int> st = agent_status(line, "synced")) return st;
    return std::nullopt;
}

}  // namespace svm
