#include "vm_save.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "deadline.hpp"
#include "dev_acl.hpp"
#include "embed_root.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "image_check.hpp"
#include "log.hpp"
#include "proc.hpp"
#include "user_open.hpp"
#include "vm_job.hpp"

namespace svm {

namespace {
std::string dir_of(const std::string& path) {
    auto pos = path.rfind('/');
    return pos == 0 ? "/" : path.substr(0, pos);
}
std::string base_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }
}  // namespace

void check_save_path(const std::string& path) {
    if (path.empty() || path[0] != '/') SVM_THROW("--vm-save needs an absolute path (" + path + ")");
    if (path.size() > 1023) SVM_THROW("the --vm-save path is longer than 1023 bytes");
    if (path.find('\n') != std::string::npos || path.find('\r') != std::string::npos)
        SVM_THROW("the --vm-save path must be a single line");
    if (path.back() == '/') SVM_THROW("--vm-save=" + path + " names a directory; name the image file to write");
    std::string b = base_of(path);
    if (b == "." || b == ".." || path.find("/../") != std::string::npos || path.find("/./") != std::string::npos)
        SVM_THROW("--vm-save=" + path + " must name the file directly (no \".\" or \"..\" components)");
}

void check_save_path_as_self(const std::string& path) {
    check_save_path(path);
    std::string dir = dir_of(path);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            SVM_THROW("--vm-save=" + path + ": the directory " + dir + " does not exist");
        SVM_THROW("--vm-save=" + path + ": you cannot create files in " + dir + " (" + std::strerror(errno) + ")");
    }
    if (!S_ISDIR(st.st_mode)) SVM_THROW("--vm-save=" + path + ": " + dir + " is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        SVM_THROW("--vm-save=" + path + ": you cannot create files in " + dir + " (" + std::strerror(errno) + ")");
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        SVM_THROW("--vm-save=" + path + " exists and is not a regular file");
}

std::string save_temp_path(const std::string& path, uint32_t job_id) {
    std::string dir = dir_of(path);
    return path_join(dir, "." + base_of(path) + ".slurm-vm-save." + std::to_string(job_id));
}

int save_bound_s(int configured_s, int prolog_epilog_timeout_s) {
    int bound = std::max(1, configured_s);
    // Slurm's 65534 (and 0) is "no limit"; else the save leaves the epilog
    // half of Slurm's time, and at least two minutes, for the rest.
    if (prolog_epilog_timeout_s > 0 && prolog_epilog_timeout_s < 65534) {
        int left = std::max(prolog_epilog_timeout_s / 2, prolog_epilog_timeout_s - 120);
        bound = std::min(bound, std::max(1, left));
    }
    return bound;
}

std::string save_image_opts(const std::string& overlay, const std::string& base_format, int base_fd) {
    std::string escaped;  // QEMU's option syntax: a comma in a value is doubled
    for (char c : overlay) {
        escaped += c;
        if (c == ',') escaped += ',';
    }
    return "driver=qcow2,file.driver=file,file.filename=" + escaped + ",backing.driver=" + base_format +
           ",backing.file.driver=file,backing.file.filename=/dev/fd/" + std::to_string(base_fd);
}

namespace {

constexpr int kBaseFd = 3, kTargetFd = 4;
constexpr size_t kErrCap = 4096;  // of qemu-img's stderr kept for the user's sentence

int left_ms(const Deadline& deadline) { return std::max(1, deadline.remaining_ms()); }

// What the save's process made: the temporary file (its name in PATH's
// directory and its identity, so that only that very file is renamed or
// removed later), and how qemu-img ended.
struct SaveRun {
    bool created = false;
    std::string tmp;  // a name in the directory
    uint64_t dev = 0, ino = 0;
    int status = -1;  // exit status or 128+signal
    bool timed_out = false;
    std::string err;
};

struct Report {
    uint32_t index;
    uint64_t dev, ino;
};

// Everything the child needs, made before fork: it allocates nothing.
struct ChildPlan {
    std::vector<std::string> argv_s, env_s, names;
    std::vector<char*> argv, envp;
    std::vector<gid_t> groups;
    uid_t uid = 0;
    gid_t gid = 0;
    int base_fd = -1, dir_fd = -1, report_fd = -1, err_fd = -1;
};

std::vector<char*> pointers(std::vector<std::string>& v) {
    std::vector<char*> out;
    for (auto& s : v) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

[[noreturn]] void child_fail(int err_fd, const char* what, int status) {
    const char* e = std::strerror(errno);  // glibc's table: no allocation
    (void)!::write(err_fd, what, std::strlen(what));
    (void)!::write(err_fd, e, std::strlen(e));
    _exit(status);
}

// The save's process: a session (process group) of its own, the user's
// identity, the temporary file made new (O_EXCL: never one another member of
// a shared directory made first; O_NOFOLLOW: never through a link), then
// qemu-img with the checked image as descriptor 3 and the file as 4.
// Async-signal-safe calls only.
[[noreturn]] void save_child(const ChildPlan& c) {
    ::setsid();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (::setgroups(c.groups.size(), c.groups.data()) != 0 || ::setresgid(c.gid, c.gid, c.gid) != 0 ||
        ::setresuid(c.uid, c.uid, c.uid) != 0)
        child_fail(c.err_fd, "cannot become the user: ", 126);
    int fd = -1;
    uint32_t i = 0;
    for (; i < c.names.size(); ++i) {
        fd = ::openat(c.dir_fd, c.names[i].c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) child_fail(c.err_fd, "cannot create a new file in the directory: ", 125);
    struct stat st {};
    if (::fstat(fd, &st) != 0) child_fail(c.err_fd, "fstat: ", 125);
    Report r{i, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
    if (::write(c.report_fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(125);
    int base = ::fcntl(c.base_fd, F_DUPFD_CLOEXEC, 10), target = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (base < 0 || target < 0 || null < 0 || ::dup2(base, kBaseFd) < 0 || ::dup2(target, kTargetFd) < 0 ||
        ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(c.err_fd, 2) < 0)
        child_fail(c.err_fd, "descriptors: ", 125);
    ::execve(c.argv[0], c.argv.data(), c.envp.data());
    child_fail(2, "exec qemu-img: ", 127);
}

std::vector<std::string> temp_names(const std::string& path, uint32_t job_id) {
    std::vector<std::string> out;
    std::string prefix = base_of(save_temp_path(path, job_id)) + ".";
    for (int i = 0; i < 8; ++i) {
        uint64_t r = 0;
        if (::getrandom(&r, sizeof r, 0) != sizeof r) SVM_THROW_ERRNO("getrandom");
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
        out.push_back(prefix + hex);
    }
    return out;
}

// Reads the child's report and stderr (kErrCap kept) until both end or the
// deadline; at the deadline its whole process group is killed.
void collect_save(pid_t pid, int report, int err, const Deadline& deadline, const ChildPlan& c, SaveRun& out) {
    char buf[4096];
    Report rep{};
    size_t got = 0;
    while (report >= 0 || err >= 0) {
        if (deadline.expired()) {
            out.timed_out = true;
            ::kill(-pid, SIGKILL);
            break;
        }
        struct pollfd p[2] = {{report, POLLIN, 0}, {err, POLLIN, 0}};
        if (::poll(p, 2, std::min(deadline.remaining_ms(), 1000)) <= 0) continue;
        for (int k = 0; k < 2; ++k) {
            int& fd = k == 0 ? report : err;
            if (fd < 0 || !p[k].revents) continue;
            ssize_t n = k == 0 ? ::read(fd, reinterpret_cast<char*>(&rep) + got, sizeof rep - got)
                               : ::read(fd, buf, sizeof buf);
            if (n <= 0) {
                ::close(fd);
                fd = -1;
            } else if (k == 0) {
                got += static_cast<size_t>(n);
            } else if (out.err.size() < kErrCap) {
                out.err.append(buf, std::min(static_cast<size_t>(n), kErrCap - out.err.size()));
            }
        }
    }
    for (int fd : {report, err})
        if (fd >= 0) ::close(fd);
    if (got == sizeof rep && rep.index < c.names.size()) {
        out.created = true;
        out.tmp = c.names[rep.index];
        out.dev = rep.dev;
        out.ino = rep.ino;
    }
}

// Waits for the child, a few seconds at most after a kill (a process stuck
// in the kernel is left to init).
void reap_save(pid_t pid, const Deadline& deadline, SaveRun& out) {
    auto reaped = [&] {
        int st = 0;
        pid_t w = ::waitpid(pid, &st, WNOHANG);
        if (w == pid) out.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return w == pid || (w < 0 && errno != EINTR);
    };
    constexpr Milliseconds kGrace(5000), kPoll(20);
    if (poll_until(Deadline(std::max(deadline.at(), Deadline::Clock::now()) + kGrace), kPoll, reaped)) return;
    if (!out.timed_out) {
        out.timed_out = true;
        ::kill(-pid, SIGKILL);
        if (poll_until(Deadline(kGrace), kPoll, reaped)) return;
    }
    log::warn("the save's qemu-img (pid " + std::to_string(pid) + ") did not end after SIGKILL");
}

SaveRun run_save(const Credentials& who, const std::vector<std::string>& argv, int base_fd, int dir_fd,
                 const std::string& path, uint32_t job_id, const Deadline& deadline) {
    ChildPlan c;
    c.argv_s = argv;
    c.env_s = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
    c.names = temp_names(path, job_id);
    c.argv = pointers(c.argv_s);
    c.envp = pointers(c.env_s);
    c.groups = who.groups.empty() ? std::vector<gid_t>{who.gid} : who.groups;
    c.uid = who.uid;
    c.gid = who.gid;
    c.base_fd = base_fd;
    c.dir_fd = dir_fd;
    int rp[2], ep[2];
    if (::pipe2(rp, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
    if (::pipe2(ep, O_CLOEXEC) != 0) {
        ::close(rp[0]);
        ::close(rp[1]);
        SVM_THROW_ERRNO("pipe");
    }
    c.report_fd = rp[1];
    c.err_fd = ep[1];
    pid_t pid = ::fork();
    if (pid == 0) save_child(c);
    ::close(rp[1]);
    ::close(ep[1]);
    if (pid < 0) {
        ::close(rp[0]);
        ::close(ep[0]);
        SVM_THROW_ERRNO("fork");
    }
    SaveRun out;
    collect_save(pid, rp[0], ep[0], deadline, c, out);
    reap_save(pid, deadline, out);
    return out;
}

// As the user: the temporary file, if it is still the one the save made,
// renamed to PATH (rename) or removed.
bool finish_temp(const Credentials& who, int dir_fd, const SaveRun& s, const std::string& final_name,
                 const Deadline& deadline, int& err) {
    RunResult r = run_function_as(
        who,
        [&](int) {
            struct stat st {};
            if (::fstatat(dir_fd, s.tmp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
                return errno == ENOENT && final_name.empty() ? 0 : errno;
            if (static_cast<uint64_t>(st.st_dev) != s.dev || static_cast<uint64_t>(st.st_ino) != s.ino) return EEXIST;
            int rc = final_name.empty() ? ::unlinkat(dir_fd, s.tmp.c_str(), 0)
                                        : ::renameat(dir_fd, s.tmp.c_str(), dir_fd, final_name.c_str());
            return rc == 0 ? 0 : errno;
        },
        std::min(left_ms(deadline), 30000));
    err = r.timed_out ? ETIMEDOUT : (r.status > 0 && r.status < 128 ? r.status : (r.ok() ? 0 : EIO));
    return r.ok();
}

// PATH's directory, opened as the user (the temporary file and the rename
// are made relative to it).
UniqueFd open_dir_as_user(const std::string& dir, const Credentials& who, const Deadline& deadline,
                          const std::string& what) {
    std::vector<UserOpen> f(1);
    f[0].path = dir;
    f[0].kind = UserOpen::Kind::directory;
    if (!open_as_user(who, f, std::min(left_ms(deadline), 30000)))
        SVM_THROW(what + "the directory " + dir + " did not answer; nothing was saved");
    if (f[0].failed != UserOpen::Failed::none)
        SVM_THROW(what + "the directory " + dir + " cannot be opened as " + who.user + " (" +
                  std::strerror(f[0].err ? f[0].err : ENOTDIR) + "); nothing was saved");
    return std::move(f[0].fd);
}

std::string failure_text(const SaveRun& s, int timeout_s) {
    if (s.timed_out)
        return " (it took longer than the " + std::to_string(timeout_s) + " s a save may take on this node)";
    std::string err = trim(s.err);
    for (char& c : err)
        if (c == '\n' || c == '\r') c = ' ';
    if (err.size() > 300) err = err.substr(0, 300) + "...";
    return ": " + (err.empty() ? "qemu-img exited with status " + std::to_string(s.status) : err);
}

}  // namespace

void save_guest_disk(const JobPlan& p, const std::string& qemu_img, int timeout_s) {
    check_save_path(p.save_path);
    const Deadline deadline{Milliseconds(static_cast<long>(std::max(1, timeout_s)) * 1000)};
    const std::string what = "--vm-save=" + p.save_path + ": ";
    // 1. The guest is over: nothing may write the overlay while it is read.
    stop_recorded_process(p.keeper_pid_file(), keeper_mark(p.job_id), 8000);
    stop_recorded_process(qemu_pid_file(p.embed_root(), p.domain_name), qemu_mark(p.domain_name), 0);
    std::string overlay = p.overlay();
    if (!path_exists(overlay)) SVM_THROW("the guest's disk on " + p.node + " is gone; nothing was saved");
    // 2. The image below the overlay: opened again as the user and compared
    // with the file the prolog checked; qemu-img reads it through that
    // descriptor (/dev/fd/3), never by the path, which the user may have
    // replaced since (with a FIFO, whose open blocks).
    Credentials who = credentials_for(p.uid, p.gid);
    UniqueFd base;
    try {
        base = reopen_checked_as_user(p.image, who, p.image_identity, std::min(left_ms(deadline), 30000));
    } catch (const Error& e) {
        SVM_THROW(what + "nothing was saved: " + e.reason());
    }
    UniqueFd dir = open_dir_as_user(dir_of(p.save_path), who, deadline, what);
    // 3. The user reads the overlay (their guest's own data), nothing else of
    // the job's: an ACL entry on it and pass-through on its directory, both
    // removed with the overlay by the epilog right after.
    if (!p.overlay_dir.empty()) grant_user(p.overlay_dir, p.uid, 1);
    grant_user(overlay, p.uid, 4);
    // 4. qemu-img as the user, into a new file of the user's next to PATH,
    // within the deadline; then renamed over PATH (also as the user).
    std::vector<std::string> argv{qemu_img,
                                  "convert",
                                  "-q",
                                  "-t",
                                  "writeback",
                                  "--image-opts",
                                  save_image_opts(overlay, p.image_format.empty() ? "raw" : p.image_format, kBaseFd),
                                  "-O",
                                  "qcow2",
                                  "/dev/fd/" + std::to_string(kTargetFd)};
    SaveRun s = run_save(who, argv, base.get(), dir.get(), p.save_path, p.job_id, deadline);
    const Deadline tidy_by = deadline.extended(Milliseconds(30000));  // the temporary file's rename or removal
    int err = 0;
    if (s.status != 0 || s.timed_out) {
        if (s.created && !finish_temp(who, dir.get(), s, "", tidy_by, err))
            log::warn(what + "the temporary file " + s.tmp + " could not be removed: " + std::strerror(err));
        SVM_THROW(what + "the guest's disk could not be written as " + p.user + failure_text(s, timeout_s));
    }
    if (!s.created || !finish_temp(who, dir.get(), s, base_of(p.save_path), tidy_by, err)) {
        int ignored = 0;
        if (s.created) finish_temp(who, dir.get(), s, "", tidy_by, ignored);
        SVM_THROW(what + "rename of the written image failed as " + p.user + ": " + std::strerror(err ? err : EIO));
    }
    log::info("the guest's disk was saved to " + p.save_path + " (as " + p.user + ")");
}

std::string save_note_path(const JobPlan& p) {
    return path_join(p.workdir.empty() ? p.home : p.workdir, "slurm-" + std::to_string(p.job_id) + ".vm-save.txt");
}

bool write_save_note(const JobPlan& p, const std::string& sentence) {
    std::string path = save_note_path(p), text = "slurm-vm: job " + std::to_string(p.job_id) + ": " + sentence + "\n";
    Credentials who = credentials_for(p.uid, p.gid);
    RunResult r = run_function_as(who, [&](int) {
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) return 1;
        bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        return ::close(fd) == 0 && ok ? 0 : 1;
    });
    if (!r.ok()) log::warn("could not tell " + p.user + " in " + path + " why the save failed");
    return r.ok();
}

}  // namespace svm
