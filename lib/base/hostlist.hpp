// Slurm host lists ("node[1-3,7],login1") expanded to names, and names
// written as one (the last run of digits in a name ranged, zero padding kept).
// A host list read back from Slurm or from a job's record is untrusted bytes:
// expansion is bounded (the list's length, the number of names, a name's
// length) and refuses, with svm::Error, what passes a bound or is not a host
// list; it never does work beyond the names it may return.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace svm {

constexpr size_t kMaxHostlistChars = 65536;   // a host list's length, compressed
constexpr size_t kMaxHostlistNames = 100000;  // names in one expansion, by default
constexpr size_t kMaxHostName = 255;          // one name's length

// The names of `list`, in its order; throws svm::Error when it is longer
// than kMaxHostlistChars, names more than max_names names (or a name longer
// than kMaxHostName), or is not a host list (brackets unbalanced or nested,
// a range not "N" or "N-M" of at most 9 digits, M < N).
std::vector<std::string> expand_hostlist(std::string_view list, size_t max_names = kMaxHostlistNames);
// A host list whose expansion is `names` as a set, in Slurm's order (by
// prefix and suffix, then number); "" for none.
std::string compress_hostlist(const std::vector<std::string>& names);

}  // namespace svm
