// Slurm host lists ("node[1-3,7],login1") expanded to names.
#pragma once
#include <string>
#include <vector>

namespace svm {
std::vector<std::string> expand_hostlist(const std::string& list);
}
