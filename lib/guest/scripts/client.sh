#!/bin/sh
# What the job's commands need of SSH as clients (mpirun logging into the
# other guests): the job's key, its guests' host keys, the settings; and
# srun's shim (lib/guest/srun_relay.hpp), first on the batch script's PATH,
# installed here so that the job's first command starts no program to make
# it. Files installed whole by one process (install -D: their directory
# too) from a here-document; /proc/self/fd/0: an image without udev has no
# /dev/stdin. From the host: SVM_KNOWN_HOSTS, SVM_USER_KEY (its last line
# break the here-document's), SVM_UID, SVM_GID, SVM_KEX, SVM_SRUN_DIR,
# SVM_SRUN (the shim, its last line break the here-document's).
# shellcheck disable=SC2174 # /etc/ssh exists: -m is for the directory made
[ -d /etc/ssh/ssh_config.d ] || mkdir -p -m 0755 /etc/ssh/ssh_config.d
printf %s "$SVM_KNOWN_HOSTS" >/etc/ssh/ssh_known_hosts
install -D -m 0600 -o "$SVM_UID" -g "$SVM_GID" /proc/self/fd/0 /etc/ssh/slurm-vm/id_ed25519 <<SVM_KEY || fail "cannot write the job's SSH key"
$SVM_USER_KEY
SVM_KEY
printf %s "Host *
  IdentityFile /etc/ssh/slurm-vm/id_ed25519
  StrictHostKeyChecking yes
  GlobalKnownHostsFile /etc/ssh/ssh_known_hosts
  UserKnownHostsFile /dev/null
  KexAlgorithms $SVM_KEX
  LogLevel ERROR
" >/etc/ssh/ssh_config.d/slurm-vm.conf
install -D -m 0755 /proc/self/fd/0 "$SVM_SRUN_DIR/srun" <<SVM_SRUN || fail "cannot install srun in $SVM_SRUN_DIR"
$SVM_SRUN
SVM_SRUN
