// Shares over virtio-fs: the domain, the seed, the configuration, and the
// identity virtiofsd really runs with (root needed for the last part).
#include <fcntl.h>
#include <linux/nsfs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "catch.hpp"

#include "domain_xml.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "job_plan.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "support.hpp"
#include "virtiofs.hpp"

namespace {
using svm::test::domain_validates;

svm::DomainSpec share_domain() {
    svm::DomainSpec s;
    s.name = "slurm-vm-42-node1";
    s.type = "qemu";
    s.memory_mib = 1024;
    s.host_cpus = {0, 1};
    s.overlay = "/run/slurm-vm/node1/job_42/overlay.qcow2";
    s.base = "/home/alice/disk.qcow2";
    s.base_format = "qcow2";
    s.shares = {{"/home/alice", "svmshare0", "/run/slurm-vm/node1/job_42/share0.sock"},
                {"/scratch/alice", "svmshare1", "/run/slurm-vm/node1/job_42/share1.sock"}};
    return s;
}

// "Uid:" or "Gid:" of /proc/PID/status: real, effective, saved, fs.
std::string status_line(pid_t pid, const std::string& key) {
    std::string s = svm::read_file("/proc/" + std::to_string(pid) + "/status");
    auto at = s.find("\n" + key);
    REQUIRE(at != std::string::npos);
    auto end = s.find('\n', at + 1);
    std::string line = s.substr(at + 1 + key.size(), end - at - 1 - key.size());
    for (auto& c : line)
        if (c == '\t') c = ' ';
    return svm::trim(line);
}

}  // namespace

TEST_CASE("virtio-fs shares: vhost-user sockets, shared guest memory, valid for libvirt", "[virtiofs]") {
    svm::DomainSpec s = share_domain();
    std::string x = svm::domain_xml(s);
    CHECK(
        x.find(
            "<driver type='virtiofs' queue='1024'/>\n      <source socket='/run/slurm-vm/node1/job_42/share0.sock'/>\n"
            "      <target dir='svmshare0'/>") != std::string::npos);
    CHECK(x.find("<source type='memfd'/>\n    <access mode='shared'/>") != std::string::npos);
    // The user's directory is never named to libvirt or QEMU.
    CHECK(x.find("/home/alice'") == std::string::npos);
    CHECK(x.find("accessmode='squash'") == std::string::npos);
    // A TCG guest's translation cache is bounded (QEMU's default: 1 GiB).
    CHECK(x.find("<tb-cache unit='MiB'>256</tb-cache>") != std::string::npos);
    CHECK(domain_validates(x));

    s.hugepage_kib = 2048;
    x = svm::domain_xml(s);
    CHECK(x.find("</hugepages>\n    <access mode='shared'/>\n  </memoryBacking>") != std::string::npos);
    CHECK(x.find("memfd") == std::string::npos);
    CHECK(domain_validates(x));

    // 9p: QEMU serves the directory; guest memory stays private.
    for (auto& sh : s.shares) sh.socket.clear();
    s.hugepage_kib = 0;
    x = svm::domain_xml(s);
    CHECK(x.find("<filesystem type='mount' accessmode='squash'>\n      <source dir='/home/alice'/>") !=
          std::string::npos);
    CHECK(x.find("memoryBacking") == std::string::npos);
    CHECK(domain_validates(x));
}

TEST_CASE("the seed mounts shares over the plan's file system and names what an image lacks", "[virtiofs]") {
    svm::JobPlan p;
    p.job_id = 42;
    p.shares = {"/home/alice", "/home/alice/run dir"};
    p.shares_via = "virtiofs";
    std::string s = svm::seed_mounts_script(p);
    CHECK(s.find("SVM_SHARES='/home/alice\n/home/alice/run dir'\nSVM_SHARES_VIA='virtiofs'\n") == 0);
    CHECK(s.find("svm_fs virtiofs || modprobe virtiofs") <
          s.find("svm_fs \"$fs\" || fail \"the image's kernel has no "));
    CHECK(svm::run({"/bin/sh", "-n"}, {.stdin_data = "fail() { :; }\n" + s}).status == 0);

    p.shares_via = "9p";
    s = svm::seed_mounts_script(p);
    CHECK(s.find("SVM_SHARES_VIA='9p'\n") != std::string::npos);
    // A path with a line break cannot be one of the lines.
    p.shares.push_back("/home/alice/a\nb");
    CHECK_THROWS_WITH(svm::seed_mounts_script(p), Catch::Contains("holds a line break"));

    p.shares.clear();
    CHECK(svm::seed_mounts_script(p).empty());
}

namespace {
// seed_mounts_script run with stand-ins for modprobe (it adds the file system
// to the kernel's list unless `loads` is false) and mount, which log their
// calls; the kernel's list starts as `listed`.
std::string shares_calls(const svm::JobPlan& p, const std::string& listed, bool loads, int* status = nullptr) {
    svm::test::TempDir d("svm-shares");
    std::string bin = svm::path_join(d.path(), "bin"), log = svm::path_join(d.path(), "calls");
    std::string fs = svm::path_join(d.path(), "filesystems");
    svm::mkdir_p(bin, 0755);
    svm::write_file_atomic(fs, listed, 0644);
    std::string q = svm::shell_quote(log);
    svm::write_file_atomic(svm::path_join(bin, "modprobe"),
                           "#!/bin/sh\necho \"modprobe $*\" >>" + q + "\n" +
                               (loads ? "printf 'nodev\\t%s\\n' \"$1\" >>" + svm::shell_quote(fs) + "\n" : ""),
                           0755);
    svm::write_file_atomic(svm::path_join(bin, "mount"), "#!/bin/sh\necho \"mount $*\" >>" + q + "\n", 0755);
    std::string script = "PATH=" + bin + ":$PATH\nfail() { echo \"failed: $*\" >>" + q + "; exit 1; }\n" +
                         svm::seed_mounts_script(p, fs) + "wait \"$svm_mounts\"\n";
    int rc = svm::run({"/bin/sh", "-c", script}).status;
    if (status) *status = rc;
    std::string calls;
    svm::read_file_if_exists(log, calls);
    return calls;
}
}  // namespace

TEST_CASE("the seed loads the share's file system only when the kernel lacks it and makes missing mount points",
          "[virtiofs]") {
    svm::test::TempDir d("svm-mnt");
    svm::JobPlan p;
    p.shares = {svm::path_join(d.path(), "home"), svm::path_join(d.path(), "new dir")};
    svm::mkdir_p(p.shares[0], 0755);
    p.shares_via = "virtiofs";
    const std::string mounts =
        "mount -t virtiofs svmshare0 " + p.shares[0] + "\nmount -t virtiofs svmshare1 " + p.shares[1] + "\n";
    CHECK(shares_calls(p, "nodev\tproc\n\text4\nnodev\tvirtiofs\n", true) == mounts);
    CHECK(svm::path_exists(p.shares[1]));
    CHECK(shares_calls(p, "nodev\tproc\n\text4\n", true) == "modprobe virtiofs\n" + mounts);
    int rc = 0;
    CHECK(
        shares_calls(p, "nodev\tproc\n", false, &rc) ==
        "modprobe virtiofs\nfailed: the image's kernel has no virtiofs file system (CONFIG_VIRTIO_FS: every current "
        "distribution kernel has it as the module virtiofs), so the job's directories cannot be shown in the guest\n");
    CHECK(rc == 1);
    p.shares_via = "9p";
    CHECK(shares_calls(p, "nodev\tproc\n", true).rfind("modprobe 9pnet_virtio\nmodprobe 9p\nmount -t 9p", 0) == 0);
}

TEST_CASE("virtiofsd's command line: the share, its sandbox, the socket descriptor", "[virtiofs]") {
    svm::VirtiofsdSpec s;
    s.source = "/home/alice";
    s.mark = svm::virtiofsd_mark(42, 1);
    auto a = svm::virtiofsd_argv(s, 3);
    REQUIRE(a.size() >= 4);
    CHECK(a[0] == "slurm-vm-virtiofsd:job=42:share=1:");
    CHECK(a[1] == "--fd=3");
    CHECK(std::find(a.begin(), a.end(), "source=/home/alice") != a.end());
    CHECK(std::find(a.begin(), a.end(), "sandbox=namespace") != a.end());
    s.source = "/home/a,b";  // -o would split it
    CHECK_THROWS_AS(svm::virtiofsd_argv(s, 3), svm::Error);
    s.source = "relative";
    CHECK_THROWS_AS(svm::virtiofsd_argv(s, 3), svm::Error);
}

TEST_CASE("the Rust virtiofsd: its options, the guest user as the namespace's root", "[virtiofs]") {
    CHECK(svm::virtiofsd_kind_of_version("virtiofsd 1.13.2\n") == svm::VirtiofsdKind::rust);
    CHECK(svm::virtiofsd_kind_of_version("virtiofsd version 7.2.22 (Debian 1:7.2+dfsg-7)\nCopyright\n") ==
          svm::VirtiofsdKind::qemu);
    CHECK_THROWS_WITH(svm::virtiofsd_kind_of_version("virtiofsd: unknown option\n"), Catch::Contains("cannot tell"));
    svm::VirtiofsdSpec s;
    s.source = "/home/alice";
    s.mark = svm::virtiofsd_mark(42, 0);
    s.uid = 2001;
    s.gid = 3001;
    s.kind = svm::VirtiofsdKind::rust;
    auto a = svm::virtiofsd_argv(s, 3);
    auto has = [&](const char* x) { return std::find(a.begin(), a.end(), x) != a.end(); };
    CHECK(a[0] == "slurm-vm-virtiofsd:job=42:share=0:");
    CHECK(has("--fd=3"));
    CHECK(has("--shared-dir=/home/alice"));
    CHECK(has("--sandbox=namespace"));
    CHECK(has("--cache=never"));
    CHECK(has("--translate-uid=forbid-guest:0:1"));  // the guest's root: refused, as by QEMU's
    CHECK(has("--translate-gid=forbid-guest:0:1"));
    CHECK(has("--translate-uid=map:2001:0:1"));
    CHECK(has("--translate-gid=map:3001:0:1"));
    CHECK_FALSE(has("-o"));  // QEMU's compatibility options: deprecated there
}

TEST_CASE("virtiofsd's kind is asked once per version of the program", "[virtiofs]") {
    svm::test::TempDir t;
    const std::string bin = t.path() + "/virtiofsd", runs = t.path() + "/runs", cache = t.path() + "/kinds";
    svm::write_file_atomic(bin, "#!/bin/sh\necho run >> " + runs + "\necho 'virtiofsd 1.13.2'\n", 0755);
    auto count = [&] {
        std::string s;
        svm::read_file_if_exists(runs, s);
        return std::count(s.begin(), s.end(), '\n');
    };
    CHECK(svm::virtiofsd_kind(bin, cache) == svm::VirtiofsdKind::rust);
    CHECK(svm::virtiofsd_kind(bin, cache) == svm::VirtiofsdKind::rust);
    CHECK(count() == 1);
    struct stat st;
    REQUIRE(::stat(cache.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    // Another program at the same path (an upgrade): asked again.
    svm::write_file_atomic(bin, "#!/bin/sh\necho run >> " + runs + "\necho 'virtiofsd version 7.2.22'\n", 0755);
    CHECK(svm::virtiofsd_kind(bin, cache) == svm::VirtiofsdKind::qemu);
    CHECK(count() == 2);
    // Without a cache, every time.
    CHECK(svm::virtiofsd_kind(bin) == svm::VirtiofsdKind::qemu);
    CHECK(count() == 3);
}

TEST_CASE("virtiofsd runs as the user, in a user namespace root owns, out of the user's ptrace reach", "[virtiofs]") {
    if (::geteuid() != 0) FAIL("needs root (it starts virtiofsd as another user)");
    const uid_t uid = 65534;
    const gid_t gid = 65534, job_gid = 0x70000000u + 42;
    svm::test::TempDir d_dir("svm-vfs");
    std::string d = d_dir.path();
    REQUIRE(::chmod(d.c_str(), 0755) == 0);
    std::string share = d + "/share";
    REQUIRE(::mkdir(share.c_str(), 0700) == 0);
    REQUIRE(::chown(share.c_str(), uid, gid) == 0);
    std::string binary = svm::find_virtiofsd("");
    svm::VirtiofsdSpec s{binary, share,   svm::virtiofsd_mark(42, 0), uid, gid,
                         {gid},  job_gid, svm::virtiofsd_kind(binary)};
    svm::UniqueFd log(::open((d + "/log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    pid_t pid = svm::start_virtiofsd(s, d + "/s.sock", log.get());
    // Until it has exec'd, /proc shows the keeper's image.
    for (int i = 0; i < 200 && svm::read_file("/proc/" + std::to_string(pid) + "/cmdline").find("slurm-vm-virtiofsd") ==
                                   std::string::npos;
         ++i)
        ::usleep(10000);
    INFO(svm::read_file(d + "/log"));
    CHECK(svm::read_file("/proc/" + std::to_string(pid) + "/cmdline").rfind("slurm-vm-virtiofsd:job=42:share=0:", 0) ==
          0);
    CHECK(status_line(pid, "Uid:") == "65534 65534 65534 65534");
    CHECK(status_line(pid, "Gid:") == "65534 65534 65534 65534");
    // Its user namespace is root's, not the user's.
    svm::UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(ns);
    uid_t owner = 12345;
    REQUIRE(::ioctl(ns.get(), NS_GET_OWNER_UID, &owner) == 0);
    CHECK(owner == 0);
    // The socket: root's, for the job's group only.
    struct stat st;
    REQUIRE(::stat((d + "/s.sock").c_str(), &st) == 0);
    CHECK(st.st_uid == 0);
    CHECK(st.st_gid == job_gid);
    CHECK((st.st_mode & 0777) == 0660);
    // The attack: the same user (same uid and groups) reads its environment
    // (what ptrace would give; the guest's memory is mapped there). Refused:
    // root owns its user namespace.
    auto r = svm::run_function_as(svm::Credentials{uid, gid, {gid}, ""}, [&](int) {
        int fd = ::open(("/proc/" + std::to_string(pid) + "/environ").c_str(), O_RDONLY);
        return fd < 0 && errno == EACCES ? 0 : 1;
    });
    CHECK(r.status == 0);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}
