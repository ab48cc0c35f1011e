// Running a job's command inside its guest from the host: the SSH command
// line (pinned keys, the job's Unix socket as transport) and the remote shell
// command that recreates the task's environment and working directory.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "guest_signals.hpp"
#include "job_plan.hpp"
#include "srun_relay.hpp"

namespace svm {

struct GuestCommand {
    std::vector<std::string> argv;  // the task's command
    std::vector<std::string> env;   // "K=V" of the task (filtered: SLURM_* and a few more)
    std::string cwd;
    bool script_on_stdin = false;  // batch step: argv[0] is a host file sent on stdin
    // ... or, when set, this is its content, written by the command itself
    // (no stdin, no `cat`: each program started costs an emulated guest
    // tens of milliseconds).
    std::optional<std::string> script;
    std::string hostfile;  // MPI hostfile content ("" = none)
    // Where the guest notes the task's process group, so that signals can
    // follow it there (remote_signal_command); "" = not noted.
    std::string pid_file;
    // The guest's loopback port forwarded to the batch step's srun relay
    // (lib/guest/srun_relay.hpp): the guest's `srun`, first on PATH from
    // srun_dir, uses it. 0 = none.
    int srun_port = 0;
    std::string srun_dir = kGuestSrunDir;
    // Where the guest's srun asks for that port's forward (the agent's FIFO:
    // the forward is made on demand); "" = it is there from the start.
    std::string srun_wake;
    // The job's other guests (hostnames): before the batch script runs, each
    // must accept the job's SSH login (what mpirun needs), for at most
    // peer_wait_s. A guest is ready when its own node's keeper says so; the
    // others of a multi-node job may still be booting.
    std::vector<std::string> wait_for_peers;
    int peer_wait_s = 300;
    // The job's first command, given to the guest's agent while the guest
    // still sets itself up: the command first waits for the flag "ready" in
    // this directory of the guest (kGuestFlagDir, lib/guest/seed.hpp; woken
    // through its FIFO "go"), and ends with status 255 at the flag "failed";
    // just before it execs the task it writes a line to the FIFO "started"
    // there (the guest's sshd daemon waits for it). "" = no wait.
    std::string wait_for_flags_in;
    // "K=V" exported after the task's own variables, whatever their names
    // (PMIx's settings for the guest's client, pmix.hpp).
    std::vector<std::string> settings;
};

// One line per guest of the job, "<guest> slots=<tasks on that node>", from
// the plan's peers and Slurm's SLURM_TASKS_PER_NODE ("2(x3),1").
std::string mpi_hostfile(const std::vector<GuestPeer>& peers, const std::string& tasks_per_node);

// The shell command the user's shell runs in the guest (started by sshd or
// by the guest's agent).
std::string remote_shell_command(const GuestCommand& c);
// The command that sends signal `sig` (a name: "TERM", "USR1", ...) to the
// task's process group noted in pid_file. The task was exec'd by the user's
// shell, which sshd (or the agent, with setsid) made a session (and group)
// leader: the group is the
// task with everything it started.
std::string remote_signal_command(const std::string& pid_file, const std::string& sig);
// Which variables of the task travel into the guest.
bool forwarded_variable(const std::string& name);
// ssh argv (without the remote command); `self` is the path of slurm-vm-exec
// (used as ProxyCommand with --proxy SOCKET).
std::vector<std::string> ssh_argv(const JobPlan& p, const std::string& self, bool tty);

}  // namespace svm
