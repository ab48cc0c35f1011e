// What the guest may ask of the host: the srun relay's request framing and
// the srun options a guest may use. Both are pure functions of the guest's
// bytes, bounded, so that they can be tested and fuzzed without a host.
//
// Principle: nothing a guest sends makes the host run anything but a job
// step whose tasks run in the job's guests. The host's srun therefore gets
// only options that shape the step (counts, node lists, binding, labels,
// time, name); every option that makes srun or slurmstepd run, open or copy
// something on the host (--prolog, --epilog, --task-prolog, --task-epilog,
// --bcast, --output/--error/--input, --export, --chdir, --container,
// --multi-prog, --jobid, --vm-*, ...) and every option not on the list is
// refused, as are the environment twins srun would read from the batch
// step's environment (srun_env_refused).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace svm {

// One request as the guest's shim frames it (lib/guest/srun_relay.hpp):
// a line "VERB ARG\n", for SRUN followed by n NUL-terminated fields.
struct RelayRequest {
    enum class Status { incomplete, complete, bad };
    Status status = Status::incomplete;
    std::string verb;                 // SRUN, STDERR, WAIT, SIGNAL
    std::string token;                // STDERR, WAIT, SIGNAL
    std::string signal;               // SIGNAL
    std::vector<std::string> fields;  // SRUN: cwd, then srun's arguments
    std::string error;                // bad: why
};
inline constexpr size_t kRelayMaxLine = 512;
inline constexpr size_t kRelayMaxFields = 100000;
inline constexpr size_t kRelayMaxRequest = 8u << 20;

// Parses the bytes received so far: incomplete while more may come (and the
// bounds hold), bad as soon as they cannot become a valid request.
RelayRequest parse_relay_request(std::string_view bytes);

// The same framing for bytes that come in pieces (a socket's reads), in work
// linear in their number: each piece is scanned once for the line's end and
// the SRUN fields' NULs, and parse_relay_request looks at the whole once,
// when a request can be complete or the bounds are broken. feed() answers
// what parse_relay_request would of all the bytes so far; feed no more once
// it answered complete or bad.
class RelayRequestReader {
public:
    RelayRequest feed(std::string_view piece);
    // Bytes looked at so far, parse_relay_request's counted in full: the
    // tests' measure of the work.
    size_t scanned() const { return scanned_; }

private:
    RelayRequest parse();
    std::string buf_;
    bool have_line_ = false;
    size_t fields_ = 0;  // SRUN: the fields the line announced
    size_t nuls_ = 0;    // NULs after the line so far
    size_t scanned_ = 0;
};

// The srun arguments a guest sent, checked against the allow-list: "" when
// every option is allowed, else one sentence for the guest's srun. Options
// end at "--" or the first argument that is not an option (srun's own rule);
// what follows is the command, which runs in the guests.
std::string check_guest_srun_args(const std::vector<std::string>& args);

// The variables of the batch step's environment that the host's srun must
// not see: twins of refused options (SLURM_TASK_PROLOG, SLURM_PROLOG, ...),
// SPANK option twins, the plugin's own SLURM_VM_*, and host_unsafe_variable.
bool srun_env_refused(const std::string& name);

// Variables that make a program on the host load or run the user's code
// (dynamic loader, glibc, shell start-up files and functions, ssh's askpass):
// the plugin removes them from the host side of a VM job's tasks.
bool host_unsafe_variable(const std::string& name);

}  // namespace svm
