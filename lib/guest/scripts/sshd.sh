#!/bin/sh
# The start of the guest's sshd with the job's configuration
# (seed_sshd_start_script, lib/guest/seed.hpp, says why this way), then the
# console line that says the guest accepts logins. From the host:
# SVM_SYSTEMD_DIR (systemd's run directory), SVM_READY_MARKER.
if [ -d "$SVM_SYSTEMD_DIR" ]; then
  u=ssh.service; systemctl cat $u >/dev/null 2>&1 || u=sshd.service
  if systemctl is-active --quiet $u; then systemctl restart $u || fail "restart $u"
  else systemctl --no-block start $u || fail "start $u"; fi
elif [ -s /run/sshd.pid ] && kill -HUP "$(cat /run/sshd.pid)" 2>/dev/null; then :
else /usr/sbin/sshd || fail sshd; fi
log "$SVM_READY_MARKER"
