// SSH key pairs for a job, made with OpenSSH's own ssh-keygen.
#pragma once
#include <string>

namespace svm {

struct KeyPair {
    std::string private_key;  // OpenSSH format
    std::string public_key;   // one line
};

KeyPair generate_ed25519(const std::string& comment);

}  // namespace svm
