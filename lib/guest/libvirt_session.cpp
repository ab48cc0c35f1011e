#include "libvirt_session.hpp"

#include <libvirt/virterror.h>

#include <cstdlib>
#include <mutex>
#include <thread>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm {

static void ignore_error(void*, virErrorPtr) {}

void libvirt_quiet() {
    static std::once_flag once;
    std::call_once(once, [] {
        virInitialize();
        virSetErrorFunc(nullptr, ignore_error);
        // The embedded driver needs an event loop in this process (QEMU
        // monitor I/O): libvirt's default one, run by a background thread.
        if (virEventRegisterDefaultImpl() == 0) {
            std::thread([] {
                for (;;) virEventRunDefaultImpl();
            }).detach();
        }
    });
}

std::string libvirt_last_error() {
    virErrorPtr e = virGetLastError();
    if (!e || !e->message) return "unknown libvirt error";
    return e->message;
}

bool probe_capabilities(const std::string& cache_root, const std::string& emulator) {
    libvirt_quiet();
    ConnectPtr c(virConnectOpen(("qemu:///embed?root=" + cache_root).c_str()));
    if (!c) return false;
    char* caps = virConnectGetDomainCapabilities(c.get(), emulator.c_str(), "x86_64", nullptr, "qemu", 0);
    if (!caps) return false;
    ::free(caps);
    return true;
}

ConnectPtr open_embed(const std::string& root) {
    libvirt_quiet();
    std::string uri = "qemu:///embed?root=" + root;
    ConnectPtr c(virConnectOpen(uri.c_str()));
    if (!c) SVM_THROW("connect to " + uri + ": " + libvirt_last_error());
    return c;
}

void destroy_now(virDomainPtr dom, const std::string& root, const std::string& name) {
    std::string pid_file = qemu_pid_file(root, name);
    pid_t pid = process_recorded_alive(pid_file, qemu_mark(name)) ? recorded_pid(pid_file) : 0;
    try {
        stop_recorded_process(pid_file, qemu_mark(name), 0);
        // libvirt polls a killed QEMU every 200 ms until it is reaped, not
        // only dead: it is not asked before (a keeper reaps its QEMU itself).
        reap_exited_children("qemu-system");
        wait_until_reaped(pid, 1000);
    } catch (const Error&) {
        // virDomainDestroy below tries again.
    }
    virDomainDestroy(dom);
}

}  // namespace svm
