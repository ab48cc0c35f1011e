#!/bin/sh
# What sshd needs: the host's entropy (head.sh) for one guest, the guests'
# host key, the job's authorized key, its settings, its privilege separation
# directory. Keys live outside the user's home (which may be the user's real
# home, shared). From the host: SVM_PEERS, SVM_HOST_KEY, SVM_HOST_PUBLIC,
# SVM_AUTHORIZED_KEYS (the files' bytes).
if [ "$SVM_PEERS" -le 1 ]; then svm_rng; fi
# shellcheck disable=SC2174 # /etc/ssh exists: -m is for the directory made
[ -d /etc/ssh/sshd_config.d ] || mkdir -p -m 0755 /etc/ssh/sshd_config.d
umask 077
printf %s "$SVM_HOST_KEY" >/etc/ssh/slurm-vm/ssh_host_ed25519_key
umask 022
printf %s "$SVM_HOST_PUBLIC" >/etc/ssh/slurm-vm/ssh_host_ed25519_key.pub
printf %s "$SVM_AUTHORIZED_KEYS" >/etc/ssh/slurm-vm/authorized_keys
printf %s 'HostKey /etc/ssh/slurm-vm/ssh_host_ed25519_key
AuthorizedKeysFile /etc/ssh/slurm-vm/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UseDNS no
' >/etc/ssh/sshd_config.d/slurm-vm.conf
grep -q '^Include /etc/ssh/sshd_config.d' /etc/ssh/sshd_config 2>/dev/null || sed -i '1i Include /etc/ssh/sshd_config.d/*.conf' /etc/ssh/sshd_config
# shellcheck disable=SC2174 # /run exists: -m is for /run/sshd
[ -d /run/sshd ] || mkdir -p -m 0755 /run/sshd
