// CPU lists in the kernel's format ("0-3,8,10-11").
#pragma once
#include <string>
#include <vector>

namespace svm {
std::vector<int> parse_cpulist(const std::string& text);
std::string format_cpulist(const std::vector<int>& cpus);
}  // namespace svm
