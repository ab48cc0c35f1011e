// slurm-vm-qemu: the emulator libvirt starts for a job's guest when the node
// uses the default QEMU. It blocks the signals a user sends to the whole job
// (`scancel --signal=USR1 JOB` reaches every process of every step, the
// extern step's QEMU too) and executes the real QEMU, so that such a signal
// is for the tasks (slurm-vm-exec carries it into the guest) and does not
// end the guest. SIGTERM and SIGKILL still work: libvirt stops a guest with
// them, and so does Slurm at the end of the job. QEMU keeps the blocked mask
// (its vCPU threads derive theirs from it; with KVM, SIGUSR1 stays its kick).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>
#include <cstdio>
#include <cstring>

#ifndef SVM_QEMU_SYSTEM
#define SVM_QEMU_SYSTEM "/usr/bin/qemu-system-x86_64"
#endif

int main(int argc, char** argv) {
    (void)argc;
    sigset_t block;
    sigemptyset(&block);
    for (int sig : {SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&block, sig);
    if (sigprocmask(SIG_BLOCK, &block, nullptr) != 0) {
        std::fprintf(stderr, "slurm-vm-qemu: sigprocmask: %s\n", std::strerror(errno));
        return 1;
    }
    argv[0] = const_cast<char*>(SVM_QEMU_SYSTEM);
    execv(SVM_QEMU_SYSTEM, argv);
    std::fprintf(stderr, "slurm-vm-qemu: cannot run %s: %s\n", SVM_QEMU_SYSTEM, std::strerror(errno));
    return 127;
}
