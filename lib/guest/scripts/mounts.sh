#!/bin/sh
# The job's shares and its working directory, in the background (mounting
# waits on the host's virtiofsd, and loading the module on the disk, while
# the boothook's next steps keep the vCPU busy); awaited before the flag
# "ready" (ready.sh), its failure has said why (fail). The kernel's file
# systems are read by the shell (no process), the module loaded only when
# missing; an image whose kernel cannot mount them fails the job at once,
# saying so. From the host: SVM_SHARES (host paths, one a line, or none),
# SVM_SHARES_VIA (virtiofs or 9p), SVM_FILESYSTEMS (the kernel's list),
# SVM_WORKDIR (or empty), SVM_UID, SVM_GID.
(
if [ -n "$SVM_SHARES" ]; then
    svm_fs() { while read -r a b; do [ "$a" = "$1" ] || [ "$b" = "$1" ] && return 0; done <"$SVM_FILESYSTEMS"; return 1; }
    if [ "$SVM_SHARES_VIA" = virtiofs ]; then
        fs=virtiofs
        svm_fs virtiofs || modprobe virtiofs 2>/dev/null
        why="CONFIG_VIRTIO_FS: every current distribution kernel has it as the module virtiofs"
    else
        fs=9p
        { svm_fs 9p && [ -d /sys/module/9pnet_virtio ]; } || { modprobe 9pnet_virtio; modprobe 9p; } 2>/dev/null
        why="CONFIG_9P_FS and CONFIG_NET_9P_VIRTIO: Debian's cloud and RHEL-family kernels lack them; the site can serve shares over virtiofs"
    fi
    svm_fs "$fs" || fail "the image's kernel has no $fs file system ($why), so the job's directories cannot be shown in the guest"
    n=0
    while IFS= read -r d; do
        if [ "$fs" = virtiofs ]; then set -- -t virtiofs
        else set -- -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none; fi
        { [ -d "$d" ] || mkdir -p "$d"; } && mount "$@" "svmshare$n" "$d" || fail "cannot mount $d ($fs)"
        n=$((n + 1))
    done <<SVM_SHARES
$SVM_SHARES
SVM_SHARES
fi
if [ -n "$SVM_WORKDIR" ]; then
    [ -d "$SVM_WORKDIR" ] || { mkdir -p "$SVM_WORKDIR" && chown "$SVM_UID:$SVM_GID" "$SVM_WORKDIR" 2>/dev/null; }
fi
) &
# shellcheck disable=SC2034 # awaited in ready.sh
svm_mounts=$!
