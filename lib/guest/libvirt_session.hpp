// RAII around libvirt handles and the embedded QEMU driver
// (qemu:///embed?root=DIR): the process holding the connection owns the guest.
#pragma once
#include <libvirt/libvirt.h>

#include <memory>
#include <string>

#include "embed_root.hpp"

namespace svm {

struct ConnectDeleter {
    void operator()(virConnectPtr c) const { virConnectClose(c); }
};
struct DomainDeleter {
    void operator()(virDomainPtr d) const { virDomainFree(d); }
};
using ConnectPtr = std::unique_ptr<virConnect, ConnectDeleter>;
using DomainPtr = std::unique_ptr<virDomain, DomainDeleter>;

// Silences libvirt's default printing of errors to stderr (we convert them
// where the call is made). Idempotent.
void libvirt_quiet();
// The last libvirt error as text ("unknown error" when none).
std::string libvirt_last_error();

ConnectPtr open_embed(const std::string& root);
// Makes libvirt probe `emulator` into cache_root's capabilities cache (asking
// for the domain capabilities does it). For the keeper's
// --probe-capabilities (seed_capabilities_cache runs it). True on success.
bool probe_capabilities(const std::string& cache_root, const std::string& emulator);
// Ends the domain's QEMU at once (SIGKILL, no graceful exit: for a guest
// whose job is over, nothing in it matters any more), then lets libvirt tidy
// its state (virDomainDestroy alone sends SIGTERM first and waits for QEMU to
// exit). libvirt then polls every 200 ms until the process is reaped, not
// only dead: QEMU is reaped first when it is this process's child (the
// keeper is the subreaper of the QEMU processes libvirt daemonizes, see
// adopt_orphans_and_reap in proc.hpp).
void destroy_now(virDomainPtr dom, const std::string& root, const std::string& name);

}  // namespace svm
