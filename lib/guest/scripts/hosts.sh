#!/bin/sh
# The peers' lines ("<address> <hostname> # slurm-vm") in each hosts file
# that exists: earlier lines of ours go (an image saved from an earlier
# guest), the file is rewritten in place by the shell's builtins (no
# process), anything else in it kept. From the host: SVM_HOSTS (the lines),
# SVM_HOSTS_FILES (patterns, split and expanded here).
svm_hosts() { h=; while IFS= read -r l || [ -n "$l" ]; do case "$l" in *'# slurm-vm') ;; *) h="$h$l
" ;; esac; done <"$1"; printf '%s%s' "$h" "$2" >"$1"; }
# shellcheck disable=SC2086 # the patterns are meant to be split and expanded
for hf in $SVM_HOSTS_FILES; do if [ -f "$hf" ]; then svm_hosts "$hf" "$SVM_HOSTS"; fi; done
