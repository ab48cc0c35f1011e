#include "log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>

#include "deadline.hpp"
#include "error.hpp"
#include "proc.hpp"

namespace svm::log {

namespace {

spdlog::level::level_enum to_spdlog(Level l) {
    switch (l) {
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    }
    return spdlog::level::info;
}

// A literal for an spdlog pattern.
std::string literal(const std::string& s) {
    std::string out;
    for (char c : s) {
        out += c;
        if (c == '%') out += '%';
    }
    return out;
}

std::unique_ptr<spdlog::formatter> formatter(const std::string& pattern, const std::string& eol = "\n") {
    return std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::local, eol);
}

void write_all(int fd, const char* data, size_t size) {
    for (size_t off = 0; off < size;) {
        ssize_t w = ::write(fd, data + off, size - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) SVM_THROW_ERRNO("write");
        off += static_cast<size_t>(w);
    }
}

std::string now_iso() {
    char buf[64];
    time_t t = ::time(nullptr);
    struct tm tm;
    ::localtime_r(&t, &tm);
    ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
    return buf;
}

// A directory we may write root's files into: a real directory (not a
// symlink), ours, and not writable by anybody else.
UniqueFd open_private_dir(int at, const std::string& name, const std::string& shown) {
    UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
        if (errno == ELOOP || errno == ENOTDIR) SVM_THROW(shown + " is a symlink or not a directory");
        SVM_THROW_ERRNO("open " + shown);
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) SVM_THROW_ERRNO("stat " + shown);
    if (st.st_uid != ::geteuid())
        SVM_THROW(shown + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
                  std::to_string(::geteuid()));
    if (st.st_mode & (S_IWGRP | S_IWOTH)) SVM_THROW(shown + " may be written by others than its owner");
    return fd;
}

// Appends to <log_dir>/<node>/job_<id>.log, opened on the first line.
class JobFileSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
    JobFileSink(std::string log_dir, std::string node, uint32_t job, bool to_syslog, bool to_stderr)
        : log_dir_(std::move(log_dir)),
          node_(std::move(node)),
          job_(job),
          to_syslog_(to_syslog),
          to_stderr_(to_stderr) {}

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        if (failed_) return;
        try {
            if (!fd_) fd_ = open_job_log(log_dir_, node_, job_log_name(job_));
            spdlog::memory_buf_t buf;
            formatter_->format(msg, buf);
            write_all(fd_.get(), buf.data(), buf.size());
        } catch (const Error& e) {
            // Reported once, past the logger (its sinks hold no lock of ours).
            failed_ = true;
            std::string why = "job " + std::to_string(job_) + ": no per-job log file: " + e.chain();
            if (to_syslog_) ::syslog(LOG_WARNING, "%s", why.c_str());
            if (to_stderr_) std::fprintf(stderr, "slurm-vm: %s\n", why.c_str());
        }
    }
    void flush_() override {}

private:
    std::string log_dir_, node_;
    uint32_t job_;
    bool to_syslog_, to_stderr_;
    UniqueFd fd_;
    bool failed_ = false;
};

std::mutex g_mutex;
std::shared_ptr<spdlog::logger> g_logger;
Setup g_setup;

std::shared_ptr<spdlog::logger> logger() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_logger) {
        auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
        err->set_formatter(formatter("slurm-vm: %v"));
        g_logger = std::make_shared<spdlog::logger>("slurm-vm", err);
        g_logger->set_level(spdlog::level::debug);
        g_logger->flush_on(spdlog::level::debug);
    }
    return g_logger;
}

}  // namespace

std::string job_tag(uint32_t job_id, const std::string& node) {
    std::string t = job_id ? "job " + std::to_string(job_id) : "";
    if (!node.empty()) t += (t.empty() ? "" : " on ") + node;
    return t;
}

std::string file_pattern(const Setup& s) {
    std::string tag = job_tag(s.job_id, s.node);
    return "%Y-%m-%dT%H:%M:%S.%e%z " + literal(s.program) + "[%P] %l: " + (tag.empty() ? "" : literal(tag) + ": ") +
           "%v";
}

std::string syslog_pattern(const Setup& s) {
    std::string tag = job_tag(s.job_id, s.node);
    return (tag.empty() ? "" : literal(tag) + ": ") + "%v";
}

std::string stderr_pattern(const Setup& s) {
    return literal(s.stderr_prefix) + (s.job_id ? "job " + std::to_string(s.job_id) + ": " : "") + "%v";
}

void init(const Setup& s) {
    shutdown();  // an old syslog sink closes the log when it goes: before the new one opens it
    std::vector<spdlog::sink_ptr> sinks;
    if (s.syslog) {
        auto sys = std::make_shared<spdlog::sinks::syslog_sink_mt>(s.program, LOG_PID, LOG_DAEMON, true);
        sys->set_formatter(formatter(syslog_pattern(s), ""));
        sys->set_level(spdlog::level::info);
        sinks.push_back(sys);
    }
    if (s.to_stderr) {
        auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
        err->set_formatter(formatter(stderr_pattern(s)));
        err->set_level(to_spdlog(s.stderr_level));
        sinks.push_back(err);
    }
    auto l = std::make_shared<spdlog::logger>(s.program, sinks.begin(), sinks.end());
    l->set_level(spdlog::level::debug);
    l->flush_on(spdlog::level::debug);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_logger = l;
    g_setup = s;
}

void add_job_file(const std::string& log_dir) {
    auto l = logger();
    Setup s;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        s = g_setup;
    }
    if (!s.job_id || s.node.empty()) return;
    auto f = std::make_shared<JobFileSink>(log_dir, s.node, s.job_id, s.syslog, s.to_stderr);
    f->set_formatter(formatter(file_pattern(s)));
    f->set_level(spdlog::level::debug);
    l->sinks().push_back(f);
}

void shutdown() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_logger) g_logger->flush();
    g_logger.reset();
}

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (2 to 4 bytes: no
// overlong form, no surrogate, at most U+10FFFF) and its code point; 0 if none.
size_t utf8_sequence(const std::string& s, size_t i, uint32_t& cp) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    size_t n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    cp = b & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
        unsigned char c = static_cast<unsigned char>(s[i + k]);
        if ((c & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (c & 0x3f);
    }
    bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
    return n;
}

}  // namespace

std::string neutralise(const std::string& text, bool keep_newlines) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        unsigned char u = static_cast<unsigned char>(text[i]);
        if (u < 0x80) {
            bool keep = (u >= 0x20 && u != 0x7f) || (keep_newlines && (u == '\n' || u == '\t'));
            out += keep ? text[i] : '?';
            ++i;
            continue;
        }
        uint32_t cp = 0;
        size_t n = utf8_sequence(text, i, cp);
        // C1 controls (U+0080..U+009F, CSI among them) and bytes that are not
        // UTF-8 (a lone 0x9b is CSI to an 8-bit terminal) become '?'.
        if (n == 0 || cp < 0xa0) {
            out += '?';
            i += n == 0 ? 1 : n;
            continue;
        }
        out.append(text, i, n);
        i += n;
    }
    return out;
}

std::string one_line(const std::string& message) {
    std::string out = trim(message);
    for (size_t pos = 0; (pos = out.find('\n', pos)) != std::string::npos;) out.replace(pos, 1, " | ");
    return neutralise(out, false);
}

void write(Level level, const std::string& message) {
    std::string m = message.find('\n') == std::string::npos ? neutralise(message, false) : one_line(message);
    logger()->log(to_spdlog(level), spdlog::string_view_t(m.data(), m.size()));
}

void error(const Error& e) {
    write(Level::error, e.chain());
    std::string t = e.trace(), line;
    for (char c : t) {
        if (c == '\n') {
            if (!line.empty()) write(Level::debug, "  at " + line);
            line.clear();
        } else {
            line += c;
        }
    }
    if (!line.empty()) write(Level::debug, "  at " + line);
}

std::string job_log_name(uint32_t job_id) { return "job_" + std::to_string(job_id) + ".log"; }
std::string job_console_name(uint32_t job_id) { return "job_" + std::to_string(job_id) + ".console.log"; }

UniqueFd open_job_log(const std::string& log_dir, const std::string& node, const std::string& name) {
    if (log_dir.empty() || log_dir[0] != '/') SVM_THROW("log_dir \"" + log_dir + "\" is not an absolute path");
    for (const std::string& c : {node, name})
        if (c.empty() || c == "." || c == ".." || c.find('/') != std::string::npos)
            SVM_THROW("\"" + c + "\" is not a file name");
    mkdir_p(log_dir, 0750);
    UniqueFd top = open_private_dir(AT_FDCWD, log_dir, log_dir);
    std::string dir = path_join(log_dir, node);
    if (::mkdirat(top.get(), node.c_str(), 0750) == 0) {
        if (::fchmodat(top.get(), node.c_str(), 0750, 0) != 0) SVM_THROW_ERRNO("chmod " + dir);
    } else if (errno != EEXIST) {
        SVM_THROW_ERRNO("mkdir " + dir);
    }
    UniqueFd d = open_private_dir(top.get(), node, dir);
    std::string path = path_join(dir, name);
    const int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    UniqueFd f(::openat(d.get(), name.c_str(), flags | O_CREAT | O_EXCL, 0640));
    if (f) {
        if (::fchmod(f.get(), 0640) != 0) SVM_THROW_ERRNO("chmod " + path);
    } else if (errno == EEXIST) {
        f = UniqueFd(::openat(d.get(), name.c_str(), flags));
        if (!f && errno == ELOOP) SVM_THROW(path + " is a symlink");
        if (!f) SVM_THROW_ERRNO("open " + path);
    } else {
        SVM_THROW_ERRNO("create " + path);
    }
    struct stat st;
    if (::fstat(f.get(), &st) != 0) SVM_THROW_ERRNO("stat " + path);
    if (!S_ISREG(st.st_mode)) SVM_THROW(path + " is not a regular file");
    if (st.st_uid != ::geteuid())
        SVM_THROW(path + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
                  std::to_string(::geteuid()));
    if (st.st_nlink != 1) SVM_THROW(path + " has " + std::to_string(st.st_nlink) + " links");
    int fl = ::fcntl(f.get(), F_GETFL);
    if (fl >= 0) ::fcntl(f.get(), F_SETFL, fl & ~O_NONBLOCK);
    return f;
}

std::string printable(const std::string& text) {
    std::string no_cr;
    no_cr.reserve(text.size());
    for (char c : text)
        if (c != '\r') no_cr += c;
    return neutralise(no_cr, true);
}

std::string read_console(const std::string& console_log, size_t max_bytes) {
    UniqueFd in(::open(console_log.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (!in) SVM_THROW_ERRNO("open " + console_log);
    struct stat st;
    if (::fstat(in.get(), &st) != 0) SVM_THROW_ERRNO("stat " + console_log);
    if (!S_ISREG(st.st_mode)) SVM_THROW(console_log + " is not a regular file");
    off_t size = st.st_size;
    off_t from = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
    if (::lseek(in.get(), from, SEEK_SET) < 0) SVM_THROW_ERRNO("seek " + console_log);
    std::string text;
    char buf[65536];
    while (text.size() < max_bytes) {
        ssize_t n = ::read(in.get(), buf, std::min(sizeof buf, max_bytes - text.size()));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) SVM_THROW_ERRNO("read " + console_log);
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    return printable(text);
}

std::string keep_console(const std::string& console_log, const std::string& log_dir, const std::string& node,
                         uint32_t job_id, size_t max_bytes) {
    std::string text = read_console(console_log, max_bytes);
    if (text.empty()) return "";
    struct stat st;
    bool cut = ::stat(console_log.c_str(), &st) == 0 && st.st_size > static_cast<off_t>(max_bytes);
    std::string name = job_console_name(job_id);
    UniqueFd out = open_job_log(log_dir, node, name);
    std::string header = "=== console of the guest of job " + std::to_string(job_id) + " on " + node + ", kept " +
                         now_iso() + (cut ? " (last " + std::to_string(max_bytes) + " bytes)" : "") + " ===\n";
    if (text.back() != '\n') text += '\n';
    write_all(out.get(), header.data(), header.size());
    write_all(out.get(), text.data(), text.size());
    return path_join(path_join(log_dir, node), name);
}

std::vector<std::string> prune_job_logs(const std::string& node_log_dir, int keep_days, const std::set<uint32_t>& keep,
                                        time_t now, bool dry_run) {
    std::vector<std::string> out;
    if (keep_days <= 0) return out;
    UniqueFd d(::open(node_log_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d) {
        if (errno == ENOENT) return out;
        SVM_THROW_ERRNO("open " + node_log_dir);
    }
    const time_t cutoff = now - static_cast<time_t>(keep_days) * 86400;
    for (const auto& name : list_dir(node_log_dir)) {
        // job_<digits>.log or job_<digits>.console.log, nothing else.
        if (name.rfind("job_", 0) != 0) continue;
        size_t digits = name.find_first_not_of("0123456789", 4);
        if (digits == 4 || digits == std::string::npos || digits - 4 > 10) continue;
        std::string rest = name.substr(digits);
        if (rest != ".log" && rest != ".console.log") continue;
        unsigned long id = std::stoul(name.substr(4, digits - 4));
        if (id > UINT32_MAX || keep.count(static_cast<uint32_t>(id))) continue;
        struct stat st;
        if (::fstatat(d.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(st.st_mode) || st.st_mtime > cutoff) continue;
        if (!dry_run && ::unlinkat(d.get(), name.c_str(), 0) != 0 && errno != ENOENT)
            SVM_THROW_ERRNO("remove " + path_join(node_log_dir, name));
        out.push_back(name);
    }
    return out;
}

std::string tail_lines(const std::string& text, size_t lines) {
    if (lines == 0 || text.empty()) return "";
    size_t end = text.size();
    if (text[end - 1] == '\n') --end;
    size_t pos = end, seen = 0;
    while (pos > 0) {
        if (text[pos - 1] == '\n' && ++seen == lines) break;
        --pos;
    }
    return text.substr(pos, end - pos) + "\n";
}

Steps::Steps() : last_ms_(now_ms()) {}

void Steps::done(const std::string& what) {
    long now = now_ms();
    debug(what + " (" + std::to_string(now - last_ms_) + " ms)");
    last_ms_ = now;
}

}  // namespace svm::log
