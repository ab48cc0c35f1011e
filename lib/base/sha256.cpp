#include "sha256.hpp"

#include <cstdint>

namespace svm {

Sha256::Sha256() { sha256_init(&ctx_); }

void Sha256::update(const void* data, size_t len) { sha256_update(&ctx_, len, static_cast<const uint8_t*>(data)); }

std::string Sha256::hex_digest() {
    static const char* hex = "0123456789abcdef";
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx_, sizeof digest, digest);
    std::string s;
    for (uint8_t b : digest) {
        s += hex[b >> 4];
        s += hex[b & 15];
    }
    return s;
}

std::string sha256_hex(const std::string& data) {
    Sha256 h;
    h.update(data);
    return h.hex_digest();
}

}  // namespace svm
