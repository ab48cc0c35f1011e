#include "hostlist.hpp"

#include <map>
#include <set>
#include <tuple>

#include "error.hpp"

namespace svm {

static void expand_one(const std::string& item, std::vector<std::string>& out, size_t max_names) {
    size_t lb = item.find('[');
    if (lb == std::string::npos) {
        if (item.empty()) return;
        if (out.size() >= max_names) SVM_THROW("the host list names more than " + std::to_string(max_names) + " hosts");
        if (item.size() > kMaxHostName)
            SVM_THROW("a host name in the host list is longer than " + std::to_string(kMaxHostName) + " bytes");
        out.push_back(item);
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
            expand_one(prefix + n + suffix, out, max_names);
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
}

std::vector<std::string> expand_hostlist(const std::string& list, size_t max_names) {
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (char c : list) {
        if (c == '[' && ++depth > 1) SVM_THROW("invalid host list: nested brackets");
        if (c == ']' && --depth < 0) SVM_THROW("invalid host list: unbalanced brackets");
        if (c == ',' && depth == 0) {
            expand_one(cur, out, max_names);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (depth != 0) SVM_THROW("invalid host list: unbalanced brackets");
    expand_one(cur, out, max_names);
    return out;
}

namespace {

// A name as prefix, number (the last run of digits, as written) and suffix.
struct NamePart {
    std::string prefix, digits, suffix;
};

NamePart split_name(const std::string& n) {
    size_t e = n.find_last_of("0123456789");
    if (e == std::string::npos) return {n, "", ""};
    size_t b = e;
    while (b > 0 && n[b - 1] >= '0' && n[b - 1] <= '9') --b;
    if (e + 1 - b > 15) return {n, "", ""};  // not a number a range could hold
    return {n.substr(0, b), n.substr(b, e + 1 - b), n.substr(e + 1)};
}

std::string padded(long v, size_t width) {
    std::string s = std::to_string(v);
    while (s.size() < width) s = "0" + s;
    return s;
}

// "[a-b,c]" of sorted numbers as written: a range goes on while the next
// number is one more and expanding it from the range's start writes it so.
std::string ranges_of(const std::vector<std::string>& digits) {
    std::string out;
    size_t i = 0;
    while (i < digits.size()) {
        size_t j = i;
        long start = std::stol(digits[i]);
        while (j + 1 < digits.size() && std::stol(digits[j + 1]) == start + static_cast<long>(j + 1 - i) &&
               padded(std::stol(digits[j + 1]), digits[i].size()) == digits[j + 1])
            ++j;
        if (!out.empty()) out += ",";
        out += j == i ? digits[i] : digits[i] + "-" + digits[j];
        i = j + 1;
    }
    return out;
}

}  // namespace

std::string compress_hostlist(const std::vector<std::string>& names) {
    // Grouped by prefix and suffix; numbers by value, then as written.
    std::map<std::pair<std::string, std::string>, std::set<std::tuple<long, size_t, std::string>>> groups;
    std::vector<std::string> plain;
    for (const auto& n : std::set<std::string>(names.begin(), names.end())) {
        NamePart p = split_name(n);
        if (p.digits.empty() || p.prefix.find_first_of("[],") != std::string::npos ||
            p.suffix.find_first_of("[],") != std::string::npos) {
            plain.push_back(n);
            continue;
        }
        groups[{p.prefix, p.suffix}].insert({std::stol(p.digits), p.digits.size(), p.digits});
    }
    std::string out;
    auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",") + item; };
    for (const auto& [ps, nums] : groups) {
        std::vector<std::string> digits;
        for (const auto& t : nums) digits.push_back(std::get<2>(t));
        if (digits.size() == 1) add(ps.first + digits[0] + ps.second);
        else add(ps.first + "[" + ranges_of(digits) + "]" + ps.second);
    }
    for (const auto& n : plain) add(n);
    return out;
}

}  // namespace svm
