#include "hostlist.hpp"

#include "error.hpp"

namespace svm {

static void expand_one(const std::string& item, std::vector<std::string>& out) {
    size_t lb = item.find('[');
    if (lb == std::string::npos) {
        if (!item.empty()) out.push_back(item);
        return;
    }
    size_t rb = item.find(']', lb);
    if (rb == std::string::npos) SVM_THROW("invalid host list item \"" + item + "\"");
    std::string prefix = item.substr(0, lb), suffix = item.substr(rb + 1);
    std::string ranges = item.substr(lb + 1, rb - lb - 1);
    size_t pos = 0;
    while (pos <= ranges.size()) {
        size_t comma = ranges.find(',', pos);
        std::string r = ranges.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t dash = r.find('-');
        std::string a = r.substr(0, dash), b = dash == std::string::npos ? a : r.substr(dash + 1);
        if (a.empty() || b.empty()) SVM_THROW("invalid host list range \"" + r + "\"");
        long lo = std::stol(a), hi = std::stol(b);
        if (hi < lo || hi - lo > 100000) SVM_THROW("invalid host list range \"" + r + "\"");
        for (long i = lo; i <= hi; ++i) {
            std::string n = std::to_string(i);
            while (n.size() < a.size()) n = "0" + n;  // keep zero padding
            expand_one(prefix + n + suffix, out);
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
}

std::vector<std::string> expand_hostlist(const std::string& list) {
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (char c : list) {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (c == ',' && depth == 0) {
            expand_one(cur, out);
            cur.clear();
        } else {
            cur += c;
        }
    }
    expand_one(cur, out);
    return out;
}

}  // namespace svm
