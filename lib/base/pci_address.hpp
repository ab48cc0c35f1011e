// PCI function addresses in the kernel's form, DDDD:BB:DD.F.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace svm {

struct PciAddress {
    uint32_t domain = 0;    // 0..0xffff
    uint32_t bus = 0;       // 0..0xff
    uint32_t slot = 0;      // 0..0x1f
    uint32_t function = 0;  // 0..7

    // Accepts "0000:3b:00.0" and the short "3b:00.0" (domain 0); hex is
    // case-insensitive. Throws svm::Error quoting the text on anything else.
    static PciAddress parse(const std::string& text);
    static std::optional<PciAddress> try_parse(const std::string& text);

    std::string str() const;  // "0000:3b:00.0", lower case
    uint32_t devfn() const { return (slot << 3) | function; }
    static PciAddress from_devfn(uint32_t domain, uint32_t bus, uint32_t devfn);
    // Same domain, bus and slot: functions of one multi-function device.
    bool same_slot(const PciAddress& o) const { return domain == o.domain && bus == o.bus && slot == o.slot; }
};

bool operator==(const PciAddress& a, const PciAddress& b);
bool operator!=(const PciAddress& a, const PciAddress& b);
bool operator<(const PciAddress& a, const PciAddress& b);

}  // namespace svm
