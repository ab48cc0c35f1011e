// Host-list expansion (lib/base/hostlist.hpp) on the fuzzer's text: the
// lists of a VM record read back from Slurm (a user can write a job's
// text there), and the job's node list. Property: a list expands to names
// or is refused with an exception, and the names written as one list
// (compress_hostlist) expand back to the same names.
#include <set>
#include <stdexcept>

#include "fuzz.hpp"
#include "hostlist.hpp"

using svm::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> names;
    try {
        names = svm::expand_hostlist(svm::fuzz::text(data, size));
    } catch (const std::exception&) {
        return 0;  // refused
    }
    std::string list = svm::compress_hostlist(names);
    // Names whose digits are not the last ones compress badly; a list longer
    // than a reader takes is the writer's to avoid (the record writer keeps
    // within its budget, far below it).
    if (list.size() > svm::kMaxHostlistChars) return 0;
    std::vector<std::string> back;
    try {
        back = svm::expand_hostlist(list);
    } catch (const std::exception& e) {
        require(false, "a written list expands");
    }
    require(std::set<std::string>(names.begin(), names.end()) == std::set<std::string>(back.begin(), back.end()),
            "a written list expands to its names");
    return 0;
}
