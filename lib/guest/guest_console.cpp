#include "guest_console.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "error.hpp"
#include "log.hpp"

namespace svm {

bool console_allowed(uid_t caller, uid_t owner) { return caller == 0 || caller == owner; }

std::vector<std::string> console_srun_argv(uint32_t job_id, const std::string& node) {
    std::vector<std::string> a = {"srun", "--jobid=" + std::to_string(job_id), "--overlap", "--quiet", "-N1", "-n1"};
    if (node.empty()) a.push_back("--relative=0");
    else a.push_back("--nodelist=" + node);
    a.push_back("--vm-console");
    a.push_back("true");  // never run: the wrapper prints the console instead
    return a;
}

std::string read_console(int fd, size_t max_bytes) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) SVM_THROW_ERRNO("fstat of the console log");
    if (!S_ISREG(st.st_mode)) SVM_THROW("the console log is not a regular file");
    off_t start = st.st_size > static_cast<off_t>(max_bytes) ? st.st_size - static_cast<off_t>(max_bytes) : 0;
    std::string text;
    char buf[65536];
    off_t off = start;
    for (;;) {
        ssize_t n = ::pread(fd, buf, sizeof buf, off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) SVM_THROW_ERRNO("read the console log");
        if (n == 0 || text.size() >= max_bytes) break;
        text.append(buf, static_cast<size_t>(n));
        off += n;
    }
    if (text.size() > max_bytes) text.resize(max_bytes);
    if (start > 0) {
        auto nl = text.find('\n');
        text = nl == std::string::npos ? text : text.substr(nl + 1);
    }
    return log::printable(text);
}

uint32_t parse_job_id(const std::string& s) {
    if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
        SVM_THROW("\"" + s + "\" is not a job id");
    unsigned long v = std::stoul(s);
    if (v == 0 || v > 0xffffffffUL) SVM_THROW("\"" + s + "\" is not a job id");
    return static_cast<uint32_t>(v);
}

}  // namespace svm
