#!/bin/sh
# The flag "ready" (the job's first command may start), then the console
# line that says so (SVM_SET_UP_MARKER: the VM record is published then).
# The shares first (mounts.sh). When the agent took the first command, the
# daemon waits until that command has started (it says so on the FIFO
# "started", or the agent once it ended): on one busy vCPU the two would
# share it, and the command is what the job waits for. Held open from
# before the flag: no line is lost.
if [ -n "${svm_mounts:-}" ]; then wait "$svm_mounts" || exit 1; fi
exec 7<>"$SVM_FLAGS/started"
: >"$SVM_FLAGS/ready"; svm_wake; log "$SVM_SET_UP_MARKER"
[ -e "$SVM_FLAGS/taken" ] && read -r _ <&7; exec 7<&-
