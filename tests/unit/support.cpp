#include "support.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstdlib>
#include <cstring>
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

UniqueFd listening_socket(const std::string& path) {
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) SVM_THROW("socket path too long: " + path);
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    UniqueFd l(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!l) SVM_THROW_ERRNO("socket");
    if (::bind(l.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) SVM_THROW_ERRNO("bind " + path);
    if (::listen(l.get(), 8) != 0) SVM_THROW_ERRNO("listen " + path);
    return l;
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
