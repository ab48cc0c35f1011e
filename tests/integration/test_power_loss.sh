#!/bin/bash
# A power loss of node1 during a VM job (lib.sh power_loss: node1's slurmd,
# the job's slurmstepd, keeper and QEMU killed, node1's state_dir (a tmpfs)
# emptied, the job's network namespace gone, slurmd started again). The job's
# overlay lies on disk (overlay_dir) with no ledger left to name it: it is
# found by its name (overlay_dir/job_<id>) and removed once Slurm no longer
# has the job on the node, by the epilog Slurm runs when it ends the job, or
# else by `slurm-vm sweep`. While Slurm still has the job, sweep leaves it.
# What Slurm does: slurmd comes back (same boot time: not "unexpectedly
# rebooted") without the job, slurmctld ends the job and runs the epilog; the
# node is not drained. Should Slurm mark it down (a real reboot with
# ReturnToService=0), an admin resumes it; this test then fails on purpose.
source "$(dirname "$0")/lib.sh"

sweep_bin="${SVM_TEST_SWEEP_BIN:-$SVM_BUILD_DIR/admin/slurm-vm}"
conf="$SVM_CLUSTER_DIR/etc/slurm-vm.json"
wd="$(workdir)"
printf '#!/bin/bash\necho started\nwhile [ ! -e go ]; do sleep 1; done\necho finished\n' >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -t 10 --no-requeue $(vm_opts) job.sh)"
on_exit "scancel $id 2>/dev/null"
log "submitted job $id"
wait_output "$wd/slurm-$id.out" started "job $id in its guest" 600
overlay="/var/lib/slurm-vm/node1/overlays/job_$id"
[[ -d "$overlay" ]] || fail "job $id has no overlay directory at $overlay"

# Sweep while Slurm has the job running: nothing of it is touched.
"$sweep_bin" sweep --config "$conf" --node node1 >"$wd/sweep0.out" 2>&1 || fail "sweep failed: $(cat "$wd/sweep0.out")"
[[ -d "$overlay" ]] || fail "sweep removed the overlay of running job $id: $(cat "$wd/sweep0.out")"

# Asked now: slurmctld does not answer below.
grace="$(scontrol show config | awk '$1 == "BatchStartTimeout" || $1 == "MessageTimeout" {s += $3} END {print s + 0}')"
(( grace > 0 )) || fail "scontrol show config gave no BatchStartTimeout or MessageTimeout"
started="$(date -d "$(job_field "$id" StartTime)" +%s)" || fail "job $id has no StartTime"
slurmctld_pid="$(pgrep -x slurmctld | head -n1)"
kill -STOP "$slurmctld_pid"  # Slurm cannot be asked: sweep must do nothing
on_exit "kill -CONT $slurmctld_pid 2>/dev/null"
power_loss node1 "$id"
log "node1 lost its power during job $id and came back"
[[ -d "$overlay" ]] || fail "the power loss simulation removed the overlay"
[[ -z "$(ls -A "$SVM_STATE_ROOT/node1" 2>/dev/null)" ]] || fail "node1's state_dir is not empty after the power loss"
rc=0
timeout 60 "$sweep_bin" sweep --config "$conf" --node node1 >"$wd/sweep1.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "sweep succeeded although Slurm could not be asked: $(cat "$wd/sweep1.out")"
[[ -d "$overlay" ]] || fail "sweep removed the overlay although Slurm could not be asked: $(cat "$wd/sweep1.out")"
# slurmctld ends a batch job that its node no longer reports only if the
# node registers more than BatchStartTimeout + MessageTimeout after the job
# started (the script may still be starting); slurmd registers once when it
# comes back, and the next registration may be many minutes away. So Slurm
# is let answer again only once that grace has passed.
while (( $(date +%s) <= started + grace + 2 )); do sleep 1; done
kill -CONT "$slurmctld_pid"
log "sweep did nothing while Slurm could not be asked ($(head -c 200 "$wd/sweep1.out"))"

# Slurm ends the job (slurmd no longer has it); its epilog, or else the
# sweep, removes the overlay found by name.
end=$(( $(date +%s) + 300 ))
while [[ "$(job_field "$id" JobState)" =~ ^(RUNNING|CONFIGURING|COMPLETING)$ ]]; do
    (( $(date +%s) < end )) || fail "Slurm still has job $id as $(job_field "$id" JobState) 300 s after node1 came back"
    sleep 2
done
log "Slurm ended job $id: $(job_field "$id" JobState) ($(job_field "$id" Reason))"
"$sweep_bin" sweep --config "$conf" --node node1 >"$wd/sweep2.out" 2>&1 || fail "sweep failed: $(cat "$wd/sweep2.out")"
log "sweep: $(tr '\n' ' ' <"$wd/sweep2.out")"
[[ ! -e "$overlay" ]] || fail "job $id's overlay $overlay is still there after the sweep"
wait_clean "$id" 60
acl="$(getfacl -n /dev/kvm 2>/dev/null || true)"
grep -q "^group:$((0x70000000 + id)):" <<<"$acl" && fail "job $id's ACL entry is left on /dev/kvm"
wait_idle node1 60 "after the power loss"
no_node_drained
pass "power loss of node1 during job $id: its overlay on disk found by name and removed, nothing of the job left, node1 idle"
