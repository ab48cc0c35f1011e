#include "guest_exec.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include "guest_agent.hpp"
#include "pmix.hpp"
#include "proc.hpp"
#include "srun_relay.hpp"
#include "ssh_keys.hpp"

namespace svm {

bool forwarded_variable(const std::string& name) {
    if (name.rfind("SLURM_VM_", 0) == 0) return false;
    if (name.rfind("SLURM_", 0) == 0 || name.rfind("SLURMD_", 0) == 0) return true;
    if (pmix_forwarded_variable(name)) return true;
    for (const char* n : {"OMP_NUM_THREADS", "LANG", "LC_ALL", "TZ"})
        if (name == n) return true;
    return false;
}

std::string mpi_hostfile(const std::vector<GuestPeer>& peers, const std::string& tasks_per_node) {
    std::vector<int> slots;
    size_t pos = 0;
    while (pos < tasks_per_node.size()) {
        size_t comma = tasks_per_node.find(',', pos);
        std::string item = tasks_per_node.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        int n = std::atoi(item.c_str()), rep = 1;
        auto x = item.find("(x");
        if (x != std::string::npos) rep = std::atoi(item.c_str() + x + 2);
        for (int i = 0; i < rep && slots.size() < 100000; ++i) slots.push_back(n);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    std::string out;
    for (size_t i = 0; i < peers.size(); ++i) {
        int n = i < slots.size() ? slots[i] : (slots.empty() ? 1 : slots.back());
        out += peers[i].hostname + " slots=" + std::to_string(n > 0 ? n : 1) + "\n";
    }
    return out;
}

namespace {

// Runs the batch script in "$f.job-script" as the kernel runs a script (its
// "#!" line: the interpreter, then at most one argument), without making it
// executable first: a `chmod` less before the script's first line.
std::string exec_script(const GuestCommand& c) {
    std::string args;
    for (size_t i = 1; i < c.argv.size(); ++i) args += " " + shell_quote(c.argv[i]);
    const std::string b = "[ \t]", nb = "[! \t]";  // blanks, as the kernel splits the line
    return "l=; IFS= read -r l <\"$f.job-script\"; case \"$l\" in '#!'*) l=${l#??}; l=${l#\"${l%%" + nb +
           "*}\"}; i=${l%%" + b + "*}; a=${l#\"$i\"}; a=${a#\"${a%%" + nb + "*}\"}; a=${a%\"${a##*" + nb +
           "}\"}; [ -z \"$i\" ] || exec \"$i\" ${a:+\"$a\"} \"$f.job-script\"" + args +
           " </dev/null;; esac; exec /bin/sh \"$f.job-script\"" + args + " </dev/null";
}

// First, as /tmp may still be mounted over while the guest sets itself up:
// wait for the guest's flags. Woken through the FIFO "go" (no process
// started to wait; without it, polled), then the flags decide.
std::string wait_for_flags_sh(const GuestCommand& c) {
    if (c.wait_for_flags_in.empty()) return "";
    std::string f = shell_quote(c.wait_for_flags_in);
    return "if [ -p " + f + "/go ]; then exec 3<>" + f + "/go; else exec 3</dev/null; fi; " + "until [ -e " + f +
           "/ready ]; do [ -e " + f + "/failed ] && exit 255; read _ <&3 || sleep 0.05; done; " + "exec 3<&-; ";
}

// The task's files (the host list, the batch script), new (noclobber) and
// private, under a name the host draws; and mpirun pointed at the host list.
std::string task_files_sh(const GuestCommand& c) {
    std::string files, s;
    if (!c.hostfile.empty()) files += "printf %s " + shell_quote(c.hostfile) + " >\"$f.hostfile\"";
    if (c.script_on_stdin) {
        // The script stays in the guest's /tmp until the guest goes with the job.
        if (!files.empty()) files += " && ";
        if (c.script) files += "printf %s " + shell_quote(*c.script) + " >\"$f.job-script\"";
        else files += "cat >\"$f.job-script\"";
    }
    // Named by 128 random bits (the agent's nonce): no one in the guest
    // guesses the name before the command makes it.
    if (!files.empty()) s += "f=/tmp/slurm-vm." + agent_nonce() + "; (umask 077; set -C; " + files + ") || exit 1; ";
    if (!c.hostfile.empty()) {
        // mpirun (Open MPI, MPICH) finds the job's guests with no flags; the
        // Slurm variables must not make it look for srun, which the guest lacks.
        s += "hf=\"$f.hostfile\"; ";
        s += "export OMPI_MCA_orte_default_hostfile=\"$hf\" OMPI_MCA_plm=rsh OMPI_MCA_ras=^slurm "
             "OMPI_MCA_plm_rsh_agent=ssh HYDRA_HOST_FILE=\"$hf\" HYDRA_LAUNCHER=ssh HYDRA_RMK=user; ";
    }
    return s;
}

// The forwarded variables, and srun's port for the guest's shim.
std::string environment_sh(const GuestCommand& c) {
    std::string s;
    for (const auto& kv : c.env) {
        auto eq = kv.find('=');
        if (eq == std::string::npos) continue;
        std::string k = kv.substr(0, eq);
        if (!forwarded_variable(k) ||
            k.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
            continue;
        s += "export " + k + "=" + shell_quote(kv.substr(eq + 1)) + "; ";
    }
    for (const auto& kv : c.settings) {
        auto eq = kv.find('=');
        if (eq != std::string::npos) s += "export " + kv.substr(0, eq) + "=" + shell_quote(kv.substr(eq + 1)) + "; ";
    }
    if (c.srun_port > 0) {
        s += "export SLURM_VM_SRUN_PORT=" + std::to_string(c.srun_port) + "; ";
        if (!c.srun_wake.empty()) s += "export SLURM_VM_SRUN_WAKE=" + shell_quote(c.srun_wake) + "; ";
    }
    return s;
}

// In parallel, one login each with the guest's own SSH settings (the job's
// key, its guests' host keys), as mpirun will log in. Bounded by the clock
// (the kernel's uptime, read by the shell), not by tries: a try at a guest
// that does not answer waits out ssh's ConnectTimeout.
std::string wait_for_peers_sh(const GuestCommand& c) {
    if (c.wait_for_peers.empty()) return "";
    std::string wait_s = std::to_string(std::max(1, c.peer_wait_s));
    std::string s = "for h in";
    for (const auto& h : c.wait_for_peers) s += " " + shell_quote(h);
    s += "; do (read t _ </proc/uptime; e=$((${t%.*} + " + wait_s +
         ")); until ssh -o BatchMode=yes -o ConnectTimeout=5 \"$h\" true </dev/null >/dev/null 2>&1; do "
         "read t _ </proc/uptime; [ ${t%.*} -ge $e ] && { echo \"slurm-vm: guest $h does not accept logins "
         "(waited " +
         wait_s + " s)\" >&2; exit 1; }; sleep 1; done) & done; wait; ";
    return s;
}

}  // namespace

std::string remote_shell_command(const GuestCommand& c) {
    // What the task needs in the guest is written by the shell (its
    // builtins, in a subshell for the private umask): the fewer programs
    // before the task, the sooner it runs (each costs tens of milliseconds
    // in an emulated guest). srun's shim is the guest's (kGuestSrunDir).
    std::string s = wait_for_flags_sh(c) + task_files_sh(c) + environment_sh(c) + wait_for_peers_sh(c);
    if (c.srun_port > 0) s += "export PATH=" + shell_quote(c.srun_dir) + "\":$PATH\"; ";
    if (!c.cwd.empty()) s += "cd " + shell_quote(c.cwd) + " 2>/dev/null || cd; ";
    if (!c.pid_file.empty()) s += "echo $$ >" + shell_quote(c.pid_file) + "; ";
    if (!c.wait_for_flags_in.empty()) {
        // The guest starts sshd's daemon once it hears this (seed.hpp).
        std::string f = shell_quote(c.wait_for_flags_in + "/started");
        s += "[ -p " + f + " ] && { echo started 1<>" + f + "; } 2>/dev/null; ";
    }
    if (c.script_on_stdin) return s + exec_script(c);
    s += "exec";
    for (const auto& a : c.argv) s += " " + shell_quote(a);
    return s;
}

std::string remote_signal_command(const std::string& pid_file, const std::string& sig) {
    std::string f = shell_quote(pid_file);
    return "p=$(cat " + f + " 2>/dev/null) && [ -n \"$p\" ] || exit 3; kill -s " + sig +
           " -- -\"$p\" 2>/dev/null || kill -s " + sig + " \"$p\"";
}

std::vector<std::string> ssh_argv(const JobPlan& p, const std::string& self, bool tty) {
    // The banner of a guest that has just said it is ready can be slow on a
    // slow host (a guest under emulation, the lab's nested one): a node that
    // needs a long boot timeout also waits longer for it.
    int connect_s = std::max(60, p.boot_timeout_s / 5);
    // One option and its value per line.
    // clang-format off
    return {"ssh",
            "-F", "/dev/null",
            "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes",
            "-i", p.user_key(),
            "-o", "UserKnownHostsFile=" + p.known_hosts(),
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "HostKeyAlias=" + p.hostname,
            "-o", "KexAlgorithms=" + std::string(kGuestKex),
            "-o", "ProxyCommand=" + shell_quote(self) + " --proxy " + shell_quote(p.ssh_socket()),
            "-o", "ConnectTimeout=" + std::to_string(connect_s),
            "-o", "ServerAliveInterval=30",
            "-o", "LogLevel=ERROR",
            tty ? "-tt" : "-T",
            "-l", p.user,
            p.hostname};
    // clang-format on
}

}  // namespace svm
