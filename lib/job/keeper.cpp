#include "keeper.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <algorithm>

#include "cgroup.hpp"
#include "checkpoint.hpp"
#include "cpuset.hpp"
#include "deadline.hpp"
#include "dev_acl.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_net.hpp"
#include "guest_sandbox.hpp"
#include "hugepages.hpp"
#include "image_check.hpp"
#include "json.hpp"
#include "libvirt_session.hpp"
#include "log.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "virtiofs.hpp"

namespace svm {

namespace {

std::atomic<bool> g_stop{false};
constexpr size_t kUserConsoleBytes = 1u << 20;
void on_term(int) { g_stop = true; }
// The epilog of a requeued resumable job: save the guest, then end.
std::atomic<bool> g_save{false};
void on_save(int) {
    g_save = true;
    g_stop = true;
}

// Copies between `a` (a client of the job's socket) and `b` (the guest's
// sshd) until both have closed.
void relay(int a, int b) {
    char buf[65536];
    bool a_open = true, b_open = true;
    while (a_open || b_open) {
        struct pollfd p[2] = {{a, static_cast<short>(a_open ? POLLIN : 0), 0},
                              {b, static_cast<short>(b_open ? POLLIN : 0), 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            int from = i == 0 ? a : b, to = i == 0 ? b : a;
            bool& open = i == 0 ? a_open : b_open;
            if (!open || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = ::read(from, buf, sizeof buf);
            if (n <= 0) {
                open = false;
                ::shutdown(to, SHUT_WR);
                continue;
            }
            for (ssize_t off = 0; off < n;) {
                ssize_t w = ::write(to, buf + off, static_cast<size_t>(n - off));
                if (w <= 0) {
                    a_open = b_open = false;
                    break;
                }
                off += w;
            }
        }
    }
    ::close(a);
    ::close(b);
}

// A TCP connection to `port` of `ip` (blocking once made), or -1 when none
// is made within timeout_ms: a guest that died answers nothing, and a
// blocking connect would wait for the kernel's ARP and SYN timeouts.
int connect_within(const std::string& ip, uint16_t port, int timeout_ms) {
    UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s) return -1;
    struct sockaddr_in sa {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        if (errno != EINPROGRESS) return -1;
        struct pollfd p = {s.get(), POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (::poll(&p, 1, timeout_ms) != 1 || ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err)
            return -1;
    }
    ::fcntl(s.get(), F_SETFL, ::fcntl(s.get(), F_GETFL) & ~O_NONBLOCK);
    return s.release();
}

// A TCP connection to the guest's sshd, retried while the guest's network
// or sshd come up (bounded; given up once `go_on`, when given, says so).
int connect_guest(const std::string& ip, int timeout_ms, const std::function<bool()>& go_on = {}, uint16_t port = 22) {
    int s = -1;
    poll_until(Deadline(Milliseconds(timeout_ms)), Milliseconds(50), [&] {
        s = connect_within(ip, port, 1000);
        return s >= 0 || (go_on && !go_on());
    });
    return s;
}

// The guest agent's serial channels (seed_agent_script, lib/guest/seed.hpp):
// connected as soon as the guest runs (its agent then finds the host there),
// offered once the guest says its agent waits, and handed (SCM_RIGHTS) to
// one client of the job's agent socket: the job's first command
// (slurm-vm-exec of the batch step), which then talks to the agent itself.
struct AgentChannels {
    std::mutex mu;
    std::vector<UniqueFd> fds;  // kAgentPorts of them, or none
    std::atomic<bool> offered{false};
    bool connected() {
        std::lock_guard<std::mutex> l(mu);
        return fds.size() == kAgentPorts;
    }
    std::vector<UniqueFd> take() {
        std::lock_guard<std::mutex> l(mu);
        return offered ? std::move(fds) : std::vector<UniqueFd>();
    }
};

// Accepts on the job's agent socket: the first client after the offer gets
// the channels ("1" with the descriptors), every other client "0".
void hand_agent_channels(int listen_fd, std::shared_ptr<AgentChannels> agent) {
    for (;;) {
        UniqueFd c(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) {
            if (errno == EINTR) continue;
            return;
        }
        std::vector<UniqueFd> fds = agent->take();
        std::vector<int> raw;
        for (const auto& f : fds) raw.push_back(f.get());
        try {
            send_with_fds(c.get(), raw.empty() ? "0" : "1", raw, "hand the guest agent's channels");
            if (!raw.empty()) log::info("the job's first command takes the guest agent's serial channels");
        } catch (const Error& e) {
            log::warn(e.chain());
        }
    }
}

int listen_unix(const std::string& path, uid_t uid) {
    ::unlink(path.c_str());
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) SVM_THROW_ERRNO("socket");
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) SVM_THROW("socket path too long: " + path);
    std::strcpy(sa.sun_path, path.c_str());
    mode_t old = ::umask(0177);
    int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::umask(old);
    if (rc != 0) SVM_THROW_ERRNO("bind " + path);
    // Root's socket; the job's user may connect (an ACL entry), and cannot
    // hand it to anyone else.
    grant_user(path, uid, 6);
    if (::listen(fd, 64) != 0) SVM_THROW_ERRNO("listen " + path);
    return fd;
}

// Finds the extern step's task: the `sleep` child of the step daemon.
pid_t find_child(pid_t parent) {
    for (const auto& name : list_dir("/proc")) {
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        auto pid = static_cast<pid_t>(std::stol(name));
        auto ps = proc_stat(pid);
        if (ps && ps->ppid == parent && ps->comm == "sleep") return pid;
    }
    return 0;
}

// A process that only waits, as the extern step's sleep did up to Slurm
// 24.11: it ignores every signal it can, closes what it inherited, and dies
// with the thread that made it (this keeper's main thread). After fork in a
// threaded process: async-signal-safe calls only.
pid_t start_waiting_child() {
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid != 0) return pid;  // the keeper, or -1
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(0);
    ::prctl(PR_SET_NAME, "slurm-vm-task");
    for (int sig = 1; sig < 32; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_IGN);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    for (;;) ::pause();
}

constexpr const char* kImageFdGroup = "image";

// Defines the guest, hands it the image's descriptor and runs it with `run`
// (create, or restore); null, with libvirt's reason in `why`, when it does
// not run (the definition is undone).
DomainPtr run_domain(virConnectPtr c, const std::string& xml, int image_fd, const std::function<int(virDomainPtr)>& run,
                     std::string& why) {
    DomainPtr dom(virDomainDefineXML(c, xml.c_str()));
    if (!dom) {
        why = libvirt_last_error();
        return dom;
    }
    int fds[1] = {image_fd};
    if (virDomainFDAssociate(dom.get(), kImageFdGroup, 1, fds, 0) == 0 && run(dom.get()) == 0) return dom;
    why = libvirt_last_error();
    virDomainUndefine(dom.get());
    return DomainPtr();
}

DomainPtr start_domain(virConnectPtr c, const std::string& xml, int image_fd, std::string& why) {
    return run_domain(c, xml, image_fd, virDomainCreate, why);
}

// Restores a saved guest (checkpoint.hpp) as this node describes it, under
// the saved guest's UUID (libvirt requires it), the image's descriptor
// associated first as for a new guest; null, with libvirt's reason in `why`,
// when it does not run.
DomainPtr restore_domain(virConnectPtr c, DomainSpec spec, int image_fd, const std::string& file, std::string& why) {
    char* saved = virDomainSaveImageGetXMLDesc(c, file.c_str(), 0);
    if (!saved) {
        why = libvirt_last_error();
        return DomainPtr();
    }
    std::string text(saved);
    std::free(saved);
    size_t a = text.find("<uuid>"), b = text.find("</uuid>");
    if (a == std::string::npos || b == std::string::npos || b < a || b - a > 64) {
        why = "the saved guest has no UUID";
        return DomainPtr();
    }
    spec.uuid = text.substr(a + 6, b - a - 6);
    std::string xml = domain_xml(spec);
    return run_domain(
        c, xml, image_fd,
        [&](virDomainPtr) { return virDomainRestoreFlags(c, file.c_str(), xml.c_str(), VIR_DOMAIN_SAVE_RUNNING); },
        why);
}

// This thread on one CPU (the lowest it may use) until release(): libvirt
// reads the host's CPUID data on the connecting thread's CPU.
class CpuPin {
public:
    CpuPin() {
        if (::sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &saved_)) {
                cpu_set_t one;
                CPU_ZERO(&one);
                CPU_SET(c, &one);
                if (::sched_setaffinity(0, sizeof one, &one) == 0) {
                    cpu_ = c;
                    pinned_ = true;
                }
                return;
            }
    }
    ~CpuPin() { release(); }
    void release() {
        if (pinned_) ::sched_setaffinity(0, sizeof saved_, &saved_);
        pinned_ = false;
    }
    int cpu() const { return cpu_; }

private:
    cpu_set_t saved_{};
    int cpu_ = 0;
    bool pinned_ = false;
};

// Why libvirt probed QEMU while creating the guest, for the admin.
std::string capabilities_probe_note(const NodeConfig& cfg, const JobPlan& p, int cpu) {
    std::string why = " (no valid cache for CPU " + std::to_string(cpu) +
                      " yet: the first guest after a QEMU or libvirt upgrade on each CPU pays once)";
    if (path_exists(cfg.kvm_device) && !accessible_rw_as(cfg.kvm_device, p.uid, p.guest_gid))
        why += ": " + cfg.kvm_device + " is not readable and writable by the guest's identity (uid " +
               std::to_string(p.uid) + ", gid " + std::to_string(p.guest_gid) +
               "), so libvirt takes its cached capabilities (probed with KVM) as stale; does the file system of " +
               cfg.kvm_device + " support ACLs? (slurm-vm doctor checks this)";
    return "libvirt probed QEMU's capabilities again while creating the guest (seconds)" + why;
}

}  // namespace

void relay_ssh(int listen_fd, const std::string& ip, uint16_t port, size_t max_connections) {
    // Shared with the relay threads, which may outlive this loop.
    auto live = std::make_shared<std::atomic<size_t>>(0);
    bool told = false;
    for (;;) {
        UniqueFd c(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return;
        }
        if (live->fetch_add(1) >= max_connections) {
            live->fetch_sub(1);
            if (!told)
                log::warn("the job's SSH socket refuses connections past " + std::to_string(max_connections) +
                          " at once");
            told = true;
            continue;  // closed: the client's ssh says the connection was closed
        }
        told = false;
        int fd = c.release();
        std::thread([fd, ip, port, live] {
            int s = connect_guest(ip, 30000, {}, port);
            if (s < 0) ::close(fd);
            else relay(fd, s);
            live->fetch_sub(1);
        }).detach();
    }
}

std::string vm_record(const JobPlan& p, long create_ms, long ready_ms, int vcpus, int64_t memory_mib,
                      int64_t hugepage_kib) {
    JsonOut r;
    r("image", p.image);
    r.optional("source", p.image_source);
    r("format", p.image_format);
    r.optional("digest", p.image_digest);
    r("boot", p.kernel.empty() ? "bootloader" : "kernel");
    r("create_ms", create_ms);
    r("ready_ms", ready_ms);
    r("vcpus", vcpus);
    r("memory_mib", memory_mib);
    r("guest", p.hostname);
    r.optional("ip", p.ip);
    r.optional("fabric_ip", p.fabric_ip);
    if (hugepage_kib > 0) r("hugepage_kib", hugepage_kib);
    if (!p.vf_link_layer.empty()) r("irq_profile", p.irq_profile);
    r.optional("placement", p.placement);
    if (!p.devices_json.empty()) {
        try {
            r("devices", json_parse(p.devices_json, "devices"));
        } catch (const Error&) {
        }
    }
    return json_dump(r.take().get());
}

DomainSpec guest_domain(const JobPlan& p, const std::vector<int>& cpus, std::optional<int64_t> mem_limit_bytes) {
    DomainSpec d;
    d.name = p.domain_name;
    d.type = p.domain_type;
    d.emulator = p.emulator;
    if (cpus.empty()) SVM_THROW("the job has no CPUs on " + p.node);
    // vCPUs go one-to-one onto the job's CPUs, those on the devices' NUMA
    // node first (Slurm chose the CPUs; we only order them).
    d.host_cpus.clear();
    std::vector<int> local = p.device_cpus.empty() ? std::vector<int>{} : parse_cpulist(p.device_cpus);
    for (int c : cpus)
        if (std::find(local.begin(), local.end(), c) != local.end()) d.host_cpus.push_back(c);
    for (int c : cpus)
        if (std::find(local.begin(), local.end(), c) == local.end()) d.host_cpus.push_back(c);
    d.hostdevs = p.hostdevs;
    for (size_t i = 0; i < p.shares.size(); ++i)
        d.shares.push_back({p.shares[i], "svmshare" + std::to_string(i), p.virtiofsd.empty() ? "" : p.share_socket(i)});
    d.numa_node = p.numa_node;
    if (p.numa_node < 0) d.numa_interleave = p.numa_nodes;
    if (mem_limit_bytes) {
        int64_t job_mib = *mem_limit_bytes >> 20;
        d.memory_mib = job_mib - p.memory_overhead_mib;
        if (d.memory_mib < p.min_guest_memory_mib)
            SVM_THROW("the job's memory on " + p.node + " (" + std::to_string(job_mib) + " MiB) leaves " +
                      std::to_string(d.memory_mib) + " MiB for the guest after " +
                      std::to_string(p.memory_overhead_mib) + " MiB for QEMU; request at least " +
                      std::to_string(p.min_guest_memory_mib + p.memory_overhead_mib) + " MiB with --mem");
    } else {
        d.memory_mib = p.default_guest_memory_mib;
    }
    d.overlay = p.overlay();
    d.base = p.image;
    d.base_format = p.image_format;
    d.seed = p.seed();
    d.kernel = p.kernel_copy;
    d.initrd = p.initrd_copy;
    d.cmdline = p.cmdline;
    d.bridge = p.bridge;
    d.tap = p.bridge.empty() ? "" : "svmtap";  // in the job's namespace; its guard matches it (guest_net.hpp)
    d.mtu = p.mtu;
    d.mac = p.mac;
    d.console_log = p.console_log();
    for (size_t i = 0; i < kAgentPorts; ++i) d.agent_channels.push_back(p.agent_channel(i));
    return d;
}

std::string back_guest_memory(DomainSpec& d, const JobPlan& p, const SysfsRoot& root) {
    try {
        MemoryBacking b = choose_memory_backing(root, p.hugepages, p.hugepage_size_kib, p.numa_node, d.memory_mib);
        d.memory_mib = b.memory_mib;
        d.hugepage_kib = b.page_kib;
        return b.note;
    } catch (const Error& e) {
        SVM_THROW("node " + p.node + " cannot start the job's guest: " + e.reason() +
                  " (a problem of the node, not of the job)");
    }
}

// The job's virtiofsd processes (virtiofs.hpp), children of the keeper:
// each ends when QEMU disconnects; what is left is stopped and reaped when
// the keeper ends, however it ends.
class ShareServers {
public:
    void start(const JobPlan& p, const std::string& kind_cache) {
        if (p.virtiofsd.empty() || p.shares.empty()) return;
        UniqueFd log(::open(p.share_log().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640));
        if (!log) SVM_THROW_ERRNO("open " + p.share_log());
        Credentials user = credentials_for(p.uid, p.gid);
        VirtiofsdKind kind = virtiofsd_kind(p.virtiofsd, kind_cache);
        for (size_t i = 0; i < p.shares.size(); ++i) {
            VirtiofsdSpec s{p.virtiofsd, p.shares[i], virtiofsd_mark(p.job_id, i), p.uid, p.gid, user.groups,
                            p.guest_gid, kind};
            pid_t pid = start_virtiofsd(s, p.share_socket(i), log.get());
            pids_.push_back(pid);
            replace_file(p.share_pid_file(i), std::to_string(pid) + "\n", 0644);
        }
    }
    ~ShareServers() {
        for (pid_t pid : pids_) ::kill(pid, SIGTERM);
        for (pid_t pid : pids_) {
            if (poll_until(Deadline(Milliseconds(2000)), Milliseconds(10),
                           [pid] { return ::waitpid(pid, nullptr, WNOHANG) != 0; }))
                continue;
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }

private:
    std::vector<pid_t> pids_;
};

bool cap_console(const std::string& path, int64_t max_bytes) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || st.st_size <= max_bytes) return false;
    std::string tail = log::read_console(path, 64u << 10);
    UniqueFd f(::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!f) SVM_THROW_ERRNO("open " + path);
    if (::ftruncate(f.get(), 0) != 0) SVM_THROW_ERRNO("truncate " + path);
    std::string text =
        "[slurm-vm: console cut at " + std::to_string(st.st_size) + " bytes; its last 64 KiB follow]\n" + tail;
    if (::write(f.get(), text.data(), text.size()) < 0) SVM_THROW_ERRNO("write " + path);
    return true;
}

namespace {

// The head's digest of the image, computed beside the guest's start: empty
// until it is done, and when it failed.
struct DigestState {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::string digest;
    // Waits at most ms for it; the digest ("" when not done or failed).
    std::string wait(int ms) {
        std::unique_lock<std::mutex> l(m);
        cv.wait_for(l, std::chrono::milliseconds(ms), [&] { return done; });
        return digest;
    }
    void finish(std::string d) {
        std::lock_guard<std::mutex> l(m);
        digest = std::move(d);
        done = true;
        cv.notify_all();
    }
};

// This node's VM record is in the job's AdminComment, or was tried, or is
// not published: the batch step's end waits for this (JobPlan::record_written).
void note_record_written(const JobPlan& p) {
    try {
        replace_file(p.record_written(), "", 0644);
    } catch (const Error& e) {
        log::warn("the job's end will not wait for its VM record: " + e.chain());
    }
}

// The job's embedded libvirt, connected from one CPU whose cached QEMU
// capabilities libvirt will take as valid (libvirt_session.hpp); the guest
// is created from that CPU too. What the cache held before, to tell after
// the guest's creation whether libvirt probed QEMU.
struct Libvirt {
    ConnectPtr conn;
    int cpu = -1;
    std::string cpu_cache, caps_before;
};

Libvirt connect_libvirt(const std::string& root, const std::string& state_dir) {
    CpuPin pin;
    Libvirt l;
    l.cpu = pin.cpu();
    l.cpu_cache = path_join(state_dir, "libvirt-caps/cpu" + std::to_string(l.cpu));
    try {
        use_capabilities_cache(root, l.cpu_cache);
    } catch (const Error& e) {
        log::warn("the capabilities cache of CPU " + std::to_string(l.cpu) + " was not used: " + e.chain());
    }
    l.caps_before = capabilities_fingerprint(root);
    l.conn = open_embed(root);
    return l;
}

// One guest's life on this node, in steps. A step that fails returns the
// sentence the job fails with; run() reports it (state, console, record).
class Keeper {
public:
    Keeper(const KeeperOptions& o, NodeConfig cfg, JobPlan p) : o_(o), cfg_(std::move(cfg)), p_(std::move(p)) {}
    int run();

private:
    using Failure = std::optional<std::string>;
    void ignore_job_signals();
    void report_failure(const GuestState& state, const std::string& why);
    void publish_failure(const std::string& why);
    int fail(const std::string& why);
    std::string gone_why(const std::string& otherwise);
    std::string guest_gone_while_booting();
    Failure confine();
    pid_t extern_task_stand_in();
    Failure describe_guest();
    Failure enter_job_netns();
    void start_connecting();
    Failure start_share_servers();
    Failure start_guest();
    void refresh_capabilities(const std::string& cpu_cache, const std::string& caps_before, int cpu);
    Failure start_guest_access();
    Failure wait_until_ready(bool& ready);
    struct BootWatch;
    Failure watch_boot(BootWatch& w, bool& ready);
    Failure wait_for_sshd(const Deadline& deadline, bool& ready);
    Failure resume_ready(bool& ready);
    bool save_guest();
    void note_ready();
    void publish_record(long t_set_up);
    void start_digest();
    int live();

    const KeeperOptions& o_;
    NodeConfig cfg_;
    JobPlan p_;
    int host_netns_ = -1;  // the host's network namespace, once we leave it
    // The ready record's publisher: a failure stops it, waits, and then
    // publishes; otherwise it goes with the process.
    std::shared_ptr<std::atomic<bool>> ready_cancelled_ = std::make_shared<std::atomic<bool>>(false);
    struct Publisher {
        std::thread t;
        ~Publisher() {
            if (t.joinable()) t.detach();
        }
    } ready_publisher_;
    std::vector<int> cpus_;
    std::optional<int64_t> mem_;
    // The kernel's OOM kills in the guest's memory cgroup so far: one more
    // when the guest is gone means QEMU outgrew the job's memory.
    std::optional<int64_t> oom_kills_before_;
    UniqueFd image_fd_;
    std::shared_ptr<DigestState> digest_;  // the head's, when it reads the image
    DomainSpec spec_;
    std::string backing_, xml_;
    int64_t unrounded_mib_ = 0;
    long t0_ = 0, t_created_ = 0;
    bool caps_probed_ = false;
    bool record_published_ = false;
    ShareServers share_servers_;  // declared before the guest: the servers outlive it
    std::future<Libvirt> connecting_;
    ConnectPtr conn_;
    DomainPtr dom_;
    std::shared_ptr<AgentChannels> agent_ = std::make_shared<AgentChannels>();
};

// Signals sent to the job's steps are for the tasks (slurm-vm-exec carries
// them into the guest), not for us (we are out of their reach anyway: see
// join_cgroups_of). The epilog stops us with TERM, or with USR2
// to save the guest first (a requeued resumable job: checkpoint.hpp).
void Keeper::ignore_job_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_term;
    ::sigaction(SIGTERM, &sa, nullptr);
    struct sigaction save {};
    save.sa_handler = on_save;
    ::sigaction(SIGUSR2, &save, nullptr);
    for (int sig : {SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGALRM, SIGPIPE}) ::signal(sig, SIG_IGN);
}

// A failed or dead guest: the admin gets the console, the caller publishes
// the reason, then the job learns it (state, read by the task wrapper).
void Keeper::report_failure(const GuestState& state, const std::string& why) {
    // The user's copy of the console first: the task wrapper shows it once
    // it reads the state.
    try {
        replace_file(p_.console_copy(), log::read_console(p_.console_log(), kUserConsoleBytes), 0644);
    } catch (const Error& e) {
        log::warn("no copy of the console for the user: " + e.chain());
    }
    log::error(why);
    try {
        std::string kept = log::keep_console(p_.console_log(), cfg_.log_dir, p_.node, p_.job_id);
        if (!kept.empty()) log::info("the guest's console log is kept in " + kept);
    } catch (const Error& e) {
        log::warn("the guest's console log was not kept: " + e.chain());
    }
    // The record before the state: once the task wrapper reads the state it
    // ends, the job ends with it, and Slurm takes no AdminComment update of
    // an ended job (the batch step sees a dead guest's channels close at
    // once; it waits for the state up to 5 s).
    publish_failure(why);
    write_guest_state(p_, state);
}

void Keeper::publish_failure(const std::string& why) {
    if (!o_.on_failure) return;
    *ready_cancelled_ = true;
    if (ready_publisher_.t.joinable()) ready_publisher_.t.join();
    if (host_netns_ < 0) {
        o_.on_failure(p_, why);
    } else {
        std::thread([&] {
            ::setns(host_netns_, CLONE_NEWNET);  // this thread only
            o_.on_failure(p_, why);
        }).join();
    }
}

// The guest died before it was ready: once its agent took the job's first
// command, the job's script may have run in it for a while already.
std::string Keeper::guest_gone_while_booting() {
    if (agent_->offered) return gone_why("the guest on " + p_.node + " shut down or crashed");
    return gone_why("the guest on " + p_.node + " stopped while booting (see its console log " + p_.console_log() +
                    ")");
}

int Keeper::fail(const std::string& why) {
    report_failure({GuestState::Phase::failed, why}, why);
    return 1;
}

std::string Keeper::gone_why(const std::string& otherwise) {
    std::optional<int64_t> now;
    try {
        now = cgroup_oom_kills(::getpid());
    } catch (const Error&) {
    }
    if (oom_kills_before_ && now && *now > *oom_kills_before_)
        return "the guest on " + p_.node + " was killed for using more memory than the job has there" +
               (mem_ ? " (" + std::to_string(*mem_ >> 20) + " MiB, of which the guest gets all but " +
                           std::to_string(p_.memory_overhead_mib) + " MiB)"
                     : std::string()) +
               ": request more with --mem";
    return otherwise;
}

// What QEMU (started through libvirt in this process) inherits: it can
// never make a file setuid or setgid (guest_sandbox.hpp), and it runs in the
// job's cgroups. The extern step's own, but out of the reach of Slurm's
// signals to that step, which would end the guest before the tasks' signal
// reaches it: on v1 the job's freezer, on v2 a leaf of our own below the
// step's task.
Keeper::Failure Keeper::confine() {
    try {
        forbid_setid_bits();
    } catch (const Error& e) {
        return "node " + p_.node + " cannot confine the job's guest: " + e.chain();
    }
    if (o_.join_cgroup_of > 0) {
        pid_t task = find_child(o_.join_cgroup_of);
        if (task == 0) task = extern_task_stand_in();
        try {
            join_cgroups_of(task > 0 ? task : o_.join_cgroup_of, ::getpid(), kCgroupRoot, true);
        } catch (const Error& e) {
            return "the guest could not be placed in the job's cgroup on " + p_.node + ": " + e.chain();
        }
    }
    try {
        cpus_ = cgroup_cpus(::getpid());
        mem_ = cgroup_memory_limit(::getpid());
    } catch (const Error& e) {
        return "cannot read the job's CPUs on " + p_.node + ": " + e.chain();
    }
    try {
        oom_kills_before_ = cgroup_oom_kills(::getpid());
    } catch (const Error& e) {
        log::warn("the guest's OOM kills cannot be told: " + e.chain());
    }
    return std::nullopt;
}

// Slurm 25.05+ runs no task in the extern step (no sleep), and Slurm
// accounts a step by its tasks: a guest placed beside the stepd is limited
// and ended with the job but missing from sacct. So the step gets a task
// again: a waiting child of ours that the step adopts as pam_slurm_adopt
// adopts a login (slurm-vm-adopt), which gives it a task cgroup that
// jobacct_gather reads; the guest then joins that task's cgroups like the
// sleep's before 25.05 (and the job's freezer: the step's signals still miss
// it). 0, the stepd kept as the model, when the step does not take it.
pid_t Keeper::extern_task_stand_in() {
    pid_t child = start_waiting_child();
    if (child < 0) {
        log::warn("no task for the extern step (fork: " + std::string(std::strerror(errno)) +
                  "): the guest's CPU time will not reach sacct");
        return 0;
    }
    RunOptions ro;
    ro.env = inherited_env({"PATH", "SLURM_CONF"});
    ro.timeout_ms = 10000;
    ro.max_output_bytes = 4096;
    RunResult r = svm::run(
        {path_join(cfg_.libexec_dir, "slurm-vm-adopt"), p_.node, std::to_string(p_.job_id), std::to_string(child)}, ro);
    if (r.ok()) {
        log::info("the extern step has no task (Slurm 25.05+): it adopted process " + std::to_string(child) +
                  ", whose cgroups the guest joins");
        return child;
    }
    log::warn("the extern step did not adopt a task (" + trim(r.err) + "): the guest's CPU time will not reach sacct");
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return 0;
}

// The image the prolog checked, opened again as the user and compared (QEMU
// gets this descriptor, never the path), and the guest sized to the job.
Keeper::Failure Keeper::describe_guest() {
    try {
        image_fd_ = reopen_checked_as_user(p_.image, credentials_for(p_.uid, p_.gid), p_.image_identity);
        spec_ = guest_domain(p_, cpus_, mem_);
        spec_.base_fdgroup = kImageFdGroup;
        unrounded_mib_ = spec_.memory_mib;
        backing_ = back_guest_memory(spec_, p_, SysfsRoot(cfg_.sysfs_root));
    } catch (const Error& e) {
        return e.reason();
    }
    log::info("guest memory " + std::to_string(spec_.memory_mib) + " MiB, " + backing_);
    if (!p_.placement.empty()) log::info("placement: " + p_.placement);
    xml_ = domain_xml(spec_);
    replace_file(path_join(p_.dir, "domain.xml"), xml_, 0644);
    return std::nullopt;
}

// The job's network namespace on this node (for the tap and the proxy). The
// host's namespace stays reachable for talking to Slurm.
Keeper::Failure Keeper::enter_job_netns() {
    if (p_.netns.empty()) return std::nullopt;
    UniqueFd host(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    try {
        enter_netns(p_.netns);
        host_netns_ = host.release();
    } catch (const Error& e) {
        return "node " + p_.node + " is misconfigured: " + e.chain();
    }
    return std::nullopt;
}

Keeper::Failure Keeper::start_share_servers() {
    try {
        share_servers_.start(p_, path_join(cfg_.state_dir, "virtiofsd-kinds"));
    } catch (const Error& e) {
        return "node " + p_.node + " cannot serve the job's shares to its guest: " + e.chain();
    }
    if (p_.shares.empty()) return std::nullopt;
    std::string list;
    for (const auto& d : p_.shares) list += (list.empty() ? "" : ", ") + d;
    log::info("shares over " + std::string(p_.virtiofsd.empty() ? "9p (QEMU)" : "virtio-fs (" + p_.virtiofsd + ")") +
              ": " + list);
    return std::nullopt;
}

// libvirt's driver starts in tens of milliseconds (the host's sysinfo, the
// capabilities cache): it is connected on a thread of its own while the
// guest is described and its shares are served. Started once the keeper is
// confined and in the job's network namespace, the thread (and libvirt's
// own threads, which it starts) inherit both.
void Keeper::start_connecting() {
    connecting_ = std::async(std::launch::async, connect_libvirt, p_.embed_root(), cfg_.state_dir);
}

// Starts the guest from the CPU of the connection.
Keeper::Failure Keeper::start_guest() {
    write_guest_state(p_, {GuestState::Phase::booting, ""});
    t0_ = now_ms();
    if (Failure f = start_share_servers()) return f;
    Libvirt lv;
    CpuPin pin;
    try {
        lv = connecting_.get();
        conn_ = std::move(lv.conn);
        std::string why;
        if (!p_.restore_from.empty()) {
            dom_ = restore_domain(conn_.get(), spec_, image_fd_.get(), p_.restore_from, why);
            if (!dom_) SVM_THROW("its saved state was not restored: " + why);
        } else {
            dom_ = start_domain(conn_.get(), xml_, image_fd_.get(), why);
        }
        if (!dom_ && spec_.hugepage_kib > 0 && p_.hugepages == "auto") {
            // Another guest took the free hugepages since they were counted.
            backing_ = "normal pages: the guest did not start on hugepages (" + why + ")";
            log::warn(backing_);
            spec_.hugepage_kib = 0;
            spec_.memory_mib = unrounded_mib_;
            xml_ = domain_xml(spec_);
            replace_file(path_join(p_.dir, "domain.xml"), xml_, 0644);
            dom_ = start_domain(conn_.get(), xml_, image_fd_.get(), why);
        }
        if (!dom_) SVM_THROW(why);
    } catch (const Error& e) {
        return "the guest on " + p_.node + " could not be started: " + e.chain();
    }
    t_created_ = now_ms();
    pin.release();
    log::info("guest " + p_.domain_name + (p_.restore_from.empty() ? " created" : " restored from its checkpoint") +
              " in " + std::to_string(t_created_ - t0_) + " ms");
    refresh_capabilities(lv.cpu_cache, lv.caps_before, lv.cpu);
    return std::nullopt;
}

// libvirt probed QEMU while creating the guest (seconds): the admin is told
// why, and the CPU's cache is refreshed for the next guest.
void Keeper::refresh_capabilities(const std::string& cpu_cache, const std::string& caps_before, int cpu) {
    caps_probed_ = capabilities_fingerprint(p_.embed_root()) != caps_before;
    if (caps_probed_) log::warn(capabilities_probe_note(cfg_, p_, cpu));
    if (!caps_probed_ && path_exists(path_join(cpu_cache, "cache/qemu/capabilities"))) return;
    try {
        refresh_capabilities_cache(p_.embed_root(), cpu_cache);
    } catch (const Error& e) {
        log::warn("the capabilities cache of CPU " + std::to_string(cpu) + " was not refreshed: " + e.chain());
    }
}

// The job's ways into its guest: the agent's channels for its first command,
// and the SSH socket (TCP to the guest's sshd) for every other.
Keeper::Failure Keeper::start_guest_access() {
    int afd = -1, lfd = -1;
    try {
        afd = listen_unix(p_.agent_socket(), p_.uid);
        if (!p_.ip.empty()) lfd = listen_unix(p_.ssh_socket(), p_.uid);
    } catch (const Error& e) {
        destroy_now(dom_.get(), p_.embed_root(), p_.domain_name);
        return "cannot create the job's sockets on " + p_.node + ": " + e.chain();
    }
    // QEMU listens there once the guest runs (none: no agent, SSH only).
    std::vector<UniqueFd> fds;
    for (size_t i = 0; i < kAgentPorts; ++i)
        if (int fd = connect_unix(p_.agent_channel(i)); fd >= 0) fds.emplace_back(fd);
    if (fds.size() == kAgentPorts) agent_->fds = std::move(fds);
    std::thread(hand_agent_channels, afd, agent_).detach();
    if (lfd >= 0) std::thread(relay_ssh, lfd, p_.ip, uint16_t{22}, kMaxSshConnections).detach();
    return std::nullopt;
}

// What the guest's console said so far: the markers looked for, how much of
// the log was read, and its last few KiB.
struct Keeper::BootWatch {
    std::string marker, agent, set_up;
    int64_t seen = 0;
    std::string tail;
};

// One look at the console log while the guest boots: `ready` once it says
// so; the failure when it said it failed, is gone, or is over its time.
Keeper::Failure Keeper::watch_boot(BootWatch& w, bool& ready) {
    std::string text;
    int64_t size = 0;
    try {
        text = read_file_from(p_.console_log(), w.seen, 1u << 20, &size);
    } catch (const Error&) {
    }
    if (size < w.seen) w.seen = 0;  // cut by cap_console: read it again next time
    std::string& tail = w.tail;
    tail += text;
    w.seen += static_cast<int64_t>(text.size());
    if (tail.find(w.marker) != std::string::npos) {
        ready = true;
        return std::nullopt;
    }
    if (!agent_->offered && tail.find(w.agent) != std::string::npos && agent_->connected()) {
        agent_->offered = true;
        write_guest_state(p_, {GuestState::Phase::login, ""});
        log::info("the guest's agent takes the job's first command in " + std::to_string(now_ms() - t0_) + " ms");
    }
    if (!record_published_ && tail.find(w.set_up) != std::string::npos) {
        log::info("the guest is set up in " + std::to_string(now_ms() - t0_) + " ms");
        publish_record(now_ms());
    }
    auto f = tail.find("SLURM_VM_FAILED");
    auto eol = f == std::string::npos ? f : tail.find('\n', f);
    if (f != std::string::npos && eol != std::string::npos) {
        std::string why = log::printable(tail.substr(f + 15, eol - f - 15));
        destroy_now(dom_.get(), p_.embed_root(), p_.domain_name);
        return "the guest on " + p_.node + " failed to configure itself: " + trim(why) + " (console log kept in " +
               p_.console_log() + ")";
    }
    if (tail.size() > 8192) tail = tail.substr(tail.size() - 4096);
    try {
        cap_console(p_.console_log(), cfg_.console_max_kib * 1024);
    } catch (const Error& e) {
        log::warn("the console log was not capped: " + e.chain());
    }
    if (virDomainIsActive(dom_.get()) != 1) return guest_gone_while_booting();
    return std::nullopt;
}

// Waits for the guest to say it is set up (its serial console), then for
// its sshd to accept TCP connections (no SSH handshake: that costs seconds
// of emulated crypto). `ready` stays false when the job ended first.
Keeper::Failure Keeper::wait_until_ready(bool& ready) {
    const Deadline deadline{Milliseconds(t0_ + p_.boot_timeout_s * 1000L - now_ms())};
    BootWatch watch{ready_marker(p_), agent_marker(p_), set_up_marker(p_)};
    Failure failed;
    // Every 25 ms: the job's first command waits for this loop.
    bool over = poll_until(deadline, Milliseconds(25), [&] {
        if (g_stop) return true;
        failed = watch_boot(watch, ready);
        return ready || failed.has_value();
    });
    if (failed) return failed;
    if (!over) {
        destroy_now(dom_.get(), p_.embed_root(), p_.domain_name);
        return "the guest on " + p_.node + " did not become ready within " + std::to_string(p_.boot_timeout_s) +
               " s (see its console log " + p_.console_log() + ")";
    }
    if (!ready || p_.ip.empty()) return std::nullopt;
    return wait_for_sshd(deadline, ready);
}

// A stock image's sshd starts after cloud-init's stage that printed the
// marker: it may take a few seconds more, within the boot's time (at
// least 30 s).
Keeper::Failure Keeper::wait_for_sshd(const Deadline& deadline, bool& ready) {
    int s = connect_guest(p_.ip, std::max(30000, deadline.remaining_ms()),
                          [this] { return !g_stop && virDomainIsActive(dom_.get()) == 1; });
    if (s < 0 && g_stop) {
        ready = false;  // the job ended first
        return std::nullopt;
    }
    if (s < 0 && virDomainIsActive(dom_.get()) != 1) return guest_gone_while_booting();
    if (s < 0) {
        destroy_now(dom_.get(), p_.embed_root(), p_.domain_name);
        return "the guest on " + p_.node + " said it was ready but its SSH server at " + p_.ip + " does not answer";
    }
    ::close(s);
    return std::nullopt;
}

// A restored guest is as it was saved: its agent runs the job's first
// command already (the batch step reattaches to it), its sshd listens.
Keeper::Failure Keeper::resume_ready(bool& ready) {
    if (agent_->connected()) agent_->offered = true;
    ready = true;
    if (p_.ip.empty()) return std::nullopt;
    return wait_for_sshd(Deadline(Milliseconds(30000)), ready);
}

// A requeued resumable job (checkpoint.hpp): libvirt pauses the guest,
// writes its state and ends it; the epilog keeps the overlay beside it.
bool Keeper::save_guest() {
    std::string file = checkpoint_file(p_.checkpoint_dir, p_.node_index, "save");
    std::string tmp = file + ".new";
    ::unlink(tmp.c_str());
    long t = now_ms();
    if (virDomainSaveFlags(dom_.get(), tmp.c_str(), nullptr, 0) != 0) {
        log::error("the guest was not saved: " + libvirt_last_error());
        ::unlink(tmp.c_str());
        return false;
    }
    if (::rename(tmp.c_str(), file.c_str()) != 0) {
        log::error("the guest's saved state was not kept: " + std::string(std::strerror(errno)));
        ::unlink(tmp.c_str());
        return false;
    }
    write_guest_state(p_, {GuestState::Phase::stopped, "saved for the job's next run"});
    log::info("guest saved for the job's next run in " + std::to_string(now_ms() - t) + " ms");
    return true;
}

// The guest is ready: its figures (guest.json), its state, and its record
// for Slurm accounting, published by the caller in a thread of its own.
// The guest is ready: its figures (guest.json), its state, and its record
// if the guest did not say it was set up (publish_record).
void Keeper::note_ready() {
    long t_ready = now_ms();
    JsonOut timing;
    timing("create_ms", t_created_ - t0_);
    timing("ready_ms", t_ready - t0_);
    timing("memory_mib", spec_.memory_mib);
    timing("vcpus", cpus_.size());
    timing("memory_backing", backing_);
    timing("caps_probed", caps_probed_);
    if (p_.irq_profile != "default" && !p_.vf_link_layer.empty()) timing("irq_profile", p_.irq_profile);
    replace_file(path_join(p_.dir, "guest.json"), json_dump(timing.take().get()) + "\n", 0644);
    write_guest_state(p_, {GuestState::Phase::ready, ""});
    log::info("guest ready in " + std::to_string(t_ready - t0_) + " ms");
    publish_record(t_ready);
}

// The job's VM record for Slurm accounting, once, published by the caller in
// a thread of its own: as soon as the guest says it is set up (its first
// command may start then, and a short job may be over before sshd's daemon
// answers), else when it is ready. ready_ms is that moment. A short job's
// batch step waits at its end until this is done (record_written).
void Keeper::publish_record(long t_set_up) {
    if (record_published_) return;
    record_published_ = true;
    if (!o_.on_ready) return note_record_written(p_);
    JobPlan p = p_;
    if (digest_) p.image_digest = digest_->wait(0);
    std::string rec = vm_record(p, t_created_ - t0_, t_set_up - t0_, static_cast<int>(spec_.host_cpus.size()),
                                spec_.memory_mib, spec_.hugepage_kib);
    std::shared_ptr<DigestState> later = digest_ && p.image_digest.empty() ? digest_ : nullptr;
    ready_publisher_.t = std::thread([cb = o_.on_ready, p, rec, later, ns = host_netns_, cancelled = ready_cancelled_] {
        if (ns >= 0) ::setns(ns, CLONE_NEWNET);  // this thread only
        cb(p, rec, *cancelled);
        note_record_written(p);
        // The digest came after the guest was ready: the entry again, with it
        // (whole: a write without the relay replaces the node's entry).
        std::string d = later ? later->wait(kDigestTimeoutMs + 10000) : "";
        if (d.empty() || *cancelled) return;
        Json whole(json_loads(rec.c_str(), 0, nullptr));  // vm_record's, so valid; never throws here
        if (!whole) return;
        json_object_set_new(whole.get(), "digest", json_string(d.c_str()));
        cb(p, json_dump(whole.get()), *cancelled);
    });
}

// Head node only, for an image file (a registry image's digest is its
// manifest's, in the plan): the digest read as the user on a thread of its
// own, from a copy of the checked descriptor, beside the guest's start.
void Keeper::start_digest() {
    if (p_.node_index != 0 || !p_.image_digest.empty() || !image_fd_) return;
    UniqueFd fd(::fcntl(image_fd_.get(), F_DUPFD_CLOEXEC, 3));
    if (!fd) return log::warn("no digest of the image: dup: " + std::string(std::strerror(errno)));
    DigestJob job;
    try {
        job.user = credentials_for(p_.uid, p_.gid);
    } catch (const Error& e) {
        return log::warn("no digest of the image: " + e.reason());
    }
    job.helper = {path_join(cfg_.libexec_dir, "slurm-vm-keeper"), "--image-digest"};
    job.timeout_ms = kDigestTimeoutMs;
    job.cache_dir = path_join(cfg_.state_dir, "digests");
    digest_ = std::make_shared<DigestState>();
    std::thread([st = digest_, fd = std::make_shared<UniqueFd>(std::move(fd)), job, id = p_.image_identity,
                 shown = p_.image] {
        std::string d;
        long t = now_ms();
        try {
            d = digest_as_user(fd->get(), id, shown, job);
            log::info("image digest " + d + " (as user " + job.user.user +
                      ", or the node's cache: " + std::to_string(now_ms() - t) + " ms)");
        } catch (const Error& e) {
            log::warn("no digest of the image: " + e.reason());
        }
        st->finish(d);
    }).detach();
}

// Lives as long as the guest (and the job: Slurm kills us with it); the
// job's end ends the guest at once.
int Keeper::live() {
    while (!g_stop) {
        try {
            cap_console(p_.console_log(), cfg_.console_max_kib * 1024);
        } catch (const Error& e) {
            log::warn("the console log was not capped: " + e.chain());
        }
        if (virDomainIsActive(dom_.get()) != 1) {
            std::string why = gone_why("the guest on " + p_.node + " shut down or crashed");
            report_failure({GuestState::Phase::stopped, why}, why);
            return 0;
        }
        pause_for(Milliseconds(250));
    }
    if (g_save && !p_.checkpoint_dir.empty() && save_guest()) return 0;
    log::debug("the job ended: ending the guest");
    long t_stop = now_ms();
    destroy_now(dom_.get(), p_.embed_root(), p_.domain_name);
    write_guest_state(p_, {GuestState::Phase::stopped, kJobEnded});
    log::info("guest destroyed: the job ended (" + std::to_string(now_ms() - t_stop) + " ms)");
    return 0;
}

int Keeper::run() {
    log::debug("keeper started");
    // QEMU, daemonized by libvirt (the guest and its capability probes),
    // becomes our child rather than init's, reaped as soon as it exits: an
    // init that reaps late (a container's) would otherwise leave it a zombie
    // that libvirt waits for, up to seconds, at every end of a guest and
    // twice in every capability probe.
    try {
        adopt_orphans_and_reap("qemu-system");
    } catch (const Error& e) {
        log::warn("QEMU is left to init to reap: " + e.chain());
    }
    if (o_.on_start) o_.on_start(p_);
    replace_file(p_.keeper_pid_file(), std::to_string(::getpid()) + "\n", 0644);
    ignore_job_signals();
    if (Failure f = confine()) return fail(*f);
    if (Failure f = enter_job_netns()) return fail(*f);
    start_connecting();
    if (Failure f = describe_guest()) return fail(*f);
    start_digest();
    for (auto step : {&Keeper::start_guest, &Keeper::start_guest_access})
        if (Failure f = (this->*step)()) return fail(*f);
    bool ready = false;
    if (Failure f = p_.restore_from.empty() ? wait_until_ready(ready) : resume_ready(ready)) return fail(*f);
    if (ready) note_ready();
    return live();
}

}  // namespace

int run_keeper(const KeeperOptions& o) {
    NodeConfig cfg = load_config(o.config_path, o.node);
    JobPlan p = load_plan(path_join(cfg.job_dir(o.job_id), "plan.json"));
    // The prolog refused the job (the reason is in the state): no guest.
    if (read_guest_state(p).phase == GuestState::Phase::failed) return 0;
    return Keeper(o, std::move(cfg), std::move(p)).run();
}

int image_digest_main(const char* fd_arg, const char* size_arg) {
    ::prctl(PR_SET_DUMPABLE, 0);
    try {
        char* end = nullptr;
        long fd = std::strtol(fd_arg, &end, 10);
        if (*end || fd < 3) SVM_THROW(std::string("bad descriptor ") + fd_arg);
        unsigned long long size = std::strtoull(size_arg, &end, 10);
        if (*end || !*size_arg) SVM_THROW(std::string("bad size ") + size_arg);
        std::printf("%s\n", image_digest(static_cast<int>(fd), size).c_str());
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "%s\n", e.reason().c_str());
        return 1;
    }
}

}  // namespace svm
