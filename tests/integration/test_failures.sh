#!/bin/bash
# Failures explain themselves and clean up: QEMU killed mid-job fails the job
# with a reason (in its output, with the end of the guest's console, and as
# this node's "error" in `scontrol show job`'s AdminComment), keeps the logs
# for admins (the job's log file and the guest's console under log_dir),
# removes everything else, drains nothing; the epilog run again, without a
# prolog, and `slurm-vm sweep` with nothing to do are no-ops.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho started\nsleep 600\n' >"$wd/job.sh"
id="$(vm_batch "$wd" -N1 -w node1 --mem=1500)"
wait_output "$wd/slurm-$id.out" started "job $id in its guest" 600
qpid="$(pgrep -f "guest=slurm-vm-$id-node1" | head -n1)"
kill -9 "$qpid"
log "killed QEMU $qpid of job $id"
wait_ended "$id" FAILED 120 "$wd/slurm-$id.out"
grep -q "slurm-vm: job $id: the guest on node1 shut down or crashed" "$wd/slurm-$id.out" \
    || fail "the job's output does not explain what happened: $(cat "$wd/slurm-$id.out")"
grep -q "slurm-vm: job $id: the last lines of the guest's console on node1:" "$wd/slurm-$id.out" \
    && grep -q '^  | ' "$wd/slurm-$id.out" \
    || fail "the job's output lacks the end of the guest's console: $(cat "$wd/slurm-$id.out")"
comment="$(scontrol show job "$id" | sed -n 's/^ *AdminComment=//p' | head -n1)"
python3 - "$comment" "$VM_TEST_IMAGE" <<'PY' || fail "scontrol show job $id lacks the failure in AdminComment: '$comment'"
import json, sys
node = json.loads(sys.argv[1])["slurm_vm"]["nodes"]["node1"]
assert node["error"] == "the guest on node1 shut down or crashed", node
assert node.get("image") == sys.argv[2], node  # the VM record is kept beside the error
PY
wait_clean "$id" 60
no_node_drained
pass "QEMU killed: job $id failed with '$(grep -m1 'slurm-vm:' "$wd/slurm-$id.out")', AdminComment $comment, nothing left, no drain"

# The logs an admin reads afterwards: <log_dir>/node1/job_<id>.log with the
# prolog's, the keeper's and the epilog's lines, and the guest's console.
log_dir="$(cluster_setting log_dir /var/log/slurm-vm)"
jlog="$log_dir/node1/job_$id.log"
end=$(( $(date +%s) + 15 ))
until grep -q "slurm-vm-epilog\[[0-9]*\] info: job $id on node1: " "$jlog" 2>/dev/null; do
    (( $(date +%s) < end )) || fail "no epilog line in $jlog: $(cat "$jlog" 2>&1)"
    sleep 0.5
done
for prog in slurm-vm-prolog slurm-vm-keeper; do
    grep -q "$prog\[[0-9]*\] [a-z]*: job $id on node1: " "$jlog" || fail "no $prog line in $jlog: $(cat "$jlog")"
done
grep -q "slurm-vm-keeper\[[0-9]*\] error: job $id on node1: the guest on node1 shut down or crashed" "$jlog" \
    || fail "$jlog does not say why the guest failed: $(cat "$jlog")"
[[ "$(stat -c '%U %a' "$jlog") $(stat -c '%U %a' "$log_dir/node1")" == "root 640 root 750" ]] \
    || fail "$jlog is not root's 0640 in a root 0750 directory: $(stat -c '%n %U %a' "$jlog" "$log_dir/node1")"
console="$log_dir/node1/job_$id.console.log"
grep -q "^=== console of the guest of job $id on node1, kept " "$console" 2>/dev/null \
    || fail "the failed guest's console was not kept in $console"
pass "job $id's log for admins: $jlog ($(wc -l <"$jlog") lines from prolog, keeper, epilog) and $console"

# The epilog again for the same job, and for a job that never had a prolog.
snapshot() { find /run/slurm-vm -printf '%p %s %m\n' 2>/dev/null | sort; }
before="$(snapshot)"
for job in "$id" 999999; do
    env -i SLURM_JOB_ID="$job" SLURMD_NODENAME=node1 SLURM_JOB_UID=2001 "$SVM_CLUSTER_DIR/bin/epilog" \
        || fail "the epilog failed for job $job (run twice / without prolog)"
done
[[ "$(snapshot)" == "$before" ]] || fail "a no-op epilog changed /run/slurm-vm"
out="$("$SVM_BUILD_DIR/admin/slurm-vm" sweep --config "$SVM_CLUSTER_DIR/etc/slurm-vm.json" 2>&1)" \
    || fail "sweep with nothing to do failed: $out"
[[ "$(snapshot)" == "$before" ]] || fail "sweep with nothing to do changed /run/slurm-vm"
pass "epilog twice, epilog without prolog, and an idle sweep change nothing"
