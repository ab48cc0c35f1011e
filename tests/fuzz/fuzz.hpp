// What the fuzz targets share: the input as a string, and a check that stops
// the run (libFuzzer then keeps the input) when a property does not hold.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace svm::fuzz {

inline std::string text(const uint8_t* data, size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

// A property of the parser's answer that every input must keep.
inline void require(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "fuzz: property broken: %s\n", what);
    std::abort();
}

// Printable ASCII only (a sentence for a log line or a user).
inline bool printable_ascii(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c >= 0x7f) return false;
    return true;
}

}  // namespace svm::fuzz
