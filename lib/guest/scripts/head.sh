#!/bin/sh
# The boothook's start (seed_user_data, lib/guest/seed.cpp): its functions,
# the flags of the job's first command made anew (seed.hpp, kGuestFlagDir),
# the guest's hostname. From the host, above: SVM_FLAGS (the flags'
# directory), SVM_HOSTNAME, SVM_PEERS (how many guests the job has).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
log() { echo "slurm-vm: $*" >/dev/ttyS0 2>/dev/null || echo "slurm-vm: $*"; }
# The host's entropy (domain_xml.cpp): an image without udev would not load
# its driver, and SSH waits until the kernel is seeded. First when the job's
# first command logs into the other guests, else with sshd (ssh-server.sh).
svm_rng() { [ -d /sys/module/virtio_rng ] || modprobe virtio_rng 2>/dev/null; }
if [ "$SVM_PEERS" -gt 1 ]; then svm_rng; fi
[ -e "$SVM_FLAGS" ] && rm -rf "$SVM_FLAGS"
# shellcheck disable=SC2174 # its parent, /run, exists
mkdir -p -m 0755 "$SVM_FLAGS" && mkfifo -m 0666 "$SVM_FLAGS/go" "$SVM_FLAGS/srun" "$SVM_FLAGS/started"
# Opened read-write: never blocks; the first command holds it open too.
svm_wake() { echo go 1<>"$SVM_FLAGS/go"; } 2>/dev/null
fail() { : >"$SVM_FLAGS/failed"; svm_wake; log "SLURM_VM_FAILED $*"; exit 1; }
# The kernel's hostname written by the shell (no process), as hostname(1) sets it.
{ echo "$SVM_HOSTNAME" >/proc/sys/kernel/hostname; } 2>/dev/null || hostname "$SVM_HOSTNAME"; echo "$SVM_HOSTNAME" >/etc/hostname
