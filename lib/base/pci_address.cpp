#include "pci_address.hpp"

#include <cctype>
#include <cstdio>
#include <tuple>

#include "error.hpp"

namespace svm {

namespace {

// Parses exactly `digits` hex digits (or 1..digits when !exact) at s[pos].
bool hex_field(const std::string& s, size_t& pos, size_t min_digits, size_t max_digits, uint32_t& out) {
    size_t start = pos;
    uint32_t v = 0;
    while (pos < s.size() && pos - start < max_digits && std::isxdigit(static_cast<unsigned char>(s[pos]))) {
        char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[pos])));
        v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
        ++pos;
    }
    if (pos - start < min_digits) return false;
    out = v;
    return true;
}

}  // namespace

std::optional<PciAddress> PciAddress::try_parse(const std::string& text) {
    // Count colons to tell the long form from the short one.
    size_t colons = 0;
    for (char c : text) colons += c == ':';
    PciAddress a;
    size_t pos = 0;
    if (colons == 2) {
        if (!hex_field(text, pos, 4, 4, a.domain) || pos >= text.size() || text[pos++] != ':') return std::nullopt;
    } else if (colons != 1) {
        return std::nullopt;
    }
    if (!hex_field(text, pos, 2, 2, a.bus) || pos >= text.size() || text[pos++] != ':') return std::nullopt;
    if (!hex_field(text, pos, 2, 2, a.slot) || pos >= text.size() || text[pos++] != '.') return std::nullopt;
    if (!hex_field(text, pos, 1, 1, a.function) || pos != text.size()) return std::nullopt;
    if (a.slot > 0x1f || a.function > 7) return std::nullopt;
    return a;
}

PciAddress PciAddress::parse(const std::string& text) {
    auto a = try_parse(text);
    if (!a) SVM_THROW("invalid PCI address '" + text + "' (expected DDDD:BB:DD.F, e.g. 0000:3b:00.0)");
    return *a;
}

std::string PciAddress::str() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, slot, function);
    return buf;
}

PciAddress PciAddress::from_devfn(uint32_t domain, uint32_t bus, uint32_t devfn) {
    PciAddress a;
    a.domain = domain;
    a.bus = bus + (devfn >> 8);
    a.slot = (devfn >> 3) & 0x1f;
    a.function = devfn & 7;
    return a;
}

bool operator==(const PciAddress& a, const PciAddress& b) {
    return std::tie(a.domain, a.bus, a.slot, a.function) == std::tie(b.domain, b.bus, b.slot, b.function);
}
bool operator!=(const PciAddress& a, const PciAddress& b) { return !(a == b); }
bool operator<(const PciAddress& a, const PciAddress& b) {
    return std::tie(a.domain, a.bus, a.slot, a.function) < std::tie(b.domain, b.bus, b.slot, b.function);
}

}  // namespace svm
