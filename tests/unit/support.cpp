#include "support.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <vector>

#include "error.hpp"
#include "fs.hpp"

namespace svm::test {

TempDir::TempDir(const char* prefix) {
    std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) SVM_THROW_ERRNO("mkdtemp " + tmpl);
    path_ = buf.data();
    if (::chmod(path_.c_str(), 0755) != 0) SVM_THROW_ERRNO("chmod " + path_);
}

TempDir::~TempDir() {
    try {
        remove_tree(path_);
    } catch (const Error&) {
        // a test that left something it could not remove: not worth a crash
    }
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.chain();
    }
    return "";
}

std::string reason_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.reason();
    }
    return "";
}

}  // namespace svm::test
