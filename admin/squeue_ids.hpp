// Which jobs Slurm runs on a node, from squeue's answer (used by `slurm-vm
// sweep`). Header-only and free of Slurm so the unit tests can reach it.
//
// A VM job's state on a node is keyed by its job id (SLURM_JOB_ID in the
// prolog). squeue's %i is not that id for arrays and heterogeneous jobs: an
// array task with job id 345 shows as "340_5" (base id, index), pending tasks
// as "340_[6-9]", and heterogeneous components with job ids 350 and 351 as
// "350+0" and "350+1". %A prints the job id itself, one per array task and per
// component. So sweep asks for `squeue -h -o %A` and this parser accepts only
// plain decimal ids: anything else means squeue did not answer what was asked,
// and a caller must then act as if Slurm could not be asked (touch nothing).
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace svm::admin {

// The squeue format sweep asks for: the job id of each job record.
inline constexpr const char* kSqueueJobIdFormat = "%A";

// The job ids in the output of `squeue -h -o %A`: one id per line, blank lines
// and surrounding blanks ignored. nullopt when any line is anything else (a
// %i-style "340_5", "340_[1-3]", "350+1", text, a number out of range).
inline std::optional<std::set<uint32_t>> parse_squeue_job_ids(const std::string& out) {
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
        if (t.size() > 10 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
        uint64_t v = std::stoull(t);
        if (v == 0 || v > UINT32_MAX) return std::nullopt;
        ids.insert(static_cast<uint32_t>(v));
    }
    return ids;
}

}  // namespace svm::admin
