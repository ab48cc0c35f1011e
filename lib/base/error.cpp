#include "error.hpp"

#include <cerrno>
#include <cstring>

namespace svm {

Error::Error(std::string message, const char* file, int line, const char* function) : std::runtime_error(message) {
    frames_.push_back({std::move(message), file, line, function});
    what_ = chain();
}

void Error::add_context(std::string message, const char* file, int line, const char* function) {
    frames_.push_back({std::move(message), file, line, function});
    what_ = chain();
}

std::string Error::chain() const {
    std::string out;
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
        if (!out.empty()) out += ": ";
        out += it->message;
    }
    return out;
}

std::string Error::trace() const {
    std::string out;
    for (const auto& f : frames_) {
        out += f.message + " (" + f.file + ":" + std::to_string(f.line) + " in " + f.function + ")\n";
    }
    return out;
}

std::string errno_message(const std::string& what, int err) { return what + ": " + std::strerror(err); }

std::string errno_message(const std::string& what) { return errno_message(what, errno); }

}  // namespace svm
