#include "cpuset.hpp"

#include <algorithm>
#include <cctype>

#include "error.hpp"
#include "fs.hpp"

namespace svm {

static int parse_num(const std::string& s, const std::string& whole) {
    if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), ::isdigit))
        SVM_THROW("invalid CPU list \"" + whole + "\"");
    return std::stoi(s);
}

std::vector<int> parse_cpulist(const std::string& text) {
    std::string t = trim(text);
    std::vector<int> out;
    if (t.empty()) return out;
    size_t pos = 0;
    while (pos <= t.size()) {
        size_t comma = t.find(',', pos);
        std::string part = t.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t dash = part.find('-');
        if (dash == std::string::npos) {
            out.push_back(parse_num(part, t));
        } else {
            int a = parse_num(part.substr(0, dash), t), b = parse_num(part.substr(dash + 1), t);
            if (b < a) SVM_THROW("invalid CPU list \"" + t + "\"");
            for (int i = a; i <= b; ++i) out.push_back(i);
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string format_cpulist(const std::vector<int>& cpus) {
    std::vector<int> c = cpus;
    std::sort(c.begin(), c.end());
    std::string out;
    for (size_t i = 0; i < c.size();) {
        size_t j = i;
        while (j + 1 < c.size() && c[j + 1] == c[j] + 1) ++j;
        if (!out.empty()) out += ",";
        out += std::to_string(c[i]);
        if (j > i) out += "-" + std::to_string(c[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace svm
