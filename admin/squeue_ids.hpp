// Which jobs Slurm runs on a node, from squeue's answer (used by `slurm-vm
// sweep`). Header-only and free of Slurm so the unit tests can reach it.
//
// A VM job's state on a node is keyed by its job id (SLURM_JOB_ID in the
// prolog). squeue's %i is not that id for arrays and heterogeneous jobs: an
// array task with job id 345 shows as "340_5" (base id, index), pending tasks
// as "340_[6-9]", and heterogeneous components with job ids 350 and 351 as
// "350+0" and "350+1". %A prints the job id itself, one per array task and per
// component.
//
// Nor does sweep let squeue filter by state: Slurm 22.05's `squeue -t R`
// compares the whole state word, flags included, so a running job that
// carries a flag (SIGNALING while `scancel --signal` is delivered) matches no
// state asked for and is left out, and looked gone. So sweep asks for every
// job in every state and partition (`squeue -h -a -t all -o "%A %T"`) and
// takes a job for gone only when squeue names one of the states a job ends
// in; any other state (a flag such as SIGNALING or COMPLETING, a state this
// parser does not know) is live. Any line that is not "<job id> <STATE>"
// means squeue did not answer what was asked, and a caller must then act as
// if Slurm could not be asked (touch nothing).
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace svm::admin {

// The squeue format sweep asks for: the job id and state of each job record.
inline constexpr const char* kSqueueJobFormat = "%A %T";

// The states (%T) of a job that has ended and holds nothing on a node.
inline bool job_state_ended(const std::string& state) {
    static const std::set<std::string> ended = {"COMPLETED", "CANCELLED", "FAILED",   "TIMEOUT",      "NODE_FAIL",
                                                "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"};
    return ended.count(state) > 0;
}

// The live job ids in the output of `squeue -h -o "%A %T"`: one "<id>
// <STATE>" per line, blank lines and surrounding blanks ignored. nullopt when
// any line is anything else (a %i-style "340_5", "350+1", text, a number out
// of range, a state that is not an upper-case word).
inline std::optional<std::set<uint32_t>> parse_squeue_live_jobs(const std::string& out) {
    std::set<uint32_t> ids;
    size_t pos = 0;
    while (pos <= out.size()) {
        size_t nl = out.find('\n', pos);
        if (nl == std::string::npos) nl = out.size();
        std::string line = out.substr(pos, nl - pos);
        pos = nl + 1;
        const char* blanks = " \t\r";
        size_t b = line.find_first_not_of(blanks);
        if (b == std::string::npos) continue;
        size_t e = line.find_last_not_of(blanks);
        std::string t = line.substr(b, e - b + 1);
        size_t sp = t.find_first_of(blanks);
        if (sp == std::string::npos) return std::nullopt;
        std::string id = t.substr(0, sp), state = t.substr(t.find_first_not_of(blanks, sp));
        if (id.empty() || id.size() > 10 || id.find_first_not_of("0123456789") != std::string::npos)
            return std::nullopt;
        if (state.empty() || state.size() > 32 ||
            state.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != std::string::npos)
            return std::nullopt;
        uint64_t v = std::stoull(id);
        if (v == 0 || v > UINT32_MAX) return std::nullopt;
        if (!job_state_ended(state)) ids.insert(static_cast<uint32_t>(v));
    }
    return ids;
}

}  // namespace svm::admin
