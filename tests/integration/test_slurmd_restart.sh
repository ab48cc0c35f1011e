#!/bin/bash
# slurmd restarted while a VM job runs: the job ends while node1's slurmd is
# down, and once slurmd is back Slurm runs the epilog, which removes the guest
# and all of the job's state. The node is not drained.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
# The script waits, in the guest, for a file the test creates on the host
# (the submit directory is shared into the guest).
printf '#!/bin/bash\necho started\nwhile [ ! -e go ]; do sleep 1; done\necho finished\n' >"$wd/job.sh"
id="$(vm_batch "$wd" -N1 -w node1 -t 10)"
wait_output "$wd/slurm-$id.out" started "job $id in its guest" 600

pidf="$SVM_CLUSTER_DIR/run/slurmd-node1.pid"
old="$(cat "$pidf")"
kill -TERM "$old"
for _ in $(seq 1 60); do [[ -d "/proc/$old" ]] || break; sleep 0.5; done
[[ -d "/proc/$old" ]] && fail "slurmd node1 ($old) did not stop"
log "slurmd node1 stopped; the job's guest goes on"
pgrep -f "guest=slurm-vm-$id-node1" >/dev/null || fail "the guest of job $id died with slurmd"

touch "$wd/go"
chown "$SVM_USER:" "$wd/go"
wait_output "$wd/slurm-$id.out" finished "job $id's script, while slurmd was down," 120
log "the job's script finished while slurmd was down"
sleep 2

(cd / && env SVM_TEST_CLUSTER="$SVM_CLUSTER_DIR" SLURM_CONF="$SLURM_CONF" \
    /usr/sbin/slurmd -f "$SLURM_CONF" -N node1 </dev/null) ||
    fail "slurmd node1 did not start again (log: $SVM_CLUSTER_DIR/log/slurmd-node1.log)"
log "slurmd node1 started again"

wait_ended "$id" COMPLETED 180 "$wd/slurm-$id.out"
wait_clean "$id" 120
wait_idle node1 60 "after slurmd's restart"
no_node_drained
pass "slurmd restarted during job $id: job COMPLETED, guest and state removed by the epilog, node1 idle"
