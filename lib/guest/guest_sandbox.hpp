// What the processes that run a job's guest (the keeper, and through it QEMU
// and whatever serves the guest's shares) may not do, whatever the guest asks.
#pragma once

namespace svm {

// No file they create or change may become set-user-ID or set-group-ID:
// chmod and friends, and creating a file, with S_ISUID or S_ISGID fail with
// EPERM (a seccomp filter on the calling thread, inherited by every process
// and thread it starts afterwards). The host-side twin of a nosuid mount:
// root in a guest cannot turn a file in a shared directory into a key to the
// guest's group (the job's own identity) on the host.
void forbid_setid_bits();

}  // namespace svm
