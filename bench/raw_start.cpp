// svm-bench-raw-start: the raw baseline of bench/run. Does what a VM job's
// host side minimally has to do, directly and with nothing of slurm-vm:
//
//   1. qemu-img create of the overlay (same command line as the prolog's),
//   2. an embedded libvirt root with the given qemu.conf and a warm QEMU
//      capabilities cache (the same settings as the keeper's),
//   3. virConnectOpen("qemu:///embed?root=...") + virDomainCreateXML of the
//      given domain XML (inside the guests' network namespace, as the keeper);
//      when the XML names a descriptor group for the backing image (as the
//      keeper's does: QEMU gets the image as a descriptor, never by path):
//      virDomainDefineXML + virDomainFDAssociate of the image opened
//      read-only + virDomainCreate, as the keeper,
//   4. optionally: until the guest's TCP port 22 accepts a connection,
//      or until its console log shows a text (KVM probe),
//   4b. optionally: a command once the wait succeeded (bench/run gives an
//      `ssh ... true` with the job's key: the first command over SSH),
//   5. optionally: virDomainDestroy and the removal of directories.
//
// Prints one JSON object of timings (milliseconds) on stdout, and whether
// libvirt found the capabilities cache stale and probed QEMU (caps_probed;
// the fresh capabilities then replace those of --caps-from, as the keeper
// refreshes the node's cache).
// On SIGTERM or SIGINT, and on any failure after the guest was created, the
// guest is destroyed before exiting.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "svm-bench-raw-start: %s\n", why.c_str());
    std::fflush(nullptr);
    ::_exit(1);  // not exit(): libvirt's embedded driver can hold up atexit for a minute
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "";
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_all(const std::string& path, const std::string& text, mode_t mode) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) die("open " + path + ": " + std::strerror(errno));
    if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) die("write " + path);
    ::close(fd);
}

// The capabilities files (*.xml) of one cache directory, copied into another.
void copy_caps(const std::string& from, const std::string& to) {
    DIR* d = ::opendir(from.c_str());
    if (!d) return;
    while (struct dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 4 && n.substr(n.size() - 4) == ".xml") write_all(to + "/" + n, read_all(from + "/" + n), 0644);
    }
    ::closedir(d);
}

void mkdirs(const std::string& path) {
    for (size_t i = 1; i <= path.size(); ++i) {
        if (i == path.size() || path[i] == '/') {
            std::string p = path.substr(0, i);
            if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) die("mkdir " + p + ": " + std::strerror(errno));
        }
    }
}

int run(const std::vector<std::string>& argv) {
    pid_t pid = ::fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        std::vector<char*> a;
        for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        ::execv(a[0], a.data());
        ::_exit(127);
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int rm_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

// The capabilities cache's files (name, size, ctime): libvirt rewrites them
// when it finds them stale and probes QEMU again (as the keeper checks).
std::string caps_fingerprint(const std::string& dir) {
    std::string out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (struct dirent* e = ::readdir(d)) {
            struct stat st;
            std::string n = e->d_name;
            if (n == "." || n == ".." || ::stat((dir + "/" + n).c_str(), &st) != 0) continue;
            out += n + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_ctim.tv_sec) + "." +
                   std::to_string(st.st_ctim.tv_nsec) + ";";
        }
        ::closedir(d);
    }
    return out;
}

std::string last_error() {
    virErrorPtr e = virGetLastError();
    return e && e->message ? e->message : "unknown libvirt error";
}

void ignore_error(void*, virErrorPtr) {}

bool port_open(const std::string& ip, int port) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    struct sockaddr_in sa {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
    bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    ::close(s);
    return ok;
}

void usage() {
    std::puts(
        "usage: svm-bench-raw-start --xml FILE --root DIR --qemu-conf FILE --caps-from DIR\n"
        "         [--overlay PATH --backing IMG --backing-format FMT --size BYTES [--qemu-img PATH] [--group GID]]\n"
        "         [--netns NAME] [--wait-ssh IP | --wait-console FILE:TEXT] [--timeout S]\n"
        "         [--exec SHELL-COMMAND] [--destroy] [--remove DIR]... [--virtiofs SOCKET=DIR]...\n"
        "       svm-bench-raw-start --warm-caps DIR [--qemu-conf FILE] [--emulator PATH] [--domain-type qemu|kvm]\n"
        "The raw baseline of bench/run; prints timings (ms) as JSON.");
}

struct Args {
    std::string xml_file, root, qemu_conf, caps_from, overlay, backing, backing_fmt, size,
        qemu_img = "/usr/bin/qemu-img";
    std::string netns, wait_ip, wait_console, warm_caps, exec_cmd;
    std::vector<std::string> remove_dirs, virtiofs;
    std::string virtiofsd_path =
        ::access("/usr/libexec/virtiofsd", X_OK) == 0 ? "/usr/libexec/virtiofsd" : "/usr/lib/qemu/virtiofsd";
    std::string emulator = "/usr/bin/qemu-system-x86_64", domain_type = "qemu";
    int gid = -1;
    double timeout_s = 300;
    bool destroy = false;
};

// The value options, by name.
std::string* string_option(Args& a, const std::string& name) {
    const std::pair<const char*, std::string*> options[] = {{"--xml", &a.xml_file},
                                                            {"--root", &a.root},
                                                            {"--qemu-conf", &a.qemu_conf},
                                                            {"--caps-from", &a.caps_from},
                                                            {"--overlay", &a.overlay},
                                                            {"--backing", &a.backing},
                                                            {"--backing-format", &a.backing_fmt},
                                                            {"--size", &a.size},
                                                            {"--qemu-img", &a.qemu_img},
                                                            {"--netns", &a.netns},
                                                            {"--wait-ssh", &a.wait_ip},
                                                            {"--wait-console", &a.wait_console},
                                                            {"--exec", &a.exec_cmd},
                                                            {"--warm-caps", &a.warm_caps},
                                                            {"--emulator", &a.emulator},
                                                            {"--domain-type", &a.domain_type}};
    for (const auto& [n, v] : options)
        if (name == n) return v;
    return nullptr;
}

// Exits with usage (status 0 for --help, 2 for anything unknown).
Args parse_args(int argc, char** argv) {
    Args args;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (std::string* v = string_option(args, a)) *v = next();
        else if (a == "--group") args.gid = std::atoi(next().c_str());
        else if (a == "--timeout") args.timeout_s = std::atof(next().c_str());
        else if (a == "--destroy") args.destroy = true;
        else if (a == "--remove") args.remove_dirs.push_back(next());
        else if (a == "--virtiofs") args.virtiofs.push_back(next());
        else {
            usage();
            std::exit(a == "--help" ? 0 : 2);
        }
    }
    return args;
}

// libvirt's default event loop in a thread (the embedded driver needs one).
void start_libvirt() {
    virInitialize();
    virSetErrorFunc(nullptr, ignore_error);
    if (virEventRegisterDefaultImpl() != 0) die("virEventRegisterDefaultImpl failed");
    std::thread([] {
        for (;;) virEventRunDefaultImpl();
    }).detach();
}

// Fills a capabilities cache once (untimed by bench/run): libvirt probes
// QEMU lazily, so a bare connection writes nothing; asking for the domain
// capabilities of the emulator makes it probe and cache.
int warm_caps(const Args& a) {
    start_libvirt();
    mkdirs(a.warm_caps + "/etc");
    if (!a.qemu_conf.empty()) write_all(a.warm_caps + "/etc/qemu.conf", read_all(a.qemu_conf), 0644);
    std::string uri = "qemu:///embed?root=" + a.warm_caps;
    virConnectPtr c = virConnectOpen(uri.c_str());
    if (!c) die("connect " + uri + ": " + last_error());
    char* caps = virConnectGetDomainCapabilities(c, a.emulator.c_str(), "x86_64", nullptr, a.domain_type.c_str(), 0);
    if (!caps) die("virConnectGetDomainCapabilities: " + last_error());
    std::free(caps);
    virConnectClose(c);
    std::printf("{\"warmed\": \"%s\"}\n", a.warm_caps.c_str());
    return 0;
}

// 1. The overlay.
void create_overlay(const Args& a) {
    if (run({a.qemu_img, "create", "-q", "-f", "qcow2", "-u", "-F", a.backing_fmt, "-b", a.backing, a.overlay,
             a.size}) != 0)
        die("qemu-img create " + a.overlay + " failed");
    if (a.gid >= 0 &&
        (::chown(a.overlay.c_str(), 0, static_cast<gid_t>(a.gid)) != 0 || ::chmod(a.overlay.c_str(), 0660) != 0))
        die("chown/chmod " + a.overlay);
}

// 1b. One share over virtio-fs, as an admin starts it by hand: virtiofsd as
// root on a socket path, waited for until it listens.
pid_t start_share(const Args& a, const std::string& spec) {
    auto eq = spec.find('=');
    if (eq == std::string::npos) die("--virtiofs wants SOCKET=DIR, not " + spec);
    std::string sock = spec.substr(0, eq), dir = spec.substr(eq + 1);
    ::unlink(sock.c_str());
    pid_t pid = ::fork();
    if (pid == 0) {
        // Ends with this process however it ends (die() exits without unwinding).
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0), ::dup2(null, 1), ::dup2(null, 2);
        ::execl(a.virtiofsd_path.c_str(), "virtiofsd", ("--socket-path=" + sock).c_str(), "-o",
                ("source=" + dir).c_str(), "-o", "cache=none", static_cast<char*>(nullptr));
        _exit(127);
    }
    if (pid < 0) die("fork");
    struct stat st;
    for (int i = 0; ::stat(sock.c_str(), &st) != 0; ++i) {
        if (i > 5000) die("virtiofsd did not make " + sock);
        ::usleep(1000);
    }
    if (a.gid >= 0 && (::chown(sock.c_str(), 0, static_cast<gid_t>(a.gid)) != 0 || ::chmod(sock.c_str(), 0660) != 0))
        die("chown/chmod " + sock);
    return pid;
}

// 2. The embedded root: qemu.conf and the capabilities cache; then 3a. into
// the guests' network namespace (this thread).
void prepare_root(const Args& a, const std::string& conf, const std::string& caps_dst) {
    mkdirs(a.root + "/etc");
    write_all(a.root + "/etc/qemu.conf", conf, 0644);
    mkdirs(caps_dst);
    copy_caps(a.caps_from + "/cache/qemu/capabilities", caps_dst);
    if (!a.netns.empty()) {
        std::string p = "/run/netns/" + a.netns;
        int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) die("enter network namespace " + p + ": " + std::strerror(errno));
        ::close(fd);
    }
}

struct Guest {
    virConnectPtr conn = nullptr;
    virDomainPtr dom = nullptr;
    bool defined = false;
    // Destroyed, undefined when defined, and closed.
    void end() {
        if (dom) {
            if (virDomainIsActive(dom) == 1) virDomainDestroy(dom);
            if (defined) virDomainUndefine(dom);
            virDomainFree(dom);
            dom = nullptr;
        }
        if (conn) virConnectClose(conn);
        conn = nullptr;
    }
    [[noreturn]] void fail(const std::string& why) {
        end();
        die(why);
    }
};

// 3b. Create the domain: from the XML alone, or (when it names a descriptor
// group) defined, the backing image associated read-only, then started.
void create_domain(Guest& g, const std::string& xml, const std::string& backing) {
    auto fdg = xml.find("fdgroup='");
    if (fdg == std::string::npos) {
        g.dom = virDomainCreateXML(g.conn, xml.c_str(), 0);
        if (!g.dom) die("virDomainCreateXML: " + last_error());
        return;
    }
    std::string group = xml.substr(fdg + 9, xml.find('\'', fdg + 9) - fdg - 9);
    int image_fd = ::open(backing.c_str(), O_RDONLY | O_CLOEXEC);
    if (image_fd < 0) die("open " + backing + ": " + std::strerror(errno));
    g.dom = virDomainDefineXML(g.conn, xml.c_str());
    if (!g.dom) die("virDomainDefineXML: " + last_error());
    g.defined = true;
    int fds[1] = {image_fd};
    if (virDomainFDAssociate(g.dom, group.c_str(), 1, fds, 0) != 0 || virDomainCreate(g.dom) != 0) {
        std::string why = last_error();
        virDomainUndefine(g.dom);
        die("virDomainFDAssociate + virDomainCreate: " + why);
    }
    ::close(image_fd);
}

// 4. Waits for port 22 or the console text; "ssh", "console", "stopped",
// "timeout" or "none" (nothing to wait for).
std::string wait_for_guest(const Args& a, Guest& g, double t_created) {
    if (a.wait_ip.empty() && a.wait_console.empty()) return "none";
    double deadline = t_created + a.timeout_s * 1000;
    std::string file, text;
    if (!a.wait_console.empty()) {
        auto c = a.wait_console.find(':');
        file = a.wait_console.substr(0, c);
        text = c == std::string::npos ? "" : a.wait_console.substr(c + 1);
    }
    for (;;) {
        if (g_stop) g.fail("interrupted");
        if (!a.wait_ip.empty() && port_open(a.wait_ip, 22)) return "ssh";
        if (!file.empty() && read_all(file).find(text) != std::string::npos) return "console";
        if (virDomainIsActive(g.dom) != 1) return "stopped";
        if (now_ms() > deadline) return "timeout";
        ::usleep(50000);
    }
}

// Without --destroy or --remove the guest lives until SIGTERM/SIGINT (this
// process owns it).
int live_until_stopped(Guest& g) {
    std::printf("{\"event\": \"created\"}\n");
    std::fflush(stdout);
    while (!g_stop && virDomainIsActive(g.dom) == 1) ::usleep(100000);
    g.end();
    return 0;
}

// The times of the steps (ms on the monotonic clock), as main takes them.
struct Timings {
    double t0 = 0, overlay = 0, root = 0, conn = 0, created = 0, waited = 0, exec = 0, destroyed = 0, removed = 0;
};

// The run's JSON line, which bench/run reads.
void report(const Timings& t, const std::string& waited_for, int exec_rc, bool caps_probed,
            const struct timespec& created_at) {
    std::printf(
        "{\"overlay_ms\": %.1f, \"root_ms\": %.1f, \"connect_ms\": %.1f, \"define_create_ms\": %.1f, "
        "\"start_ms\": %.1f, \"waited_for\": \"%s\", \"wait_ms\": %.1f, \"boot_ms\": %.1f, \"stopped_early\": %s, "
        "\"exec_ms\": %.1f, \"exec_rc\": %d, \"destroy_ms\": %.1f, \"remove_ms\": %.1f, \"teardown_ms\": %.1f, "
        "\"caps_probed\": %s, \"created_at\": %lld.%06ld}\n",
        t.overlay - t.t0, t.root - t.overlay, t.conn - t.root, t.created - t.conn, t.created - t.t0, waited_for.c_str(),
        t.waited - t.created, t.waited - t.conn, waited_for == "stopped" ? "true" : "false", t.exec - t.waited, exec_rc,
        t.destroyed - t.exec, t.removed - t.destroyed, t.removed - t.exec, caps_probed ? "true" : "false",
        static_cast<long long>(created_at.tv_sec), created_at.tv_nsec / 1000);
}

std::string read_or_die(const std::string& path) {
    std::string text = read_all(path);
    if (text.empty()) die("cannot read " + path);
    return text;
}

void on_stop_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parse_args(argc, argv);
    if (!a.warm_caps.empty()) return warm_caps(a);
    if (a.xml_file.empty() || a.root.empty() || a.qemu_conf.empty() || a.caps_from.empty()) {
        usage();
        return 2;
    }
    std::string xml = read_or_die(a.xml_file), conf = read_or_die(a.qemu_conf);
    on_stop_signals();
    start_libvirt();
    Timings t;
    t.t0 = now_ms();
    if (!a.overlay.empty()) create_overlay(a);
    t.overlay = now_ms();
    std::vector<pid_t> vfs_pids;
    for (const auto& v : a.virtiofs) vfs_pids.push_back(start_share(a, v));
    struct ShareReaper {
        std::vector<pid_t>& pids;
        ~ShareReaper() {
            for (pid_t p : pids) ::kill(p, SIGTERM), ::waitpid(p, nullptr, 0);
        }
    } share_reaper{vfs_pids};
    std::string caps_src = a.caps_from + "/cache/qemu/capabilities", caps_dst = a.root + "/cache/qemu/capabilities";
    prepare_root(a, conf, caps_dst);
    t.root = now_ms();
    std::string caps_before = caps_fingerprint(caps_dst);
    std::string uri = "qemu:///embed?root=" + a.root;
    Guest g;
    g.conn = virConnectOpen(uri.c_str());
    if (!g.conn) die("connect " + uri + ": " + last_error());
    t.conn = now_ms();
    create_domain(g, xml, a.backing);
    t.created = now_ms();
    struct timespec created_at;  // on the clock bench/run reads, for the time since it launched us
    clock_gettime(CLOCK_REALTIME, &created_at);
    bool caps_probed = caps_fingerprint(caps_dst) != caps_before;
    // As the keeper refreshes the node's cache: the next start finds fresh capabilities.
    if (caps_probed) copy_caps(caps_dst, caps_src);

    std::string waited_for = wait_for_guest(a, g, t.created);
    t.waited = waited_for == "none" ? t.created : now_ms();
    // 4b. The first command (in the network namespace, like the wait).
    int exec_rc = -1;
    if (!a.exec_cmd.empty() && (waited_for == "ssh" || waited_for == "console"))
        exec_rc = run({"/bin/sh", "-c", a.exec_cmd});
    t.exec = now_ms();
    if (!a.destroy && a.remove_dirs.empty()) return live_until_stopped(g);

    // 5. Tear down.
    if (virDomainIsActive(g.dom) == 1 && virDomainDestroy(g.dom) != 0) g.fail("virDomainDestroy: " + last_error());
    g.end();
    t.destroyed = now_ms();
    for (const auto& dir : a.remove_dirs) ::nftw(dir.c_str(), rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    t.removed = now_ms();
    report(t, waited_for, exec_rc, caps_probed, created_at);
    return 0;
}
