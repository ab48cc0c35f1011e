#!/bin/bash
# Signals reach the processes in the guest: `scancel --signal=SIG` (to the
# batch script with -b, to an srun step without). A plain `scancel` (or the
# time limit) ends the guest with the job: Slurm kills the job's extern step,
# which holds the guest, at once; a job that wants a warning asks for one with
# sbatch --signal, which travels like scancel --signal.
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

wait_output() { # file pattern what timeout
    local end=$(( $(date +%s) + $4 ))
    until grep -q "$2" "$1" 2>/dev/null; do
        (( $(date +%s) < end )) || fail "$3: '$2' not in $1 after $4 s: $(cat "$1" 2>/dev/null)"
        sleep 0.5
    done
}

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

# 2. An srun step (srun --vm-image, no sbatch): the step's task gets USR1.
# (Not a job-wide `scancel --signal`: Slurm 22.05 sends that to its own
# process of the extern step too, which ends the step, and the guest with it.)
out="$wd/srun.out"
(cd "$wd" && as_user "$SVM_USER" srun -N1 -w node2 -t 10 $(vm_opts) bash ./job.sh >"$out" 2>&1) &
srun_pid=$!
wait_output "$out" started "srun --vm-image" 600
sid="$(squeue -h -u "$SVM_USER" -w node2 -o %i | head -n1)"
[[ -n "$sid" ]] || fail "no job of $SVM_USER on node2 while srun runs"
as_user "$SVM_USER" scancel --signal=USR1 "$sid.0"
wait_output "$out" "got USR1 in node2-vm" "scancel --signal=USR1 $sid.0 (srun step)" 60
as_user "$SVM_USER" scancel "$sid"
wait "$srun_pid" || true
wait_clean "$sid" 60
no_node_drained
pass "job $sid: scancel --signal=USR1 reached the srun task in its guest"
