// Slurm host lists ("node[1-3,7],login1") expanded to names, and names
// written as one (the last run of digits in a name ranged, zero padding kept).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace svm {
// The most names one expansion gives by default, and the longest name.
constexpr size_t kMaxHostlistNames = 100000;
constexpr size_t kMaxHostName = 255;
// The names of `list`, in its order; throws (svm::Error, or std::exception
// for a number out of range) when it is not a host list (brackets
// unbalanced or nested), names more than max_names or a name longer than
// kMaxHostName.
std::vector<std::string> expand_hostlist(const std::string& list, size_t max_names = kMaxHostlistNames);
// A host list whose expansion is `names` as a set, in Slurm's order (by
// prefix and suffix, then number); "" for none.
std::string compress_hostlist(const std::vector<std::string>& names);
}  // namespace svm
