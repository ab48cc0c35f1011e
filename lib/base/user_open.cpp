#include "user_open.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "error.hpp"

namespace svm {

namespace {

constexpr int kFileFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOCTTY | O_CLOEXEC;

// What the opener reads and writes: plain data, all made before it starts.
struct Slot {
    const char* path;
    bool directory;
    int fd;
    UserOpen::Failed failed;
    int err;
    struct stat st;
};

struct Job {
    uid_t uid;
    gid_t gid;
    bool set_groups;  // only root may (and must) set them
    const gid_t* groups;
    size_t ngroups;
    Slot* slots;
    size_t n;
    int done;  // set last: every slot has its outcome
};

void open_slot(Slot& s) {
    if (s.directory) {
        s.fd = ::open(s.path, kDirFlags);
        if (s.fd < 0) s.failed = UserOpen::Failed::open, s.err = errno;
        else ::fstat(s.fd, &s.st);
        return;
    }
    // Not opened unless a regular file: opening a device can have effects.
    if (::stat(s.path, &s.st) != 0) {
        s.failed = UserOpen::Failed::stat, s.err = errno;
        return;
    }
    if (!S_ISREG(s.st.st_mode)) {
        s.failed = UserOpen::Failed::not_regular;
        return;
    }
    int fd = ::open(s.path, kFileFlags);
    if (fd < 0) {
        s.failed = UserOpen::Failed::open, s.err = errno;
        return;
    }
    struct stat f;
    if (::fstat(fd, &f) != 0) s.failed = UserOpen::Failed::open, s.err = errno;
    else if (!S_ISREG(f.st_mode)) s.failed = UserOpen::Failed::not_regular, s.st = f;
    else if (f.st_dev != s.st.st_dev || f.st_ino != s.st.st_ino) s.failed = UserOpen::Failed::replaced;
    if (s.failed != UserOpen::Failed::none) ::close(fd);
    else s.fd = fd, s.st = f;
}

void open_slots(Job& j) {
    for (size_t i = 0; i < j.n; ++i) open_slot(j.slots[i]);
    j.done = 1;
}

// The opener in our memory: it becomes the user with the system calls
// themselves, not glibc's set*id, which would make every thread glibc knows
// of (ours: the memory is shared) change identity too.
__attribute__((no_sanitize("address"))) int shared_opener(void* arg) {
    Job& j = *static_cast<Job*>(arg);
    if (j.set_groups && ::syscall(SYS_setgroups, j.ngroups, j.groups) != 0) return 1;
    if (::syscall(SYS_setresgid, j.gid, j.gid, j.gid) != 0) return 1;
    if (::syscall(SYS_setresuid, j.uid, j.uid, j.uid) != 0) return 1;
    uid_t r = 0, e = 0, s = 0;
    if (::syscall(SYS_getresuid, &r, &e, &s) != 0 || r != j.uid || e != j.uid || s != j.uid) return 1;
    open_slots(j);
    return 0;
}

// What the opener's thread and the caller share. It outlives a caller that
// gave up: an opener killed inside a file system that took its request and
// never answers (a FUSE lookup) cannot die, and its thread, suspended by
// CLONE_VFORK, stays with it.
struct Opening {
    static constexpr size_t kStack = 64 * 1024;
    std::unique_ptr<char[]> stack{new char[kStack]};
    std::mutex m;
    std::condition_variable cv;
    pid_t tid = 0;
    bool started = false, abandoned = false;
    bool exited = false;    // the opener has ended (not yet reaped: its id is still its own)
    bool finished = false;  // and is reaped
    int clone_errno = 0;
};

constexpr int kKilledGraceMs = 2000;

// The opener's thread: clones it (suspended until it ends), reaps it.
void run_opener(const std::shared_ptr<Opening>& o, Job* j) {
    {
        std::lock_guard<std::mutex> l(o->m);
        if (o->abandoned) return;  // j is gone
        o->started = true;
    }
    pid_t pid = ::clone(shared_opener, o->stack.get() + Opening::kStack,
                        CLONE_VM | CLONE_FILES | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, j, &o->tid);
    int err = errno;
    {
        std::lock_guard<std::mutex> l(o->m);
        o->clone_errno = pid < 0 ? err : 0;
        o->exited = true;
    }
    while (pid > 0 && ::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> l(o->m);
    o->finished = true;
    o->cv.notify_all();
}

// Runs the opener on a thread of its own; false when it did not finish in
// timeout_ms. It is killed then; one that does not die within 2 s is left
// behind with its thread, and our memory stays undumpable (the user's
// process sharing it gives the user no way in).
bool in_shared_opener(Job& j, int timeout_ms) {
    auto o = std::make_shared<Opening>();
    int dumpable = ::prctl(PR_GET_DUMPABLE);
    std::thread(run_opener, o, &j).detach();
    std::unique_lock<std::mutex> l(o->m);
    bool in_time = o->cv.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return o->finished; });
    if (!in_time) {
        if (!o->started) o->abandoned = true;
        pid_t t = __atomic_load_n(&o->tid, __ATOMIC_SEQ_CST);
        if (t > 0 && !o->exited) ::kill(t, SIGKILL);
        if (!o->started || !o->cv.wait_for(l, std::chrono::milliseconds(kKilledGraceMs), [&] { return o->finished; }))
            return false;
    }
    // Becoming the user left our shared memory undumpable: as it was.
    if (dumpable >= 0) ::prctl(PR_SET_DUMPABLE, dumpable);
    if (o->clone_errno) SVM_THROW(errno_message("clone", o->clone_errno));
    if (!in_time) return false;
    if (!j.done) SVM_THROW("could not take the identity of uid " + std::to_string(j.uid) + " to open its files");
    return true;
}

// The same in a forked copy, which sends each slot back with its descriptor.
bool in_forked_opener(const Credentials& as, Job& j, int timeout_ms) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) SVM_THROW_ERRNO("socketpair");
    UniqueFd mine(sv[0]), theirs(sv[1]);
    RunResult r = run_function_as(
        as,
        [&](int) {
            ::close(mine.release());
            open_slots(j);
            for (size_t i = 0; i < j.n; ++i) {
                std::vector<int> fds;
                if (j.slots[i].fd >= 0) fds.push_back(j.slots[i].fd);
                send_with_fds(theirs.get(), std::string(reinterpret_cast<const char*>(&j.slots[i]), sizeof(Slot)), fds,
                              "send an opened file");
            }
            return 0;
        },
        timeout_ms);
    theirs = UniqueFd();
    if (r.timed_out) return false;
    if (r.status != 0)
        SVM_THROW("opening files as uid " + std::to_string(as.uid) + " failed (exit " + std::to_string(r.status) +
                  "): " + trim(r.err));
    for (size_t i = 0; i < j.n; ++i) {
        std::vector<UniqueFd> fds;
        std::string data = receive_with_fds(mine.get(), fds, sizeof(Slot), 1, "receive an opened file", true);
        if (data.size() != sizeof(Slot)) SVM_THROW("receive an opened file: malformed message");
        Slot got;
        std::memcpy(&got, data.data(), sizeof got);
        if ((got.fd >= 0) != (fds.size() == 1)) SVM_THROW("receive an opened file: malformed message");
        j.slots[i].failed = got.failed;
        j.slots[i].err = got.err;
        j.slots[i].st = got.st;
        j.slots[i].fd = got.fd >= 0 ? fds[0].release() : -1;
    }
    j.done = 1;
    return true;
}

// fs.suid_dumpable 1 ("debug"): a process that became a user stays
// traceable by that user. Anything unreadable counts as that.
bool setid_processes_traceable() {
    std::string v;
    try {
        if (!read_file_if_exists("/proc/sys/fs/suid_dumpable", v)) return true;
    } catch (const Error&) {
        return true;
    }
    return trim(v) != "0" && trim(v) != "2";
}

}  // namespace

bool open_as_user(const Credentials& as, std::vector<UserOpen>& files, int timeout_ms, Opener how) {
    std::vector<gid_t> groups = as.groups.empty() ? std::vector<gid_t>{as.gid} : as.groups;
    std::vector<Slot> slots(files.size());
    for (size_t i = 0; i < files.size(); ++i)
        slots[i] =
            Slot{files[i].path.c_str(), files[i].kind == UserOpen::Kind::directory, -1, UserOpen::Failed::none, 0, {}};
    Job j{as.uid, as.gid, ::geteuid() == 0, groups.data(), groups.size(), slots.data(), slots.size(), 0};
    if (how == Opener::by_node) how = setid_processes_traceable() ? Opener::forked : Opener::shared;
    bool ok = how == Opener::forked ? in_forked_opener(as, j, timeout_ms) : in_shared_opener(j, timeout_ms);
    for (size_t i = 0; i < files.size(); ++i) {
        UniqueFd fd(slots[i].fd);
        if (!ok) continue;  // closed: a half-done opening has no outcome
        files[i].fd = std::move(fd);
        files[i].failed = slots[i].failed;
        files[i].err = slots[i].err;
        files[i].st = slots[i].st;
    }
    return ok;
}

}  // namespace svm
