// SSH between the host and a job's guests: key pairs (made by
// job_keys.hpp) and the key exchanges.
#pragma once
#include <string>

namespace svm {

struct KeyPair {
    std::string private_key;  // OpenSSH format
    std::string public_key;   // one line
};

// The key exchanges of every SSH connection to and between a job's guests:
// no post-quantum hybrid (OpenSSH 9's default), which costs about 0.2 s per
// connection in an emulated guest; these links run between the host and the
// job's own guests on the job's private network. Listed one by one, for
// OpenSSH 8 (no "^" syntax).
inline constexpr const char* kGuestKex =
    "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,"
    "diffie-hellman-group16-sha512,diffie-hellman-group14-sha256";

}  // namespace svm
