// srun inside the guest of a batch job. The batch script runs in the guest,
// which has no Slurm client; its `srun` is a small bash script (guest_srun_shim)
// that hands the command line to the batch step on the host over a port that
// an SSH session of the batch step forwards from the guest's loopback (ssh -R)
// to a private Unix socket of slurm-vm-exec: the batch's own session, or,
// when the script runs through the guest's agent, an `ssh -N` started when
// the first srun asks for it (a line to the agent's FIFO SLURM_VM_SRUN_WAKE,
// which the agent passes on to the host) and the guest is ready; the shim
// waits up to a minute for the port. There SrunRelay runs the real srun as
// the user, in the batch step, so that its tasks land, through the plugin, in
// the guests of their nodes like any step's.
//
// Protocol: bash's /dev/tcp, three connections per srun, each opened with one
// line:
//   "SRUN <n>\n" + n NUL-terminated fields (cwd, then the arguments):
//       answers "OK <token>\n" (or "ERR <sentence>\n"), then srun's stdout
//       until it closes;
//   "STDERR <token>\n": srun's stderr;
//   "WAIT <token>\n": "<exit status>\n" once srun ends;
//   "SIGNAL <token> <NAME>\n": forwards a signal (INT, TERM, ...) to srun.
// srun's stdin is /dev/null, as a batch script's usually is. The request is
// framed by parse_relay_request and srun's arguments are checked by
// check_guest_srun_args (lib/guest/srun_options.hpp): options that only shape
// the step; anything else is answered "ERR <sentence>".
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace svm {

// The shim's text (lib/guest/scripts/srun.bash, compiled in), installed as
// `srun` in kGuestSrunDir by the guest's seed
// (lib/guest/scripts/client.sh) on every boot.
std::string guest_srun_shim();
inline constexpr const char* kGuestSrunDir = "/usr/local/lib/slurm-vm/bin";
inline constexpr const char* kTrustedPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// What one job's guest may hold of the relay: connections open at once (an
// srun takes three: its request and stdout, its stderr, its exit status),
// the time to send a whole request, and runs kept that the guest never
// waited for.
inline constexpr size_t kMaxRelayConnections = 64;
inline constexpr long kRelayRequestTimeoutMs = 30000;
inline constexpr size_t kMaxKeptRuns = 64;

class SrunRelay {
public:
    // Listens on a new Unix socket in a private directory under tmp_dir.
    // srun: the program run for the guest; "" for the first srun in the
    // system's directories (kTrustedPath), never the job's PATH.
    explicit SrunRelay(const std::string& tmp_dir = "/tmp", const std::string& srun = "");
    ~SrunRelay();
    SrunRelay(const SrunRelay&) = delete;
    SrunRelay& operator=(const SrunRelay&) = delete;

    const std::string& socket_path() const { return socket_; }
    // Serves connections on a thread until destroyed.
    void start();

private:
    struct Run;
    // What the connections' threads work with: the srun program and the
    // runs by token. Each thread holds it, so a thread still blocked on a
    // guest that is going away when the relay goes (it is left, not waited
    // for) never touches the relay itself.
    struct Runs;
    void serve();
    std::string dir_, socket_;
    std::shared_ptr<Runs> runs_;
    int listen_fd_ = -1;
    int stop_pipe_[2] = {-1, -1};
    std::thread thread_;
    struct Worker {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    void prune_workers();
    std::vector<Worker> workers_;  // the serving thread's (the destructor's once it is joined)
};

}  // namespace svm
