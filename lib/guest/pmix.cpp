#include "pmix.hpp"

#include <set>

#include "error.hpp"
#include "proc.hpp"

namespace svm {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The MPI plugins whose tasks can run in the guests.
bool guest_mpi_type(const std::string& type) { return type.empty() || type == "none" || starts_with(type, "pmix"); }

// The distinct ports of the task's PMIX_SERVER_URI* variables; -1 for one
// that is not on the loopback.
std::set<int> server_ports(const std::vector<std::string>& env) {
    std::set<int> ports;
    for (const auto& kv : env) {
        if (!starts_with(kv, "PMIX_SERVER_URI")) continue;
        size_t eq = kv.find('=');
        if (eq == std::string::npos) continue;
        int port = pmix_loopback_port(kv.substr(eq + 1));
        ports.insert(port > 0 ? port : -1);
    }
    return ports;
}

}  // namespace

int pmix_loopback_port(const std::string& uri) {
    size_t semi = uri.find(';');
    if (semi == std::string::npos) return 0;
    std::string addr = uri.substr(semi + 1);
    for (const char* prefix : {"tcp4://127.0.0.1:", "tcp://127.0.0.1:"}) {
        if (!starts_with(addr, prefix)) continue;
        std::string digits = addr.substr(std::string(prefix).size());
        if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos)
            return 0;
        int port = std::stoi(digits);
        return port > 0 && port < 65536 ? port : 0;
    }
    return 0;
}

std::optional<PmixStep> pmix_step(const std::vector<std::string>& env) {
    std::string type = env_entry(env, "SLURM_MPI_TYPE").value_or("");
    if (!guest_mpi_type(type))
        SVM_REFUSE("srun --mpi=" + type +
                   " cannot wire up ranks in a VM job's guests: use --mpi=pmix, or mpirun in the batch script");
    if (!env_entry(env, "PMIX_NAMESPACE")) return std::nullopt;
    std::set<int> ports = server_ports(env);
    if (ports.size() != 1 || *ports.begin() <= 0)
        SVM_REFUSE(
            "the step's PMIx server has no single TCP address on the host's loopback (PMIX_SERVER_URI*), "
            "which is how the guests reach it: srun --mpi=pmix cannot start ranks in the guests on this node");
    PmixStep s;
    s.port = *ports.begin();
    s.tmpdir = env_entry(env, "PMIX_SERVER_TMPDIR").value_or("");
    while (s.tmpdir.size() > 1 && s.tmpdir.back() == '/') s.tmpdir.pop_back();
    if (s.tmpdir.empty() || s.tmpdir[0] != '/')
        SVM_REFUSE(
            "the step's PMIx server gave no directory (PMIX_SERVER_TMPDIR): srun --mpi=pmix cannot start "
            "ranks in the guests on this node");
    return s;
}

bool pmix_forwarded_variable(const std::string& name) {
    if (starts_with(name, "PMIX_SERVER_URI")) return true;
    for (const char* n : {"PMIX_NAMESPACE", "PMIX_RANK", "PMIX_VERSION", "PMIX_HOSTNAME", "PMIX_BFROP_BUFFER_TYPE"})
        if (name == n) return true;
    return false;
}

std::vector<std::string> pmix_guest_settings() {
    return {"PMIX_SECURITY_MODE=native", "PMIX_GDS_MODULE=hash", "PMIX_SYSTEM_TMPDIR=/tmp"};
}

std::vector<std::string> pmix_forward_options(int port, const std::string& log_file) {
    std::string p = std::to_string(port);
    return {"-f", "-N", "-o", "ExitOnForwardFailure=yes", "-E", log_file, "-R", "127.0.0.1:" + p + ":127.0.0.1:" + p};
}

}  // namespace svm
