// One error type for the whole project: a message plus a trace of where it was
// raised and which callers added context on the way up.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace svm {

struct ErrorFrame {
    std::string message;
    std::string file;
    int line = 0;
    std::string function;
};

class Error : public std::runtime_error {
public:
    Error(std::string message, const char* file, int line, const char* function);

    // Adds context from a caller ("preparing job 42: ...").
    void add_context(std::string message, const char* file, int line, const char* function);

    // The first (innermost) message: the one sentence a user sees.
    const std::string& reason() const { return frames_.front().message; }
    // Outermost context first: "prolog job 42: create overlay: open x: Permission denied".
    std::string chain() const;
    // Multi-line trace with file:line for logs.
    std::string trace() const;
    const std::vector<ErrorFrame>& frames() const { return frames_; }
    const char* what() const noexcept override { return what_.c_str(); }

private:
    std::vector<ErrorFrame> frames_;
    std::string what_;
};

// The job's request or the user's guest is at fault (a bad image, a path,
// an option, an address another job holds): the job fails with reason()
// and the node stays up. Every other Error is the node's: it drains. The
// prolog decides by this type alone (vm_job.cpp, prepare_job).
class UserError : public Error {
public:
    using Error::Error;
    // The same sentence, now known to be the user's.
    explicit UserError(const Error& e) : Error(e) {}
};

// "open /x: No such file or directory" for the current errno.
std::string errno_message(const std::string& what, int err);
std::string errno_message(const std::string& what);

}  // namespace svm

#define SVM_THROW(msg) throw ::svm::Error((msg), __FILE__, __LINE__, __func__)
#define SVM_THROW_ERRNO(what) throw ::svm::Error(::svm::errno_message(what), __FILE__, __LINE__, __func__)
#define SVM_REFUSE(msg) throw ::svm::UserError((msg), __FILE__, __LINE__, __func__)
#define SVM_CONTEXT(err, msg) (err).add_context((msg), __FILE__, __LINE__, __func__)
