// The host's side of the guest agent (seed_agent_script, lib/guest/seed.hpp):
// the job's first command (the batch script) without an SSH session. The
// keeper hands the agent's three serial channels to the first client of the
// job's agent socket; that client (slurm-vm-exec of the batch step, as the
// job's user) then speaks the agent's protocol over them: the command, its
// stdin, signals, the command's stdout and stderr until the agent's nonce,
// and its exit status.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fs.hpp"

namespace svm {

// Passes a stream through until `nonce` appears in it (the agent's end of
// the task's output), holding back only an end that could be the nonce's
// start (so output is passed on as it comes).
class UntilNonce {
public:
    explicit UntilNonce(std::string nonce) : nonce_(std::move(nonce)) {}
    // What may be written now; after the nonce, nothing (done()).
    std::string feed(const char* data, size_t n);
    // What was held back, when the stream ends without the nonce.
    std::string flush();
    bool done() const { return done_; }

private:
    std::string nonce_, held_;
    bool done_ = false;
};

// The first line the host sends, before the command and its stdin.
std::string agent_header(const std::string& nonce, size_t command_bytes, size_t stdin_bytes,
                         const std::string& pid_file);

// The status in an agent line "exit <status>" or "synced <status>" whose
// first word is `word`; nullopt for any other line (a status out of 0..255
// is 255).
std::optional<int> agent_status(const std::string& line, const std::string& word);

// A random nonce (32 hex digits).
std::string agent_nonce();

class GuestAgent {
public:
    // Takes the agent's channels from the keeper's socket; nullopt when they
    // are not offered to us (no agent in this guest, or already taken).
    static std::optional<GuestAgent> take(const std::string& socket_path);
    explicit GuestAgent(std::vector<UniqueFd> channels);

    // Sends the command (a shell command for the user's shell), its stdin
    // and the file where it notes its process group (signals go there).
    void start(const std::string& command, const std::string& stdin_data, const std::string& pid_file);
    // A restored guest (a requeued resumable job): takes over from the host
    // side that was there when it was saved. `running` when the agent runs
    // (or ran) the command: wait() then relays the rest of it; `idle` when
    // it still waits for one (start() it); `lost` when it does not answer
    // within timeout_ms.
    enum class Reattached { running, idle, lost };
    Reattached reattach(int timeout_ms);
    // Relays until the command has ended: its stdout and stderr to out_fd and
    // err_fd, each signal number read from signal_fd into the guest; calls
    // `tick` about every 200 ms. Returns its exit status, or nullopt when the
    // guest was lost (its channels closed) or `carry` said to let go of the
    // command (detached()). `carry` (when given) decides for each signal
    // whether it goes into the guest; false: the relay ends, the command
    // goes on in the guest (a requeued resumable job's, saved with it).
    std::optional<int> wait(int signal_fd, int out_fd, int err_fd, const std::function<void()>& tick,
                            const std::function<bool(int)>& carry = {});
    bool detached() const { return detached_; }
    // The three channels (tests share them with another host side).
    std::vector<int> channel_fds() const { return {ctl_.get(), out_.get(), err_.get()}; }
    // Syncs the guest's file systems (--vm-save): its status, or nullopt when
    // the agent did not answer within timeout_ms.
    std::optional<int> sync(int timeout_ms);
    // Whether the command's srun asked for its relay (the agent's line
    // "srun"); `tick` is called at once when it does.
    bool srun_asked() const { return srun_asked_; }

private:
    bool read_ctl_line(std::string& line, int timeout_ms);
    void note_ctl_line(const std::string& line, const std::function<void()>& tick);
    // Each signal read from signal_fd into the guest; false when the relay
    // ends (the channel is lost, or `carry` let go of the command).
    bool relay_signals(int signal_fd, const std::function<bool(int)>& carry);
    UniqueFd ctl_, out_, err_;
    std::string nonce_, ctl_buf_;
    bool srun_asked_ = false;
    bool detached_ = false;
    std::optional<int> status_;  // the command's, once the agent said it
};

}  // namespace svm
