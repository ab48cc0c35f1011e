#include "guest_sandbox.hpp"

#include <fcntl.h>
#include <seccomp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "error.hpp"

namespace svm {

namespace {

struct CtxDeleter {
    void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};

void deny(scmp_filter_ctx c, const char* name, unsigned mode_arg, int flags_arg = -1) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // not on this architecture
    for (scmp_datum_t bit : {static_cast<scmp_datum_t>(S_ISUID), static_cast<scmp_datum_t>(S_ISGID)}) {
        scmp_arg_cmp mode = SCMP_CMP(mode_arg, SCMP_CMP_MASKED_EQ, bit, bit);
        int rc = flags_arg < 0
                     ? seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), nr, 1, mode)
                     : seccomp_rule_add(
                           c, SCMP_ACT_ERRNO(EPERM), nr, 2,
                           SCMP_CMP(static_cast<unsigned>(flags_arg), SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT), mode);
        if (rc != 0) SVM_THROW(std::string("seccomp rule for ") + name + ": " + std::strerror(-rc));
    }
}

}  // namespace

void forbid_setid_bits() {
    std::unique_ptr<void, CtxDeleter> c(seccomp_init(SCMP_ACT_ALLOW));
    if (!c) SVM_THROW("seccomp_init failed");
    // Keep the process's no_new_privs as it is: root helpers may still
    // execute what they need; the filter alone is what children inherit.
    if (int rc = seccomp_attr_set(c.get(), SCMP_FLTATR_CTL_NNP, 0); rc != 0)
        SVM_THROW(std::string("seccomp: ") + std::strerror(-rc));
    deny(c.get(), "chmod", 1);
    deny(c.get(), "fchmod", 1);
    deny(c.get(), "fchmodat", 2);
    deny(c.get(), "fchmodat2", 2);
    deny(c.get(), "creat", 1);
    deny(c.get(), "open", 2, 1);
    deny(c.get(), "openat", 3, 2);
    deny(c.get(), "mknod", 1);
    deny(c.get(), "mknodat", 2);
    // openat2 carries its mode in a structure a filter cannot read: refused,
    // so that callers use openat (glibc and QEMU do).
    int nr = seccomp_syscall_resolve_name("openat2");
    if (nr != __NR_SCMP_ERROR && seccomp_rule_add(c.get(), SCMP_ACT_ERRNO(ENOSYS), nr, 0) != 0)
        SVM_THROW("seccomp rule for openat2 failed");
    if (int rc = seccomp_load(c.get()); rc != 0)
        SVM_THROW(std::string("loading the seccomp filter: ") + std::strerror(-rc));
}

}  // namespace svm
