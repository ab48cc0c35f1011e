// `srun --mpi=pmix` in a VM job: the ranks run in the guests and wire up
// through the step's PMIx server, which Slurm's mpi/pmix plugin runs in the
// host's slurmstepd, listening on the host's loopback (TCP).
//
// What the guest's PMIx client is given:
// - the server's address unchanged (PMIX_SERVER_URI*: tcp4://127.0.0.1:PORT):
//   the guest's loopback port PORT leads to the host's, through one SSH
//   session per node and step (its remote forward), started by the step's
//   first task on the node and ended by Slurm with the step;
// - PMIX_SECURITY_MODE=native: the client presents its uid, which is the
//   job's user's in the guest, as the server expects. munge is never offered:
//   the site's munge key never enters a guest;
// - PMIX_GDS_MODULE=hash: the job's data comes over the connection; the
//   server's shared-memory stores are the host's, which a guest cannot map.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace svm {

struct PmixStep {
    int port = 0;        // the server's TCP port on the host's loopback
    std::string tmpdir;  // PMIX_SERVER_TMPDIR: the step's, on this node, the user's, gone with the step
};

// The step's PMIx server from the task's environment; nullopt when the step
// has no PMIx (no PMIX_NAMESPACE). Refuses (UserError, one sentence) what
// cannot reach a guest: another MPI plugin's wire-up (pmi2's descriptor), a
// server without a TCP address on the loopback, no step directory, or
// variables that name no PMIx server of the step's (PMIX_SERVER_TMPDIR not
// the directory "pmix.JOB.STEP" that Slurm made: a user's PMIX_* given to a
// step without a server would otherwise forward any port of the host's).
std::optional<PmixStep> pmix_step(const std::vector<std::string>& env);

// The port of a PMIx server URI "NAME;tcp4://127.0.0.1:PORT" (also with
// "tcp://"), or 0 when it is not one on the loopback.
int pmix_loopback_port(const std::string& uri);

// Whether the task's variable `name` goes to the guest as it is (PMIx's
// identity and address of the task); PMIx's others stay on the host.
bool pmix_forwarded_variable(const std::string& name);

// What the guest's client is told instead of the host's settings.
std::vector<std::string> pmix_guest_settings();

// ssh's options for the step's forward: the guest's 127.0.0.1:port to the
// host's, with nothing else (no command, no terminal), failing when the
// forward cannot be made, backgrounded once it is (no log file: in the
// background ssh's messages go to /dev/null).
std::vector<std::string> pmix_forward_options(int port);

}  // namespace svm
