#include "srun_relay.hpp"

#include "guest_script.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <random>
#include <system_error>
#include <utility>

#include "deadline.hpp"
#include "error.hpp"
#include "exec_guard.hpp"
#include "fs.hpp"
#include "guest_signals.hpp"
#include "proc.hpp"
#include "srun_options.hpp"

namespace svm {

std::string guest_srun_shim() { return guest_script("srun.bash"); }

namespace {
// How the host's srun runs for the guest: in the batch step's environment
// (srun starts a step of this job) less the plugin's own variables of the
// batch task and what srun_env_refused names (twins of the options a guest
// may not give), in the guest's working directory when the host has it.
SpawnOptions srun_spawn_options(const std::string& cwd, int out_fd, int err_fd) {
    SpawnOptions o;
    o.env.emplace();
    for (char** e = environ; *e; ++e) {
        std::string v(*e);
        if (!srun_env_refused(v.substr(0, v.find('=')))) o.env->push_back(std::move(v));
    }
    o.cwd = cwd;
    o.cwd_missing_note = "srun: slurm-vm: " + cwd + " does not exist on the host; running in the job's directory\n";
    o.stdin_fd = SpawnOptions::kNull;
    o.stdout_fd = out_fd;
    o.stderr_fd = err_fd;
    o.default_signals = forwarded_signals();
    o.default_signals.push_back(SIGPIPE);
    o.exec_error = "srun: slurm-vm: cannot run srun on the host: ";
    return o;
}
}  // namespace

struct SrunRelay::Run {
    pid_t pid = -1;
    int out_fd = -1, err_fd = -1;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int status = 1;
};

struct SrunRelay::Runs {
    explicit Runs(std::string program) : srun(std::move(program)) {}
    void handle(int fd);
    void run_srun(int fd, const std::vector<std::string>& fields);
    void forget_ended();

    const std::string srun;
    std::mutex mu;
    std::map<std::string, std::shared_ptr<Run>> by_token;
};

namespace {

bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

bool write_all(int fd, const std::string& s) { return write_all(fd, s.data(), s.size()); }

void pump(int from, int to) {
    char buf[16384];
    for (;;) {
        ssize_t n = ::read(from, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (!write_all(to, buf, static_cast<size_t>(n))) break;
    }
}

std::string new_token() {
    std::random_device rd;
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    return buf;
}

}  // namespace

namespace {
std::string system_srun() {
    std::string f = find_in_path("srun", kTrustedPath);
    return f.empty() ? "/usr/bin/srun" : f;  // spawn reports it missing
}
}  // namespace

SrunRelay::SrunRelay(const std::string& tmp_dir, const std::string& srun)
    : runs_(std::make_shared<Runs>(srun.empty() ? system_srun() : srun)) {
    std::string tmpl = path_join(tmp_dir, "slurm-vm-srun.XXXXXX");
    std::vector<char> b(tmpl.begin(), tmpl.end());
    b.push_back('\0');
    if (!::mkdtemp(b.data())) SVM_THROW_ERRNO("mkdtemp " + tmpl);
    dir_ = b.data();
    socket_ = path_join(dir_, "srun.sock");
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) SVM_THROW_ERRNO("socket");
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    if (socket_.size() >= sizeof sa.sun_path) SVM_THROW("socket path too long: " + socket_);
    std::strcpy(sa.sun_path, socket_.c_str());
    if (::bind(listen_fd_, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa) != 0) SVM_THROW_ERRNO("bind " + socket_);
    if (::listen(listen_fd_, 16) != 0) SVM_THROW_ERRNO("listen " + socket_);
    if (::pipe2(stop_pipe_, O_CLOEXEC) != 0) SVM_THROW_ERRNO("pipe");
}

SrunRelay::~SrunRelay() {
    if (stop_pipe_[1] >= 0 && ::write(stop_pipe_[1], "x", 1) < 0) {
    }
    if (thread_.joinable()) thread_.join();
    for (auto& w : workers_) w.thread.detach();  // blocked on a guest that is going away; they hold runs_
    if (listen_fd_ >= 0) ::close(listen_fd_);
    for (int fd : stop_pipe_)
        if (fd >= 0) ::close(fd);
    ::unlink(socket_.c_str());
    ::rmdir(dir_.c_str());
}

void SrunRelay::start() {
    thread_ = std::thread([this] { serve(); });
}

void SrunRelay::serve() {
    for (;;) {
        struct pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (p[1].revents) return;
        int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        prune_workers();
        if (workers_.size() >= kMaxRelayConnections) {
            write_all(c, "ERR the guest has " + std::to_string(kMaxRelayConnections) +
                             " connections to the srun relay open already\n");
            ::close(c);
            continue;
        }
        auto done = std::make_shared<std::atomic<bool>>(false);
        try {
            workers_.push_back({std::thread([runs = runs_, c, done] {
                                    runs->handle(c);
                                    ::close(c);
                                    *done = true;
                                }),
                                done});
        } catch (const std::system_error&) {
            ::close(c);  // no thread for it: the guest's srun sees the end
        }
    }
}

// Finished connections' threads joined (at once: they have returned), so
// that a guest running srun after srun keeps at most the open ones.
void SrunRelay::prune_workers() {
    for (auto it = workers_.begin(); it != workers_.end();) {
        if (*it->done) {
            it->thread.join();
            it = workers_.erase(it);
        } else {
            ++it;
        }
    }
}

namespace {
// Reads one request, as parse_relay_request frames it (RelayRequestReader:
// linear in the request's size): nullopt when the peer
// goes away first or sends what cannot be one (answered "ERR ...").
std::optional<RelayRequest> read_request(int fd) {
    RelayRequestReader reader;
    char chunk[4096];
    const Deadline deadline{Milliseconds(kRelayRequestTimeoutMs)};
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int ready = deadline.expired() ? 0 : ::poll(&p, 1, deadline.remaining_ms());
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            write_all(fd, "ERR no whole request within " + std::to_string(kRelayRequestTimeoutMs / 1000) + " s\n");
            return std::nullopt;
        }
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::nullopt;
        RelayRequest r = reader.feed(std::string_view(chunk, static_cast<size_t>(n)));
        if (r.status == RelayRequest::Status::complete) return r;
        if (r.status == RelayRequest::Status::bad) {
            write_all(fd, "ERR " + r.error + "\n");
            return std::nullopt;
        }
    }
}
}  // namespace

void SrunRelay::Runs::handle(int fd) {
    std::optional<RelayRequest> req = read_request(fd);
    if (!req) return;
    if (req->verb == "SRUN") {
        std::vector<std::string> args(req->fields.begin() + 1, req->fields.end());
        std::string why = check_guest_srun_args(args);
        if (!why.empty()) {
            write_all(fd, "ERR " + why + "\n");
            return;
        }
        run_srun(fd, req->fields);
        return;
    }
    std::shared_ptr<Run> run;
    {
        std::lock_guard<std::mutex> g(mu);
        auto it = by_token.find(req->token);
        if (it != by_token.end()) run = it->second;
    }
    if (!run) return;
    if (req->verb == "STDERR") {
        int err_fd;
        {
            std::lock_guard<std::mutex> g(run->mu);
            err_fd = std::exchange(run->err_fd, -1);  // one STDERR per run
        }
        if (err_fd < 0) return;
        pump(err_fd, fd);
        ::close(err_fd);
    } else if (req->verb == "WAIT") {
        int status;
        {
            std::unique_lock<std::mutex> g(run->mu);
            run->cv.wait(g, [&] { return run->done; });
            status = run->status;
        }
        write_all(fd, std::to_string(status) + "\n");
        std::lock_guard<std::mutex> g(mu);
        by_token.erase(req->token);
    } else if (req->verb == "SIGNAL") {
        int sig = forwarded_signal_number(req->signal);
        std::lock_guard<std::mutex> g(run->mu);
        if (sig && !run->done) ::kill(run->pid, sig);
    }
}

// Runs whose srun ended and that the guest never asked to WAIT for (its
// shim was killed): dropped, their stderr closed, once more than a few are
// kept. Called with mu held.
void SrunRelay::Runs::forget_ended() {
    if (by_token.size() < kMaxKeptRuns) return;
    for (auto it = by_token.begin(); it != by_token.end();) {
        std::lock_guard<std::mutex> g(it->second->mu);
        if (it->second->done) {
            if (it->second->err_fd >= 0) ::close(std::exchange(it->second->err_fd, -1));
            it = by_token.erase(it);
        } else {
            ++it;
        }
    }
}

// SRUN: starts the host's srun, answers "OK <token>" (the token names the run
// for STDERR, WAIT and SIGNAL) and pumps its stdout to the guest.
void SrunRelay::Runs::run_srun(int fd, const std::vector<std::string>& fields) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
        write_all(fd, "ERR cannot create pipes\n");
        return;
    }
    auto run = std::make_shared<Run>();
    std::vector<std::string> argv{"srun"};
    argv.insert(argv.end(), fields.begin() + 1, fields.end());
    try {
        SpawnOptions o = srun_spawn_options(fields[0], out[1], err[1]);
        o.program = srun;
        run->pid = spawn(argv, o);
    } catch (const Error&) {
        run->pid = -1;
    }
    ::close(out[1]);
    ::close(err[1]);
    if (run->pid < 0) {
        ::close(out[0]);
        ::close(err[0]);
        write_all(fd, "ERR cannot fork\n");
        return;
    }
    run->out_fd = out[0];
    run->err_fd = err[0];
    std::string token = new_token();
    {
        std::lock_guard<std::mutex> g(mu);
        forget_ended();
        by_token[token] = run;
    }
    std::thread([run] {
        // Seen ended but not reaped (WNOWAIT) while `done` is set: a SIGNAL
        // (which checks `done` under the same lock) never reaches a pid that
        // another process has been given since.
        siginfo_t si{};
        while (::waitid(P_PID, static_cast<id_t>(run->pid), &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
        }
        {
            std::lock_guard<std::mutex> g(run->mu);
            run->status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
            run->done = true;
            run->cv.notify_all();
        }
        while (::waitpid(run->pid, nullptr, 0) < 0 && errno == EINTR) {
        }
    }).detach();
    if (!write_all(fd, "OK " + token + "\n")) ::kill(run->pid, SIGTERM);
    pump(run->out_fd, fd);
    ::close(run->out_fd);
}

}  // namespace svm
