// allow_exec_only: after it, only the allowed programs run (in a child, as
// the restriction cannot be undone).
#include "catch.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include "exec_guard.hpp"

namespace {
// In a child: restrict to `allowed`, then exec `program`; its exit status,
// 100 when the restriction failed, 101 when exec failed with EACCES.
int exec_after_guard(const std::vector<std::string>& allowed, const char* program) {
    pid_t pid = ::fork();
    if (pid == 0) {
        if (!svm::allow_exec_only(allowed).empty()) ::_exit(100);
        char* argv[] = {const_cast<char*>(program), nullptr};
        ::execv(program, argv);
        ::_exit(errno == EACCES ? 101 : 102);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
}  // namespace

TEST_CASE("exec guard: only the allowed programs run afterwards", "[exec_guard]") {
    std::string interp = svm::elf_interpreter("/bin/true");
    REQUIRE_FALSE(interp.empty());
    CHECK(exec_after_guard({"/bin/true", interp}, "/bin/true") == 0);
    CHECK(exec_after_guard({"/bin/true", interp}, "/bin/false") == 101);
    // Without the interpreter a dynamic program does not start either.
    CHECK(exec_after_guard({"/bin/true"}, "/bin/true") == 101);
}

TEST_CASE("exec guard: interpreters of programs and scripts", "[exec_guard]") {
    CHECK(svm::elf_interpreter("/nonexistent").empty());
    CHECK(svm::elf_interpreter("/etc/passwd").empty());
    CHECK(svm::find_in_path("sh", "/nonexistent:/bin") == "/bin/sh");
    CHECK(svm::find_in_path("sh", "/nonexistent").empty());
    char tmpl[] = "/tmp/svm-guard.XXXXXX";
    int fd = ::mkstemp(tmpl);
    REQUIRE(fd >= 0);
    std::string text = "#!/usr/bin/env sh -x\necho\n";
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
    CHECK(svm::script_interpreters(tmpl, "/bin") == std::vector<std::string>{"/usr/bin/env", "/bin/sh"});
    ::unlink(tmpl);
}
