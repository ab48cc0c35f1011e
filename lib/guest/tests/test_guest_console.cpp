// `slurm-vm console` (guest_console.hpp): who may read a guest's console, the
// step that fetches it, and what is shown.
#include <fcntl.h>
#include <unistd.h>

#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "guest_console.hpp"

TEST_CASE("console: root and the job's owner only", "[console]") {
    CHECK(svm::console_allowed(0, 2001));
    CHECK(svm::console_allowed(2001, 2001));
    CHECK_FALSE(svm::console_allowed(2002, 2001));
    CHECK_FALSE(svm::console_allowed(65534, 2001));
}

TEST_CASE("console: the step that fetches it", "[console]") {
    using V = std::vector<std::string>;
    CHECK(svm::console_srun_argv(42, "") ==
          V{"srun", "--jobid=42", "--overlap", "--quiet", "-N1", "-n1", "--relative=0", "--vm-console", "true"});
    CHECK(svm::console_srun_argv(42, "node2") ==
          V{"srun", "--jobid=42", "--overlap", "--quiet", "-N1", "-n1", "--nodelist=node2", "--vm-console", "true"});
    CHECK(svm::parse_job_id("42") == 42);
    CHECK_THROWS_AS(svm::parse_job_id("42;rm"), svm::Error);
    CHECK_THROWS_AS(svm::parse_job_id("-1"), svm::Error);
    CHECK_THROWS_AS(svm::parse_job_id(""), svm::Error);
    CHECK_THROWS_AS(svm::parse_job_id("99999999999"), svm::Error);
}

TEST_CASE("console: printable, the end of a long one, from its start", "[console]") {
    char t[] = "/tmp/svm-console-XXXXXX";
    int fd = mkstemp(t);
    REQUIRE(fd >= 0);
    std::string text = "boot\x1b]0;title\x07 line\r\nsecond\n";
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    std::string shown = svm::read_console(fd);
    CHECK(shown.find('\x1b') == std::string::npos);
    CHECK(shown.find('\r') == std::string::npos);
    CHECK(shown.find("second\n") != std::string::npos);
    // Past the cap: the last bytes, from a line start.
    std::string more;
    for (int i = 0; i < 100; ++i) more += "line " + std::to_string(i) + "\n";
    REQUIRE(::write(fd, more.data(), more.size()) == static_cast<ssize_t>(more.size()));
    shown = svm::read_console(fd, 64);
    CHECK(shown.rfind("line 99\n") != std::string::npos);
    CHECK(shown.find("boot") == std::string::npos);
    CHECK(shown.rfind("line ", 0) == 0);
    ::close(fd);
    ::unlink(t);
}
