// A guest's embedded libvirt root (qemu:///embed?root=DIR) as files: its
// qemu.conf, its QEMU capabilities cache, QEMU's pid file. Nothing here
// calls libvirt, so the prolog, the epilog and the SPANK plugin (loaded into
// every srun and sbatch) do not load it; libvirt_session.hpp drives it.
#pragma once
#include <sys/types.h>

#include <string>

namespace svm {

struct EmbedSettings {
    uid_t qemu_uid = 0;  // QEMU runs as this user (the job's user)
    gid_t qemu_gid = 0;
};

// Writes ROOT/etc/qemu.conf for a guest run by the job's user without
// relabelling or chowning anything, without libvirt managing cgroups (QEMU
// stays in the cgroup of the process that starts it: the job's), and with
// chardev output written by QEMU itself.
void write_embed_qemu_conf(const std::string& root, const EmbedSettings& s);

// Copies a warm QEMU capabilities cache into ROOT (libvirt probes QEMU for
// several seconds otherwise). `cache_root` is an embed root used only for this.
// The cache is probed with the same QEMU user/group pattern as the jobs
// (libvirt names and validates the cache by it), so one probe serves them all.
// `emulator` must be the path the domains name (libvirt keys the cache by it).
// The probe is `probe_program --probe-capabilities CACHE_ROOT EMULATOR` (the
// keeper: libvirt is loaded only by the programs that drive it).
void seed_capabilities_cache(const std::string& root, const std::string& cache_root, const EmbedSettings& s,
                             const std::string& emulator, const std::string& probe_program);

// Makes every entry below cache_root root's (root:root), never through a
// symlink: the node's cache is root's, whichever job's user libvirt probed
// as (seed_capabilities_cache does it after each probe).
void own_capabilities_cache(const std::string& cache_root);

// What ROOT's capabilities cache holds now (file names, sizes and change
// times): when it differs before and after a guest's creation, libvirt probed
// QEMU again on the critical path (seconds per probe). It does so when the
// cache says KVM was usable but the guest's identity cannot open /dev/kvm.
std::string capabilities_fingerprint(const std::string& root);

// libvirt keeps the host's CPUID data with its cached QEMU capabilities and
// takes the cache for stale when they differ; that data includes the x2APIC
// id of the CPU the connecting thread runs on. So the node keeps one cache
// per CPU (cache_root = <state_dir>/libvirt-caps/cpu<N>), and the keeper
// connects from a thread pinned to that CPU.
//
// Copies the cache of cache_root into the job's ROOT (nothing when absent).
void use_capabilities_cache(const std::string& root, const std::string& cache_root);
// After libvirt probed QEMU in a job's ROOT (no cache for this CPU yet, or a
// stale one: QEMU or libvirt upgraded, /dev/kvm changed), its fresh cache
// replaces cache_root's so that the next guest on this CPU starts at once.
void refresh_capabilities_cache(const std::string& root, const std::string& cache_root);

// What QEMU's command line holds for the domain `name` (with its pid file
// <root>/run/qemu/<name>.pid, for process_recorded_alive, proc.hpp).
std::string qemu_mark(const std::string& name);
std::string qemu_pid_file(const std::string& root, const std::string& name);
}  // namespace svm
