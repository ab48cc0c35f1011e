// SHA-256 (FIPS 180-4), small and dependency-free: used for image accounting
// digests, not for anything that needs a constant-time implementation.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace svm {

class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t len);
    void update(const std::string& s) { update(s.data(), s.size()); }
    // Finishes the hash; the object must not be updated afterwards.
    std::array<uint8_t, 32> digest();
    // Lower-case hex of digest().
    std::string hex_digest();

private:
    void block(const uint8_t* p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t buf_len_ = 0;
    uint64_t total_ = 0;
};

// Hex SHA-256 of a string.
std::string sha256_hex(const std::string& data);

}  // namespace svm
