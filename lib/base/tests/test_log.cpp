// Logging (lib/base/log.hpp); the AdminComment record: slurm/tests/test_admin_comment.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <regex>
#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "support.hpp"

namespace {

using svm::test::TempDir;

// Captures this process's stderr (fd 2) while alive.
struct StderrCapture {
    std::string file;
    int saved = -1;
    explicit StderrCapture(const std::string& dir) : file(svm::path_join(dir, "stderr")) {
        std::fflush(stderr);
        saved = ::dup(2);
        int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(fd, 2);
        ::close(fd);
    }
    std::string text() {
        std::fflush(stderr);
        return svm::read_file(file);
    }
    ~StderrCapture() {
        std::fflush(stderr);
        ::dup2(saved, 2);
        ::close(saved);
    }
};

mode_t mode_of(const std::string& p) {
    struct stat st;
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

// test-prog's logger for job `job` on `node`: stderr with the usual prefix,
// and the job's own file under log_dir; its setup.
svm::log::Setup start_job_logger(uint32_t job, const std::string& node, const std::string& log_dir) {
    svm::log::Setup s;
    s.program = "test-prog";
    s.job_id = job;
    s.node = node;
    s.stderr_prefix = "slurm-vm: ";
    svm::log::init(s);
    svm::log::add_job_file(log_dir);
    return s;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::string line;
    for (char c : text) {
        if (c == '\n') {
            out.push_back(line);
            line.clear();
        } else {
            line += c;
        }
    }
    if (!line.empty()) out.push_back(line);
    return out;
}

void write_to(const std::string& path, const std::string& text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
}

void set_age_days(const std::string& path, int days) {
    struct timeval tv[2];
    tv[0].tv_sec = tv[1].tv_sec = ::time(nullptr) - days * 86400L;
    tv[0].tv_usec = tv[1].tv_usec = 0;
    REQUIRE(::lutimes(path.c_str(), tv) == 0);
}

}  // namespace

TEST_CASE("log line formats carry the program, the job and the node") {
    svm::log::Setup s;
    s.program = "slurm-vm-prolog";
    s.job_id = 42;
    s.node = "node1";
    s.stderr_prefix = "slurm-vm: ";
    CHECK(svm::log::job_tag(42, "node1") == "job 42 on node1");
    CHECK(svm::log::job_tag(42, "") == "job 42");
    CHECK(svm::log::job_tag(0, "node1") == "node1");
    CHECK(svm::log::job_tag(0, "") == "");
    CHECK(svm::log::syslog_pattern(s) == "job 42 on node1: %v");
    CHECK(svm::log::stderr_pattern(s) == "slurm-vm: job 42: %v");
    CHECK(svm::log::file_pattern(s) == "%Y-%m-%dT%H:%M:%S.%e%z slurm-vm-prolog[%P] %l: job 42 on node1: %v");
    s.node = "n%d";  // a '%' in a name is a literal, not a pattern flag
    CHECK(svm::log::syslog_pattern(s) == "job 42 on n%%d: %v");
    s.job_id = 0;
    s.node.clear();
    CHECK(svm::log::stderr_pattern(s) == "slurm-vm: %v");
}

TEST_CASE("the logger writes stderr and the per-job file, created on the first line, 0640 in 0750") {
    TempDir t;
    std::string log_dir = svm::path_join(t.path(), "log");
    std::string file = svm::path_join(log_dir, "nodeA/job_42.log");
    StderrCapture cap(t.path());
    svm::log::Setup s = start_job_logger(42, "nodeA", log_dir);
    CHECK_FALSE(svm::path_exists(file));  // a plain job leaves no file
    svm::log::info("guest prepared on nodeA");
    svm::log::error("refused: the image {0} %s has a backing file");  // no formatting of messages
    try {
        SVM_THROW("open /x: denied");
    } catch (const svm::Error& e) {
        svm::log::error(e);
    }
    svm::log::shutdown();

    REQUIRE(svm::path_exists(file));
    CHECK(mode_of(file) == 0640);
    CHECK(mode_of(svm::path_join(log_dir, "nodeA")) == 0750);
    auto lines = lines_of(svm::read_file(file));
    REQUIRE(lines.size() == 4);
    std::regex line(
        R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d test-prog\[\d+\] (info|error|debug): job 42 on nodeA: .*)");
    for (const auto& l : lines) CHECK(std::regex_match(l, line));
    CHECK(lines[0].find("] info: job 42 on nodeA: guest prepared on nodeA") != std::string::npos);
    CHECK(lines[1].find("] error: job 42 on nodeA: refused: the image {0} %s has a backing file") != std::string::npos);
    CHECK(lines[2].find("] error: job 42 on nodeA: open /x: denied") != std::string::npos);
    CHECK(lines[3].find("] debug: job 42 on nodeA:   at open /x: denied (") != std::string::npos);

    auto err = lines_of(cap.text());
    REQUIRE(err.size() == 4);
    CHECK(err[0] == "slurm-vm: job 42: guest prepared on nodeA");
    CHECK(err[1] == "slurm-vm: job 42: refused: the image {0} %s has a backing file");
    CHECK(err[2] == "slurm-vm: job 42: open /x: denied");

    // The next process of the job (keeper, epilog) appends.
    s.program = "test-epilog";
    s.to_stderr = false;
    svm::log::init(s);
    svm::log::add_job_file(log_dir);
    svm::log::info("everything undone");
    svm::log::shutdown();
    lines = lines_of(svm::read_file(file));
    REQUIRE(lines.size() == 5);
    CHECK(lines[4].find(" test-epilog[") != std::string::npos);
    CHECK(lines[4].find("info: job 42 on nodeA: everything undone") != std::string::npos);
}

TEST_CASE("user-controlled text reaches a log line with no control character") {
    using svm::log::neutralise;
    // C0 (ESC, BEL, CR, backspace), DEL, C1 in UTF-8 (U+009B is CSI, U+0085
    // NEL), a lone 8-bit CSI byte and broken UTF-8: each one '?'.
    CHECK(neutralise("a\x1b[2Jb\x07\r\x08\x7f", false) == "a?[2Jb????");
    CHECK(neutralise("x\xc2\x9b"
                     "31my\xc2\x85z",
                     false) == "x?31my?z");
    CHECK(neutralise("\x9b"
                     "1m\xc0\xaf\xed\xa0\x80\xe2\x82",
                     false) == "?1m???????");
    // Printable UTF-8 is kept (U+00A0 and up, CJK, emoji), newlines and tabs only when asked.
    CHECK(neutralise("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", false) ==
          "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
    CHECK(neutralise("a\nb\tc", false) == "a?b?c");
    CHECK(neutralise("a\nb\tc", true) == "a\nb\tc");
    CHECK(svm::log::printable("boot\r\n\x1b]0;title\x07ok\xc2\x9b") == "boot\n?]0;title?ok?");

    // Through the logger: a job name with escapes and a forged second line.
    TempDir t;
    std::string log_dir = svm::path_join(t.path(), "log");
    StderrCapture cap(t.path());
    svm::log::Setup s;
    s.program = "test-prog";
    s.job_id = 7;
    s.node = "nodeA";
    svm::log::init(s);
    svm::log::add_job_file(log_dir);
    svm::log::info(
        "job name x\x1b[1A\x1b[2K\rroot: fake\nline two \xc2\x9b"
        "0m");
    svm::log::warn("no newline \x1b]8;;http://x\x1b\\ here");
    svm::log::shutdown();
    for (const std::string& text : {svm::read_file(svm::path_join(log_dir, "nodeA/job_7.log")), cap.text()}) {
        auto lines = lines_of(text);
        REQUIRE(lines.size() == 2);
        CHECK(lines[0].find("job name x?[1A?[2K?root: fake | line two ?0m") != std::string::npos);
        CHECK(lines[1].find("no newline ?]8;;http://x?\\ here") != std::string::npos);
        for (unsigned char c : text) CHECK((c == '\n' || (c >= 0x20 && c < 0x7f)));
    }
}

TEST_CASE("a user's stderr-only logger never writes a file") {
    TempDir t;
    StderrCapture cap(t.path());
    svm::log::Setup s;
    s.program = "slurm-vm-exec";
    s.job_id = 7;
    s.stderr_prefix = "slurm-vm: ";
    s.stderr_level = svm::log::Level::info;
    svm::log::init(s);
    svm::log::add_job_file(svm::path_join(t.path(), "log"));  // no node: no file
    svm::log::debug("not shown");
    svm::log::error("the guest on node1 shut down or crashed");
    svm::log::shutdown();
    CHECK(cap.text() == "slurm-vm: job 7: the guest on node1 shut down or crashed\n");
    CHECK_FALSE(svm::path_exists(svm::path_join(t.path(), "log")));
}

TEST_CASE("a per-job log file is never opened through a symlink or in a directory others control") {
    TempDir t;
    std::string log_dir = svm::path_join(t.path(), "log");
    std::string target = svm::path_join(t.path(), "victim");
    write_to(target, "precious\n");
    {
        auto fd = svm::log::open_job_log(log_dir, "n1", "job_1.log");
        CHECK(fd);
    }
    CHECK(mode_of(log_dir) == 0750);
    std::string node_dir = svm::path_join(log_dir, "n1");

    // A symlink in place of the file.
    REQUIRE(::symlink(target.c_str(), svm::path_join(node_dir, "job_2.log").c_str()) == 0);
    CHECK_THROWS_WITH(svm::log::open_job_log(log_dir, "n1", "job_2.log"), Catch::Contains("symlink"));
    // A hard link to another file.
    REQUIRE(::link(target.c_str(), svm::path_join(node_dir, "job_3.log").c_str()) == 0);
    CHECK_THROWS_WITH(svm::log::open_job_log(log_dir, "n1", "job_3.log"), Catch::Contains("links"));
    // A FIFO.
    REQUIRE(::mkfifo(svm::path_join(node_dir, "job_4.log").c_str(), 0600) == 0);
    CHECK_THROWS(svm::log::open_job_log(log_dir, "n1", "job_4.log"));
    CHECK(svm::read_file(target) == "precious\n");

    // A symlinked node directory.
    std::string elsewhere = svm::path_join(t.path(), "elsewhere");
    svm::mkdir_p(elsewhere, 0750);
    REQUIRE(::symlink(elsewhere.c_str(), svm::path_join(log_dir, "n2").c_str()) == 0);
    CHECK_THROWS_WITH(svm::log::open_job_log(log_dir, "n2", "job_1.log"), Catch::Contains("symlink"));
    CHECK(svm::list_dir(elsewhere).empty());

    // A log_dir others may write to.
    std::string open_dir = svm::path_join(t.path(), "open");
    svm::mkdir_p(open_dir, 0755);
    ::chmod(open_dir.c_str(), 01777);
    CHECK_THROWS_WITH(svm::log::open_job_log(open_dir, "n1", "job_1.log"), Catch::Contains("written by others"));

    // Names that are not one path component; a relative log_dir.
    CHECK_THROWS(svm::log::open_job_log(log_dir, "../n1", "job_1.log"));
    CHECK_THROWS(svm::log::open_job_log(log_dir, "..", "job_1.log"));
    CHECK_THROWS(svm::log::open_job_log(log_dir, "n1", "a/b"));
    CHECK_THROWS(svm::log::open_job_log("relative/log", "n1", "job_1.log"));

    // A file that belongs to somebody else (needs root to make one).
    if (::geteuid() == 0) {
        std::string foreign = svm::path_join(node_dir, "job_5.log");
        write_to(foreign, "");
        REQUIRE(::chown(foreign.c_str(), 12345, 12345) == 0);
        CHECK_THROWS_WITH(svm::log::open_job_log(log_dir, "n1", "job_5.log"), Catch::Contains("uid 12345"));
    }
}

TEST_CASE("the logger reports a refused per-job file once and goes on") {
    TempDir t;
    std::string log_dir = svm::path_join(t.path(), "log");
    svm::mkdir_p(svm::path_join(log_dir, "nodeB"), 0750);
    std::string target = svm::path_join(t.path(), "victim");
    write_to(target, "precious\n");
    REQUIRE(::symlink(target.c_str(), svm::path_join(log_dir, "nodeB/job_9.log").c_str()) == 0);
    StderrCapture cap(t.path());
    start_job_logger(9, "nodeB", log_dir);
    svm::log::info("one");
    svm::log::info("two");
    svm::log::shutdown();
    auto err = lines_of(cap.text());
    REQUIRE(err.size() == 3);
    CHECK(err[0] == "slurm-vm: job 9: one");
    CHECK(err[1].find("slurm-vm: job 9: no per-job log file: ") == 0);
    CHECK(err[1].find("is a symlink") != std::string::npos);
    CHECK(err[2] == "slurm-vm: job 9: two");
    CHECK(svm::read_file(target) == "precious\n");
}

TEST_CASE("a failed guest's console is kept for admins, its tail for the user") {
    TempDir t;
    std::string log_dir = svm::path_join(t.path(), "log");
    std::string console = svm::path_join(t.path(), "console.log");
    std::string text;
    for (int i = 1; i <= 30; ++i) text += "boot line " + std::to_string(i) + "\n";
    write_to(console, text);
    std::string kept = svm::log::keep_console(console, log_dir, "n1", 42);
    CHECK(kept == svm::path_join(log_dir, "n1/job_42.console.log"));
    std::string got = svm::read_file(kept);
    CHECK(got.rfind("=== console of the guest of job 42 on n1, kept ", 0) == 0);
    CHECK(got.find(text) != std::string::npos);
    CHECK(mode_of(kept) == 0640);
    // Only the end of a large console.
    kept = svm::log::keep_console(console, log_dir, "n1", 43, 20);
    got = svm::read_file(kept);
    CHECK(got.find("(last 20 bytes)") != std::string::npos);
    CHECK(got.substr(got.size() - 13) == "boot line 30\n");
    // An empty console: nothing kept; a symlinked one: refused.
    write_to(svm::path_join(t.path(), "empty.log"), "");
    CHECK(svm::log::keep_console(svm::path_join(t.path(), "empty.log"), log_dir, "n1", 44).empty());
    CHECK_FALSE(svm::path_exists(svm::path_join(log_dir, "n1/job_44.console.log")));
    REQUIRE(::symlink("/etc/shadow", svm::path_join(t.path(), "link.log").c_str()) == 0);
    CHECK_THROWS(svm::log::keep_console(svm::path_join(t.path(), "link.log"), log_dir, "n1", 45));

    CHECK(svm::log::one_line("scontrol: error: a\nscontrol: fatal: b\n") == "scontrol: error: a | scontrol: fatal: b");
    CHECK(svm::log::tail_lines(text, 2) == "boot line 29\nboot line 30\n");
    CHECK(svm::log::tail_lines("a\nb", 5) == "a\nb\n");
    CHECK(svm::log::tail_lines("", 5).empty());
    CHECK(svm::log::tail_lines(text, 20).find("boot line 11\n") == 0);
}

TEST_CASE("sweep prunes per-job log files of ended jobs past their age, nothing else") {
    TempDir t;
    std::string d = svm::path_join(t.path(), "n1");
    svm::mkdir_p(d, 0750);
    for (const char* n : {"job_1.log", "job_1.console.log", "job_2.log", "job_3.log", "notes.txt", "job_x.log"}) {
        write_to(svm::path_join(d, n), "x\n");
        set_age_days(svm::path_join(d, n), 40);
    }
    set_age_days(svm::path_join(d, "job_2.log"), 5);  // recent
    std::set<uint32_t> live = {3};                    // still running
    auto would = svm::log::prune_job_logs(d, 30, live, ::time(nullptr), true);
    CHECK(would == std::vector<std::string>{"job_1.console.log", "job_1.log"});
    CHECK(svm::path_exists(svm::path_join(d, "job_1.log")));
    auto done = svm::log::prune_job_logs(d, 30, live, ::time(nullptr), false);
    CHECK(done == would);
    CHECK(svm::list_dir(d) == std::vector<std::string>{"job_2.log", "job_3.log", "job_x.log", "notes.txt"});
    CHECK(svm::log::prune_job_logs(d, 0, {}, ::time(nullptr), false).empty());  // 0 keeps all
    CHECK(svm::log::prune_job_logs(svm::path_join(t.path(), "missing"), 30, {}, ::time(nullptr), false).empty());
}
