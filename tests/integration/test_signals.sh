#!/bin/bash
# Signals reach the processes in the guest: `scancel --signal=SIG` (to the
# batch script with -b, to a step, or job-wide), and the time limit's TERM.
# The guest is in the extern step's cgroups except the freezer, so Slurm's
# signals to that step do not end it; the epilog does.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/job.sh" <<'EOF'
#!/bin/bash
trap 'echo "got USR1 in $(hostname)"' USR1
trap 'echo "got TERM in $(hostname)"; exit 0' TERM
echo started
while :; do sleep 1 & wait $!; done
EOF
chown -R "$SVM_USER:" "$wd"

# 3. The time limit (a minute at least, Slurm's unit): submitted first, on
# node3, so that it runs out while 1. and 2. run on node1 and node2.
wd3="$(workdir)"
cp "$wd/job.sh" "$wd3/job.sh"
chown -R "$SVM_USER:" "$wd3"
# shellcheck disable=SC2046
limit_id="$(cd "$wd3" && as_user "$SVM_USER" sbatch --parsable -N1 -w node3 -t 1 $(vm_opts) job.sh)"
log "job $limit_id with a 1-minute limit"

# 1. The batch script.
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -t 10 $(vm_opts) job.sh)"
log "submitted job $id"
wait_output "$wd/slurm-$id.out" started "job $id" 600
as_user "$SVM_USER" scancel -b --signal=USR1 "$id"
wait_output "$wd/slurm-$id.out" "got USR1 in node1-vm" "scancel -b --signal=USR1 $id" 60
[[ "$(job_field "$id" JobState)" == RUNNING ]] || fail "job $id is $(job_field "$id" JobState) after USR1"
log "USR1 reached the batch script in its guest"
as_user "$SVM_USER" scancel -b --signal=TERM "$id"
state="$(wait_job "$id" 120)"
[[ "$state" == COMPLETED ]] || fail "job $id ended $state after its script's TERM trap exited 0: $(cat "$wd/slurm-$id.out")"
grep -q "got TERM in node1-vm" "$wd/slurm-$id.out" ||
    fail "TERM did not reach the script in the guest: $(cat "$wd/slurm-$id.out")"
wait_clean "$id" 60
pass "job $id: scancel -b --signal=USR1, then TERM, reached the batch script in its guest (its trap ended the job)"

# 2. An srun step (srun --vm-image, no sbatch): the step's task gets USR1
# sent to the whole job (every step: the extern step's own process dies of
# it, the guest does not) and then to the step alone.
out="$wd/srun.out"
# shellcheck disable=SC2046 # vm_opts: options, one a word
(cd "$wd" && as_user "$SVM_USER" srun -N1 -w node2 -t 10 $(vm_opts) bash ./job.sh >"$out" 2>&1) &
srun_pid=$!
wait_output "$out" started "srun --vm-image" 600
sid="$(squeue -h -u "$SVM_USER" -w node2 -o %i | head -n1)"
[[ -n "$sid" ]] || fail "no job of $SVM_USER on node2 while srun runs"
as_user "$SVM_USER" scancel --signal=USR1 "$sid"
wait_output "$out" "got USR1 in node2-vm" "scancel --signal=USR1 $sid (the whole job)" 60
sleep 2
pgrep -f "guest=slurm-vm-$sid-node2" >/dev/null || fail "job $sid's guest died of the job-wide USR1"
as_user "$SVM_USER" scancel --signal=USR1 "$sid.0"
end=$(( $(date +%s) + 60 ))
until [[ "$(grep -c "got USR1" "$out")" == 2 ]]; do
    (( $(date +%s) < end )) || fail "scancel --signal=USR1 $sid.0 (the step) did not reach the task: $(cat "$out")"
    sleep 0.5
done
as_user "$SVM_USER" scancel "$sid"
wait "$srun_pid" || true
wait_clean "$sid" 60
pass "job $sid: scancel --signal=USR1, job-wide then to the step, reached the srun task in its guest; the guest lived on"

# 3. (submitted first) The time limit: Slurm's TERM reached the batch script
# in its guest, whose trap ran before the job ended.
id="$limit_id"
wait_output "$wd3/slurm-$id.out" started "job $id" 600
state="$(wait_job "$id" 300)"
[[ "$state" == TIMEOUT ]] || fail "job $id ended $state, not TIMEOUT: $(cat "$wd3/slurm-$id.out")"
grep -q "got TERM in node3-vm" "$wd3/slurm-$id.out" ||
    fail "the time limit's TERM did not reach the script in its guest: $(cat "$wd3/slurm-$id.out")"
wait_clean "$id" 60
no_node_drained
pass "job $id: the time limit's TERM reached the batch script in its guest (its trap ran)"
