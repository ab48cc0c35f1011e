// The guest's per-boot settings as a standard cloud-init NoCloud seed: an ISO
// 9660 volume labelled "cidata" holding meta-data, network-config and a
// user-data boothook (a script run as root early in every boot by cloud-init,
// or by a NoCloud runner).
#pragma once
#include <string>

#include "job_plan.hpp"

namespace svm {

struct SeedKeys {
    std::string user_public;   // authorized for the job's user in every guest
    std::string user_private;  // lets the guests log into each other (mpirun)
    std::string host_private;  // the guests' host key
    std::string host_public;
    std::string known_hosts;  // every guest of the job: "name,ip key" lines
};

std::string seed_meta_data(const JobPlan& p);
std::string seed_network_config(const JobPlan& p);
std::string seed_user_data(const JobPlan& p, const SeedKeys& k);
// The part of user-data that applies the plan's interrupt moderation profile
// to the VF's network interface(s) with `ethtool -C` ("" when the profile is
// "default" or the guest has no VF). The interfaces are found by the VF's MAC
// (Ethernet) or port GUID (IPoIB), else every NIC not driven by virtio_net;
// a missing ethtool, a missing interface or a refused setting is one line on
// the console, never a failed boot.
std::string seed_irq_script(const JobPlan& p);
// The job's network on IPoIB (plan.fabric_ip): finds the VF's IPoIB interface
// by its port GUID and gives it the address; "" without a fabric.
std::string seed_fabric_script(const JobPlan& p);
// Mounts the plan's shares (virtio-fs or 9p, plan.shares_via) at their host
// paths (made when missing), and makes the job's working directory, in the
// background (scripts/mounts.sh; "" when the plan has neither); the file
// system's module is loaded when the kernel's list (`filesystems`, read by
// the shell) lacks it, and a kernel still without it fails the boot with a
// sentence saying what the image lacks.
std::string seed_mounts_script(const JobPlan& p, const std::string& filesystems = "/proc/filesystems");
// The peers' lines ("<address> <hostname> # slurm-vm") in each of `files`
// (patterns, split on blanks and expanded by the shell: the files that exist): earlier lines of ours go (an
// image saved from an earlier guest), the file is rewritten in place by the
// shell's builtins (no process), anything else in it kept.
std::string seed_hosts_script(const JobPlan& p,
                              const std::string& files = "/etc/hosts /etc/cloud/templates/hosts.*.tmpl");
// The job's user and group, same ids as on the host. A stock cloud image's
// default user (e.g. "debian" with uid and gid 1000: cloud-init makes it
// after this script on an instance's first boot, so it exists here only in
// an image saved from an earlier guest or built with it) may hold the job's
// ids: it is moved to free ids (deleting it would break cloud-init's later
// modules, which look it up). Only ordinary accounts (ids >= 1000) are
// moved, never system ones. The image's files are read and written by the
// shell itself: an account neither in them nor known to NSS (getent: LDAP)
// gets the lines groupadd and useradd -M would add to passwd, group, shadow
// and gshadow in `etc` (no home made, no password), without starting them.
// A group of the job's name with another gid fails the boot, saying so.
// Needs fail() (seed_user_data).
std::string seed_user_script(const JobPlan& p, const std::string& etc = "/etc");
// Turns off PAM's dynamic message of the day for SSH sessions in the guest
// (comments out pam_motd in the guest's copy of pam_file): it runs
// /etc/update-motd.d on every session, so on every srun step and every
// connection mpirun makes, about 0.1 s each under emulation and more with a
// stock image's heavier scripts. Idempotent; no file, no change.
std::string seed_no_motd_script(const std::string& pam_file = "/etc/pam.d/sshd");

// The user-data's start of the guest's sshd with the job's configuration.
// Under systemd (a stock cloud image) sshd is usually ordered after
// cloud-init, whose boothook this runs in, and not started yet: its start is
// queued without waiting (waiting would wait for this script's own end) and
// the keeper's readiness waits for port 22. One already running, with the
// image's own host keys, is restarted, which returns once the new sshd
// listens, so logins meet the job's host key. Without systemd (a NoCloud
// runner): the daemon (its pid file: other sshd processes, e.g. the users'
// sessions, are left alone) is reloaded, or started. Then the console line
// ready_marker.
std::string seed_sshd_start_script(const JobPlan& p, const std::string& systemd_dir = "/run/systemd/system");

// The guest's flags for the job's first command (seed_agent_script), in
// this directory: the user-data makes "ready" when the guest is set up
// (network, shares, working directory; before sshd's daemon starts, which
// the first command does not need), "failed" when it failed, and then writes
// a line to the FIFO "go" (opened read-write: it never blocks). The agent
// (seed_agent_script) makes "taken" when it has the job's first command,
// which then writes a line to the FIFO "started" just before it execs the
// task (so does the agent if the command ended first): sshd's daemon starts
// after that line. The FIFO "srun" is the agent's too. The directory is
// made anew at every boot.
inline constexpr const char* kGuestFlagDir = "/run/slurm-vm";

// The guest's agent: runs the job's first command (the batch script) as the
// job's user without an SSH session, over the guest's virtio-serial ports
// kAgentPortNames (lib/guest/domain_xml.hpp). Under emulation an SSH login
// costs about half a second of the guest's one busy vCPU (key exchange,
// sshd's privilege separation, the session); the agent costs a PAM session
// of runuser. A POSIX sh script, run as root with $1..$3 the three ports'
// devices, $4 the job's user, $5 a directory of root's for the command's
// stdin, with the FIFO "srun" (kGuestFlagDir), and $6, $7 the paths of
// runuser and setsid; its environment only PATH. Its protocol, on the
// first port:
//   host -> guest: "SVM-AGENT-1 <nonce> <command bytes> <stdin bytes> <pid file>\n",
//     the command (a shell command, GuestCommand's remote_shell_command),
//     its stdin (a batch script too large to be written by the command
//     itself; usually none); then "signal <NAME>\n" lines;
//   the command runs as the user, through PAM (runuser: pam_limits, so
//     memlock as for an SSH session), in a session of its own (runuser's;
//     setsid's for root, whose session runuser keeps), given to /bin/sh
//     with "-c" (SHELL still the user's login shell), environment: PATH,
//     HOME, SHELL, USER, LOGNAME and what the command exports; stdout on
//     the second port, stderr on the third;
//   a signal goes to the process group noted in the pid file (as
//     remote_signal_command does), or, before the command noted it, to
//     runuser;
//   guest -> host: "srun\n" when the command's srun asks for its relay (a
//     line to the FIFO "srun" in $5; lib/guest/srun_relay.hpp);
//   guest -> host once the command ended: the nonce on the second and the
//     third port (what follows it is not the task's), then "exit <status>\n";
//   then "sync\n" -> "synced <status>\n" (--vm-save), until the host closes
//     the port.
std::string agent_script();
// The user-data's start of the agent (in a session of its own, in the
// background, environment cleared) as soon as the job's user exists,
// announced on the console (agent_marker). The command it is given waits for
// the flag "ready" (GuestCommand::wait_for_flags_in), so the host may send
// it at once. A guest without the ports, their driver (virtio_console),
// runuser or setsid says nothing, and its first command goes over SSH once
// it is ready, like every other.
std::string seed_agent_script(const JobPlan& p);
// The console line that says the agent waits for the job's first command.
std::string agent_marker(const JobPlan& p);

// Writes the seed at `out`: the three files in a CD-ROM image labelled
// "cidata" (seed_iso.hpp).
void build_seed_iso(const JobPlan& p, const SeedKeys& k, const std::string& out);

// The line the guest prints on its serial console when it is set up (the
// flag "ready": its first command may start; the job's VM record is
// published then).
std::string set_up_marker(const JobPlan& p);
// The line the guest prints on its serial console when it accepts logins.
std::string ready_marker(const JobPlan& p);

}  // namespace svm
