#include "ssh_keys.hpp"

#include <stdlib.h>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm {

KeyPair generate_ed25519(const std::string& comment) {
    char tmpl[] = "/tmp/slurm-vm-key-XXXXXX";
    if (!::mkdtemp(tmpl)) SVM_THROW_ERRNO("mkdtemp");
    std::string dir = tmpl;
    KeyPair k;
    try {
        std::string f = path_join(dir, "k");
        run_checked({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", f});
        k.private_key = read_file(f);
        k.public_key = read_file(f + ".pub");
    } catch (...) {
        remove_tree(dir);
        throw;
    }
    remove_tree(dir);
    return k;
}

}  // namespace svm
