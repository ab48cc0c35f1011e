// Slurm host lists ("node[1-3,7],login1") expanded to names, and names
// written as one (the last run of digits in a name ranged, zero padding kept).
#pragma once
#include <string>
#include <vector>

namespace svm {
std::vector<std::string> expand_hostlist(const std::string& list);
// A host list whose expansion is `names` as a set, in Slurm's order (by
// prefix and suffix, then number); "" for none.
std::string compress_hostlist(const std::vector<std::string>& names);
}  // namespace svm
