// What the unit tests share, in one place: a temporary directory that goes
// away with the test however it ends, a listening socket, and the message of
// a failing call.
#pragma once
#include <functional>
#include <string>

#include "fs.hpp"

namespace svm::test {

// A new directory /tmp/PREFIX-XXXXXX, mode 0755 (other users, such as the
// identity a test switches to, can reach what it holds); removed with all
// it holds when the object goes, a failed REQUIRE included.
class TempDir {
public:
    explicit TempDir(const char* prefix = "svm-test");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// A Unix stream socket listening at path (close-on-exec), for a test's
// stand-in of a daemon; throws if it cannot be made.
UniqueFd listening_socket(const std::string& path);

// The chain (Error::chain) of the svm::Error that fn throws; "" when none.
std::string error_of(const std::function<void()>& fn);
// Its first sentence (Error::reason: what a user is told); "" when none.
std::string reason_of(const std::function<void()>& fn);

}  // namespace svm::test
