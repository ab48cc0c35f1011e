#include "hostlist.hpp"

#include <map>
#include <set>
#include <tuple>

#include "error.hpp"

namespace svm {

namespace {

struct Range {
    long lo, hi;
    size_t width;  // zero padding of the written start
};

long digits_value(std::string_view d, std::string_view item) {
    if (d.empty() || d.size() > 9 || d.find_first_not_of("0123456789") != std::string_view::npos)
        SVM_THROW("invalid host list range in \"" + std::string(item.substr(0, 200)) + "\"");
    long v = 0;
    for (char c : d) v = v * 10 + (c - '0');
    return v;
}

// "1-3,7" as ranges, checked before any is expanded.
std::vector<Range> parse_ranges(std::string_view ranges, std::string_view item) {
    std::vector<Range> out;
    size_t pos = 0;
    for (;;) {
        size_t comma = ranges.find(',', pos);
        std::string_view r = ranges.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        size_t dash = r.find('-');
        std::string_view a = r.substr(0, dash), b = dash == std::string_view::npos ? a : r.substr(dash + 1);
        Range g{digits_value(a, item), digits_value(b, item), a.size()};
        if (g.hi < g.lo) SVM_THROW("invalid host list range in \"" + std::string(item.substr(0, 200)) + "\"");
        out.push_back(g);
        if (comma == std::string_view::npos) return out;
        pos = comma + 1;
    }
}

struct Expansion {
    size_t max_names;
    std::vector<std::string> names;
};

// Appends the names of head + rest (rest: literal text and bracketed ranges,
// in turn). Every step either adds to head (at most kMaxHostName bytes) or
// ends in a name or an error, so the work is bounded by the names returned.
void expand_rest(std::string& head, std::string_view rest, std::string_view item, Expansion& x) {
    size_t lb = rest.find('[');
    std::string_view lit = rest.substr(0, lb);
    if (lit.find(']') != std::string_view::npos)
        SVM_THROW("invalid host list item \"" + std::string(item.substr(0, 200)) + "\"");
    if (head.size() + lit.size() > kMaxHostName)
        SVM_THROW("a host name in the host list is longer than " + std::to_string(kMaxHostName) + " bytes");
    size_t keep = head.size();
    head.append(lit);
    if (lb == std::string_view::npos) {
        if (x.names.size() >= x.max_names)
            SVM_THROW("the host list names more than " + std::to_string(x.max_names) + " hosts");
        if (!head.empty()) x.names.push_back(head);
        head.resize(keep);
        return;
    }
    size_t rb = rest.find(']', lb);
    if (rb == std::string_view::npos) SVM_THROW("invalid host list item \"" + std::string(item.substr(0, 200)) + "\"");
    std::string_view ranges = rest.substr(lb + 1, rb - lb - 1), tail = rest.substr(rb + 1);
    for (const Range& r : parse_ranges(ranges, item)) {
        for (long i = r.lo; i <= r.hi; ++i) {
            std::string n = std::to_string(i);
            if (n.size() < r.width) n.insert(0, r.width - n.size(), '0');  // keep zero padding
            size_t at = head.size();
            head += n;
            expand_rest(head, tail, item, x);
            head.resize(at);
        }
    }
    head.resize(keep);
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list, size_t max_names) {
    if (list.size() > kMaxHostlistChars)
        SVM_THROW("a host list of " + std::to_string(list.size()) + " bytes is longer than " +
                  std::to_string(kMaxHostlistChars));
    Expansion x{max_names, {}};
    size_t begin = 0;
    int depth = 0;
    for (size_t i = 0; i <= list.size(); ++i) {
        char c = i < list.size() ? list[i] : ',';
        if (c == '[' && ++depth > 1) SVM_THROW("invalid host list: nested brackets");
        if (c == ']' && --depth < 0) SVM_THROW("invalid host list: unbalanced brackets");
        if (c != ',' || depth != 0) continue;
        std::string_view item = list.substr(begin, i - begin);
        std::string head;
        expand_rest(head, item, item, x);
        begin = i + 1;
    }
    if (depth != 0) SVM_THROW("invalid host list: unbalanced brackets");
    return std::move(x.names);
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
    // Not a number a range could hold: the reader takes at most 9 digits
    // (digits_value), so the name is written as it is.
    if (e + 1 - b > 9) return {n, "", ""};
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
