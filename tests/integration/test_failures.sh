#!/bin/bash
# Failures explain themselves and clean up: QEMU killed mid-job fails the job
# with a reason, removes everything, drains nothing; the epilog run again,
# without a prolog, and `slurm-vm sweep` with nothing to do are no-ops.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho started\nsleep 600\n' >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 $(vm_opts) job.sh)"
log "submitted job $id"
end=$(( $(date +%s) + 600 ))
until grep -q started "$wd/slurm-$id.out" 2>/dev/null; do
    (( $(date +%s) < end )) || fail "job $id never started in its guest"
    sleep 1
done
qpid="$(pgrep -f "guest=slurm-vm-$id-node1" | head -n1)"
kill -9 "$qpid"
log "killed QEMU $qpid of job $id"
state="$(wait_job "$id" 120)"
[[ "$state" == FAILED ]] || fail "job $id is $state after its QEMU was killed"
grep -q "slurm-vm: the guest on node1 shut down or crashed" "$wd/slurm-$id.out" \
    || fail "the job's output does not explain what happened: $(cat "$wd/slurm-$id.out")"
wait_clean "$id" 60
no_node_drained
pass "QEMU killed: job $id failed with '$(grep -m1 'slurm-vm:' "$wd/slurm-$id.out")', nothing left, no drain"

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
