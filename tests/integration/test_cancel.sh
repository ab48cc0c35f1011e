#!/bin/bash
# scancel of a running VM job: every guest is gone within a bounded time and
# nothing is left on any node.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho started in $(hostname)\nsleep 600\n' >"$wd/job.sh"
id="$(vm_batch "$wd" -N2 -n2 --mem=1500)"
wait_state "$id" RUNNING 300
wait_output "$wd/slurm-$id.out" "started in node" "the script in the guest" 600
n="$(pgrep -fc "guest=slurm-vm-$id-" || true)"
[[ "$n" == 2 ]] || fail "expected 2 guests of job $id, found $n"
t0=$(date +%s)
scancel "$id"
wait_clean "$id" 60
log "all guests of job $id gone $(( $(date +%s) - t0 ))s after scancel"
[[ "$(wait_job "$id" 60)" == CANCELLED ]] || fail "job $id is not CANCELLED"
no_node_drained
pass "scancel removed every guest and all state"
