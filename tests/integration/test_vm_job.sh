#!/bin/bash
# A --vm-image batch job runs its script inside the guest of the first node,
# as the user, in the submit directory, with SLURM_* set; its exit status is
# the job's; afterwards nothing is left on any node.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
echo "HOSTNAME=$(hostname)"
echo "CMDLINE=$(cat /proc/cmdline)"
echo "WHO=$(id -u):$(id -g)"
echo "PWD=$(pwd)"
echo "JOBID=$SLURM_JOB_ID"
echo "stderr line" >&2
exit 3
JOB
id="$(vm_batch "$wd" -N1 -w node1 -n1 --mem=1500)"
out="$wd/slurm-$id.out"
wait_ended "$id" FAILED 900 "$out"
[[ -r "$out" ]] || fail "no output file $out"
log "output: $(tr '\n' '|' <"$out")"
grep -qx "HOSTNAME=node1-vm" "$out" || fail "the script did not run in the guest (hostname): $(cat "$out")"
grep -q "^CMDLINE=.*console=ttyS0" "$out" || fail "the guest's kernel command line is not in the output"
grep -qx "WHO=2001:2001" "$out" || fail "the script did not run as the job's user"
grep -qx "PWD=$wd" "$out" || fail "the script did not run in the submit directory"
grep -qx "JOBID=$id" "$out" || fail "SLURM_JOB_ID is not the job's"
grep -qx "stderr line" "$out" || fail "stderr did not reach the output file"
ec="$(job_field "$id" ExitCode)"
[[ "$ec" == "3:0" ]] || fail "ExitCode is $ec, expected 3:0"
wait_clean "$id" 120
no_node_drained
pass "job $id ran in the guest, exit 3 -> 3:0, nothing left behind"
