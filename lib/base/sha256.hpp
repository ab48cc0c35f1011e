// SHA-256 through nettle (already linked for the job keys): used for image
// accounting digests.
#pragma once
#include <nettle/sha2.h>

#include <cstddef>
#include <string>

namespace svm {

class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t len);
    void update(const std::string& s) { update(s.data(), s.size()); }
    // Lower-case hex of the digest; finishes the hash (the object must not be
    // updated afterwards).
    std::string hex_digest();

private:
    sha256_ctx ctx_;
};

// Hex SHA-256 of a string.
std::string sha256_hex(const std::string& data);

}  // namespace svm
