// An SSH key pair in OpenSSH's formats (made by job_keys.hpp).
#pragma once
#include <string>

namespace svm {

struct KeyPair {
    std::string private_key;  // OpenSSH format
    std::string public_key;   // one line
};

}  // namespace svm
