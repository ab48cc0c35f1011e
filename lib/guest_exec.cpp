#include "guest_exec.hpp"

#include "proc.hpp"

namespace svm {

bool forwarded_variable(const std::string& name) {
    if (name.rfind("SLURM_VM_", 0) == 0) return false;
    if (name.rfind("SLURM_", 0) == 0 || name.rfind("SLURMD_", 0) == 0) return true;
    for (const char* n : {"OMP_NUM_THREADS", "LANG", "LC_ALL", "TZ"})
        if (name == n) return true;
    return false;
}

std::string remote_shell_command(const GuestCommand& c) {
    std::string s;
    for (const auto& kv : c.env) {
        auto eq = kv.find('=');
        if (eq == std::string::npos) continue;
        std::string k = kv.substr(0, eq);
        if (!forwarded_variable(k) || k.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
            continue;
        s += "export " + k + "=" + shell_quote(kv.substr(eq + 1)) + "; ";
    }
    if (!c.cwd.empty()) s += "cd " + shell_quote(c.cwd) + " 2>/dev/null || cd; ";
    if (c.script_on_stdin) {
        s += "f=$(mktemp /tmp/slurm-vm-script.XXXXXX) && cat >\"$f\" && chmod 700 \"$f\" || exit 1; ";
        s += "\"$f\"";
        for (size_t i = 1; i < c.argv.size(); ++i) s += " " + shell_quote(c.argv[i]);
        s += " </dev/null; rc=$?; rm -f \"$f\"; exit $rc";
    } else {
        s += "exec";
        for (const auto& a : c.argv) s += " " + shell_quote(a);
    }
    return s;
}

std::vector<std::string> ssh_argv(const JobPlan& p, const std::string& self, bool tty) {
    return {"ssh",
            "-F", "/dev/null",
            "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes",
            "-i", p.user_key(),
            "-o", "UserKnownHostsFile=" + p.known_hosts(),
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "HostKeyAlias=" + p.hostname,
            "-o", "ProxyCommand=" + self + " --proxy " + p.ssh_socket(),
            "-o", "ConnectTimeout=60",
            "-o", "ServerAliveInterval=30",
            "-o", "LogLevel=ERROR",
            tty ? "-tt" : "-T",
            "-l", p.user,
            p.hostname};
}

}  // namespace svm
