#!/bin/bash
# scancel of a running VM job: every guest is gone within a bounded time and
# nothing is left on any node.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho started in $(hostname)\nsleep 600\n' >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N2 -n2 --mem=1500 $(vm_opts) job.sh)"
log "submitted 2-node job $id"
wait_state "$id" RUNNING 300
# Wait until the script runs inside the guest.
end=$(( $(date +%s) + 600 ))
until grep -q "started in node" "$wd/slurm-$id.out" 2>/dev/null; do
    (( $(date +%s) < end )) || fail "the script never started in the guest: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
    sleep 1
done
n="$(pgrep -fc "guest=slurm-vm-$id-" || true)"
[[ "$n" == 2 ]] || fail "expected 2 guests of job $id, found $n"
t0=$(date +%s)
scancel "$id"
wait_clean "$id" 60
log "all guests of job $id gone $(( $(date +%s) - t0 ))s after scancel"
[[ "$(wait_job "$id" 60)" == CANCELLED ]] || fail "job $id is not CANCELLED"
no_node_drained
pass "scancel removed every guest and all state"
