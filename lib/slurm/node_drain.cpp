#include "node_drain.hpp"

#include <cstdint>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm {

std::string drain_reason(uint32_t job, const std::vector<std::string>& failures) {
    constexpr size_t max_len = 400;
    std::string first = failures.empty() ? std::string("cleanup failed") : failures.front();
    const std::string undo = "undo ";  // "undo vfio_bind: give ... back": the step name adds nothing
    if (first.compare(0, undo.size(), undo) == 0) {
        size_t colon = first.find(": ");
        if (colon != std::string::npos) first = first.substr(colon + 2);
    }
    std::string r = "slurm-vm: job " + std::to_string(job) + ": " + first;
    if (failures.size() > 1) r += " (+" + std::to_string(failures.size() - 1) + " more, see the node's slurm-vm log)";
    for (char& c : r)
        if (c == '\n' || c == '\t') c = ' ';
    if (r.size() > max_len) r = r.substr(0, max_len - 3) + "...";
    return r;
}

bool drain_node(const std::string& node, const std::string& reason, std::string& err) {
    RunOptions o;
    o.env = inherited_env({"PATH", "SLURM_CONF"});
    o.timeout_ms = 20000;
    RunResult r = run({"scontrol", "update", "nodename=" + node, "state=drain", "reason=" + reason}, o);
    if (r.ok()) return true;
    err = "scontrol update nodename=" + node + " state=drain failed (exit " + std::to_string(r.status) +
          "): " + trim(r.err + r.out);
    return false;
}

}  // namespace svm
