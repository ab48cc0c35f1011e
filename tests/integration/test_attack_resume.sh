#!/bin/bash
# Resumable VM jobs (--vm-resume=auto) attacked by an ordinary user:
# - the checkpoint space is root's: the user cannot plant a checkpoint for
#   their job (a directory, a symlink), nor read theirs, nor another user's;
#   another user cannot requeue the job;
# - the user's own USR2 to every step of the job never reaches the keeper
#   (USR2 is the epilog's "save the guest");
# - the user fills their guest's disk with bytes that do not compress, and
#   requeues the job themselves (as Slurm lets an owner do, as often as they
#   like): the epilog saves guest and overlay; the job runs again on a node
#   whose scratch space cannot hold that overlay (here a small tmpfs, as a
#   node's scratch filled by the user's other guests would be). Copying the
#   overlay back in root's prolog fails: the job starts afresh there and is
#   told why, the node is not drained. The first run's scratch is another
#   tmpfs, as a site's local scratch is another file system than its shared
#   checkpoint space: the epilog copies the overlay (within the save's bound);
# - the user requeues the job again, then once more as it starts (while its
#   guest is restored): no node drains, the job runs on;
# - cancelled, the job leaves nothing: no checkpoint, nothing on the tmpfs.
source "$(dirname "$0")/lib.sh"

ckpt="$SVM_CLUSTER_DIR/checkpoints"
# Resumable jobs need nodes without shares where QEMU is older than 8.2 (test_requeue).
nodes_without_shares
[[ -d "$ckpt" ]] || mkdir -m 0711 "$ckpt"
# Scratch spaces: node2's too small for the overlay the job saves; the
# others' large enough, on file systems of their own.
target=node2
others=node1,node3
for size in 48m 320m; do
    scratch="$SVM_CLUSTER_DIR/attack-resume-scratch-$size"
    mkdir -p "$scratch"
    mount -t tmpfs -o "size=$size,mode=0711" svm-attack-resume "$scratch" || fail "cannot mount a tmpfs on $scratch"
    on_exit "umount -l $scratch; rmdir $scratch"
done
small="$SVM_CLUSTER_DIR/attack-resume-scratch-48m"
for n in ${others//,/ }; do node_setting "$n" overlay_dir "\"$SVM_CLUSTER_DIR/attack-resume-scratch-320m\"" >/dev/null; done

wd="$(workdir)"
cat >"$wd/fill.sh" <<'EOF'
#!/bin/sh
echo "run ${SLURM_RESTART_COUNT:-0}"
trap 'echo USR2' USR2
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
    head -c 96M /dev/urandom >/var/tmp/svm-fill && sync && echo filled
fi
i=0
while [ "$i" -lt 100000 ]; do
    i=$((i + 1))
    echo "count $i on $(hostname)"
    sleep 1
done
EOF
chown -R "$SVM_USER:" "$wd"

# The user's own tries at the checkpoint space, before any job: nothing
# can be made there but by root.
as_user "$SVM_USER" mkdir "$ckpt/job_4000000000" 2>/dev/null && fail "the user made a directory in $ckpt"
as_user "$SVM_USER" ln -s /tmp "$ckpt/job_4000000001" 2>/dev/null && fail "the user made a symlink in $ckpt"

# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -n1 --mem=1500 --vm-resume=auto \
    -x "$target" $(vm_opts) fill.sh)"
# A job held after a failed prolog runs no epilog when cancelled.
on_exit "rm -rf $ckpt/job_$id"
on_exit "scancel $id 2>/dev/null"
log "submitted resumable job $id"
out="$wd/slurm-$id.out"
wait_output "$out" "^count 2 on" "the guest filled and counting" 300
grep -q "^filled" "$out" || fail "the guest did not fill its disk: $(cat "$out")"
first="$(job_field "$id" NodeList)"
# USR2 has the keeper save the guest (the epilog's, at a requeue): the
# user's signals to every step of their job, the extern step's too, reach
# their script, never the keeper (root's; out of the steps' reach).
as_user "$SVM_USER" scancel --signal=USR2 --full "$id" || fail "the user could not signal their job $id"
as_user "$SVM_USER" scancel --signal=USR2 "$id.extern" 2>/dev/null || true
wait_output "$out" "^USR2" "the script trapping the user's USR2" 60
n="$(grep -c '^count ' "$out")"
wait_output "$out" "^count $((n + 2)) on" "the guest going on after the user's USR2" 60
[[ ! -e "$ckpt/job_$id" ]] || fail "the user's USR2 saved the guest of job $id: $(ls "$ckpt/job_$id")"
as_user "$SVM_USER2" scontrol requeue "$id" 2>/dev/null && fail "another user requeued job $id"
as_user "$SVM_USER" scontrol requeue "$id" || fail "the user could not requeue their own job $id"
log "job $id requeued by its user on $first"
wait_saved "$id" 1 120
wait_state "$id" PENDING 120
qcow="$(stat -c %b "$ckpt/job_$id/node0.qcow2")"
(( qcow * 512 > 80 * 1024 * 1024 )) || fail "the saved overlay holds only $((qcow / 2048)) MiB"
for u in "$SVM_USER" "$SVM_USER2"; do
    as_user "$u" ls "$ckpt/job_$id" >/dev/null 2>&1 && fail "$u lists the checkpoint of job $id"
    as_user "$u" cat "$ckpt/job_$id/node0.json" >/dev/null 2>&1 && fail "$u reads the checkpoint of job $id"
done

# The job's next node: its scratch space a tmpfs smaller than the overlay.
node_setting "$target" overlay_dir "\"$small\"" >/dev/null
# A node this test drained (without the fix) is given back to the others.
on_exit "sinfo -h -N -n $target -o %t | grep -qE 'drain|drng|down|fail' && scontrol update nodename=$target state=resume"
scontrol update jobid="$id" StartTime=now ExcNodeList="$others" || fail "cannot move job $id to $target"
end=$(( $(date +%s) + 150 ))
until grep -q "saved state could not be copied back" "$out" 2>/dev/null; do
    if sinfo -h -N -n "$target" -o %t | grep -qE 'drain|drng|down|fail'; then
        fail "the prolog drained $target: $(sinfo -h -R)"
    fi
    (( $(date +%s) < end )) || fail "job $id was not told its state could not be copied back: $(cat "$out")"
    sleep 1
done
# Its script from the start (the first run's count, then the new one's).
end=$(( $(date +%s) + 120 ))
until [[ "$(grep -c '^count 1 on' "$out")" == 2 ]]; do
    (( $(date +%s) < end )) || fail "job $id did not start afresh on $target: $(cat "$out")"
    sleep 1
done
grep -q "^run 1" "$out" || fail "the second run is not Slurm's restart: $(cat "$out")"
[[ "$(job_field "$id" NodeList)" == "$target" ]] || fail "job $id runs on $(job_field "$id" NodeList), not $target"
log "job $id started afresh on $target, told why"

# The user requeues the job again (saved on $target), then once more as soon
# as Slurm lets them, while its next run restores the guest: each run ends
# saved or not (then the next starts afresh, told why); no node drains.
counts() { grep -c '^count ' "$out" || true; }
as_user "$SVM_USER" scontrol requeue "$id" || fail "the user could not requeue job $id again"
wait_state "$id" PENDING 120
scontrol update jobid="$id" StartTime=now ExcNodeList="$target" || fail "cannot move job $id off $target"
end=$(( $(date +%s) + 120 ))
until as_user "$SVM_USER" scontrol requeue "$id" 2>/dev/null; do
    (( $(date +%s) < end )) || fail "the user could not requeue job $id as it started: $(job_field "$id" JobState)"
    sleep 0.2
done
log "job $id requeued by its user as it started on $(job_field "$id" NodeList)"
wait_state "$id" PENDING 120
# Slurm's requeue delay (AuthInfo=cred_expire) is not cut short here: the
# job may go back to the node it was just requeued on, whose slurmd skips
# the prolog of a job it still holds the credential of (README).
wait_state "$id" RUNNING 180
before="$(counts)"
end=$(( $(date +%s) + 120 ))
until (( $(counts) >= before + 2 )); do
    (( $(date +%s) < end )) || fail "job $id does not run after its requeues: $(tail -5 "$out")"
    no_node_drained
    sleep 1
done
log "job $id runs again on $(job_field "$id" NodeList) after $(grep -c '^run ' "$out") runs"
scancel "$id"
wait_clean "$id" 120
[[ ! -e "$ckpt/job_$id" ]] || fail "the cancelled job's checkpoint is left"
for d in "$SVM_CLUSTER_DIR"/attack-resume-scratch-*; do
    [[ -z "$(ls -A "$d")" ]] || fail "left on a node's scratch: $(ls -A "$d")"
done
no_node_drained
pass "the checkpoint is out of the users' reach; an overlay the next node cannot hold starts the job afresh, no drain"
