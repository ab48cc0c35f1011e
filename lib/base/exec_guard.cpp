#include "exec_guard.hpp"

#include <elf.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace svm {

namespace {

// Up to n bytes from the start of a file (root's or the system's).
std::string head_of(const std::string& path, size_t n) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return "";
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
        ssize_t r = ::read(fd, &out[got], n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    ::close(fd);
    out.resize(got);
    return out;
}

bool add_rule(int ruleset, const std::string& path) {
    int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return false;
    struct landlock_path_beneath_attr pb {};
    pb.allowed_access = LANDLOCK_ACCESS_FS_EXECUTE;
    pb.parent_fd = fd;
    long rc = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    ::close(fd);
    return rc == 0;
}

}  // namespace

std::string allow_exec_only(const std::vector<std::string>& paths) {
    struct landlock_ruleset_attr attr {};
    attr.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE;
    long rs = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (rs < 0) return std::string("Landlock is not available: ") + std::strerror(errno);
    int ruleset = static_cast<int>(rs);
    for (const auto& p : paths)
        if (!p.empty()) add_rule(ruleset, p);
    std::string why;
    if (::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
        // Without CAP_SYS_ADMIN the kernel wants no_new_privs first.
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
            why = std::string("cannot restrict execution: ") + std::strerror(errno);
    }
    ::close(ruleset);
    return why;
}

std::string elf_interpreter(const std::string& program) {
    std::string b = head_of(program, 64 * 1024);
    if (b.size() < sizeof(Elf64_Ehdr) || b.compare(0, SELFMAG, ELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64) return "";
    Elf64_Ehdr eh;
    std::memcpy(&eh, b.data(), sizeof eh);
    for (size_t i = 0; i < eh.e_phnum; ++i) {
        size_t off = eh.e_phoff + i * sizeof(Elf64_Phdr);
        if (eh.e_phentsize != sizeof(Elf64_Phdr) || off + sizeof(Elf64_Phdr) > b.size()) return "";
        Elf64_Phdr ph;
        std::memcpy(&ph, b.data() + off, sizeof ph);
        if (ph.p_type != PT_INTERP) continue;
        if (ph.p_offset >= b.size() || ph.p_filesz > b.size() - ph.p_offset) return "";
        std::string s = b.substr(ph.p_offset, ph.p_filesz);
        return s.substr(0, s.find('\0'));
    }
    return "";
}

std::string find_in_path(const std::string& name, const std::string& path) {
    size_t pos = 0;
    while (pos <= path.size()) {
        size_t end = path.find(':', pos);
        if (end == std::string::npos) end = path.size();
        std::string f = path.substr(pos, end - pos) + "/" + name;
        if (end > pos && ::access(f.c_str(), X_OK) == 0) return f;
        pos = end + 1;
    }
    return "";
}

std::vector<std::string> script_interpreters(const std::string& script, const std::string& path) {
    std::string b = head_of(script, 256);
    if (b.compare(0, 2, "#!") != 0) return {};
    std::string line = b.substr(2, b.find('\n') == std::string::npos ? std::string::npos : b.find('\n') - 2);
    size_t s = line.find_first_not_of(" \t");
    if (s == std::string::npos) return {};
    size_t e = line.find_first_of(" \t", s);
    std::vector<std::string> out{line.substr(s, e == std::string::npos ? std::string::npos : e - s)};
    if (e != std::string::npos && out[0].size() >= 4 && out[0].compare(out[0].size() - 4, 4, "/env") == 0) {
        size_t a = line.find_first_not_of(" \t", e);
        if (a != std::string::npos) {
            std::string arg = line.substr(a, line.find_first_of(" \t", a) - a);
            if (!arg.empty() && arg[0] != '-') out.push_back(arg[0] == '/' ? arg : find_in_path(arg, path));
        }
    }
    return out;
}

}  // namespace svm
