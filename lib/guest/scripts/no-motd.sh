#!/bin/sh
# PAM's dynamic message of the day off for SSH sessions in the guest
# (seed_no_motd_script, lib/guest/seed.hpp): pam_motd commented out in
# SVM_PAM_FILE. Idempotent; no file, no change.
if [ -f "$SVM_PAM_FILE" ]; then sed -i 's/^[[:space:]]*session[[:space:]]\{1,\}optional[[:space:]]\{1,\}pam_motd\.so/# slurm-vm, no MOTD in job sessions: &/' "$SVM_PAM_FILE"; fi
