#!/bin/bash
# --vm-resume=auto: a job whose script counts in a shell variable is requeued
# with `scontrol requeue` while it runs, and goes on counting on another node:
# the epilog saved its guest (memory and overlay) into the checkpoint, the
# next run's prolog and keeper restored it instead of booting, and the batch
# step reattached to the running script. Its output file keeps what was
# written before (Slurm truncates it; the batch step sets it aside and puts
# it back). Where QEMU is 8.2 or later the guest
# keeps its virtio-fs shares across the save: a file it holds open and new
# opens in the shared working directory work after the restore. Before 8.2
# (Debian 12's 7.2) sbatch says a job with shares is not resumable, and the
# job runs on nodes without shares. Cancelled, the job leaves no checkpoint;
# its nodes stay up.
source "$(dirname "$0")/lib.sh"

ckpt="$SVM_CLUSTER_DIR/checkpoints"
wd="$(workdir)"
qemu="$(cluster_setting emulator /usr/bin/qemu-system-x86_64)"
version="$("$qemu" --version | sed -n 's/^QEMU emulator version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')"
read -r major minor <<<"$version"
shares=1
if [[ "$(cluster_setting shares_via virtiofs)" != virtiofs ]] || ((major < 8 || (major == 8 && minor < 2))); then
    shares=0
    printf '#!/bin/sh\ntrue\n' >"$wd/true.sh"
    chown "$SVM_USER:" "$wd/true.sh"
    # shellcheck disable=SC2046
    said="$(cd "$wd" && as_user "$SVM_USER" sbatch --hold --vm-resume=auto $(vm_opts) true.sh 2>&1)" ||
        fail "sbatch failed: $said"
    scancel "$(sed -n 's/^Submitted batch job //p' <<<"$said")"
    grep -q "not resumable: its guest has host directories shared into it" <<<"$said" ||
        fail "sbatch did not say that a job with shares is not resumable with QEMU $major.$minor: $said"
    log "QEMU $major.$minor: sbatch says a job with shares is not resumable; nodes without shares for this test"
    nodes_without_shares
fi

cat >"$wd/count.sh" <<EOF
#!/bin/sh
[ $shares = 1 ] && exec 3>>"$wd/held.txt"
i=0
while [ "\$i" -lt 100000 ]; do
    i=\$((i + 1))
    echo "count \$i on \$(hostname)"
    if [ $shares = 1 ]; then
        echo "held \$i" >&3
        echo "opened \$i" >>"$wd/opened.txt"
        echo "share \$(tail -n1 "$wd/opened.txt")"
    fi
    sleep 1
done
EOF
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -n1 --mem=1500 --vm-resume=auto \
    $(vm_opts) count.sh)"
on_exit "scancel $id 2>/dev/null"
log "submitted resumable job $id"
out="$wd/slurm-$id.out"
wait_output "$out" "^count 5 on" "the script counting in its guest" 600
first="$(job_field "$id" NodeList)"
guest="$(sed -n 's/^count 1 on //p' "$out")"
scontrol requeue "$id" || fail "scontrol requeue $id failed"
log "requeued job $id on $first"
# The epilog saved the guest into the job's checkpoint.
wait_saved "$id" 1 180
# The batch step set the output aside (Slurm truncates it when the job
# starts again); the next run puts it back.
[[ -s "$out.requeued" && ! -e "$out" ]] || fail "the job's output was not set aside at the requeue: $(ls "$wd")"
before="$(grep -c '^count ' "$out.requeued")"
[[ "$(stat -c '%U %a' "$ckpt/job_$id")" == "root 700" ]] || fail "the checkpoint is not root's alone: $(stat -c '%U %a' "$ckpt/job_$id")"
wait_state "$id" PENDING 120
# A checkpoint is restored only into its own job: another job (of the same
# user, image and size) that finds this one's under its id starts afresh.
# shellcheck disable=SC2046
other="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --hold -N1 -n1 --mem=1500 --vm-resume=auto \
    $(vm_opts) count.sh)"
on_exit "scancel $other 2>/dev/null"
cp -a "$ckpt/job_$id" "$ckpt/job_$other"
scontrol release "$other"
wait_output "$wd/slurm-$other.out" "^count 2 on" "the other job counting" 600
grep -q "saved state is not usable (it belongs to another job" "$wd/slurm-$other.out" ||
    fail "the foreign checkpoint was not refused with its reason: $(cat "$wd/slurm-$other.out")"
scancel "$other"
wait_clean "$other" 120
log "a foreign checkpoint was refused: job $other started afresh, and left nothing"
scontrol update jobid="$id" StartTime=now ExcNodeList="$first" || fail "cannot move job $id off $first"
wait_state "$id" RUNNING 300
second="$(job_field "$id" NodeList)"
[[ "$second" != "$first" ]] || fail "job $id ran again on $first"
wait_output "$out" "goes on where it was" "the batch step reattaching to the restored script" 300
# The count goes on: past what it had reached, never from 1 again, in the
# same guest (its name is the first node's).
next=$((before + 3))
wait_output "$out" "^count $next on" "the count going on after the requeue" 120
[[ "$(grep -c '^count 1 on' "$out")" == 1 ]] || fail "the script started again, or its output is lost: $(cat "$out")"
[[ ! -e "$out.requeued" ]] || fail "the output set aside at the requeue is left: $(ls "$wd")"
grep -q "^count $next on $guest\$" "$out" || fail "the guest is not the one saved ($guest): $(tail -3 "$out")"
grep -q "DUE TO JOB REQUEUE" "$out" || fail "Slurm's requeue is not in the output: $(cat "$out")"
if ((shares)); then
    # The share after the restore: a descriptor held across the save, and new opens.
    wait_output "$out" "^share opened $next\$" "the share answering after the restore" 60
    grep -q "^held $next\$" "$wd/held.txt" ||
        fail "writes through a descriptor held across the save did not reach the host: $(tail -n3 "$wd/held.txt")"
    log "QEMU $major.$minor: the guest's virtio-fs shares work after its restore"
fi
n="$(pgrep -fc "guest=slurm-vm-$id-" || true)"
[[ "$n" == 1 ]] || fail "expected 1 guest of job $id, found $n"
log "job $id counts on in guest $guest, now on $second"
scancel "$id"
wait_clean "$id" 120
[[ ! -e "$ckpt/job_$id" ]] || fail "the cancelled job's checkpoint is left"
# A checkpoint whose job Slurm no longer has (cancelled while pending after
# its requeue: no epilog runs) is swept.
mkdir -m 0700 "$ckpt/job_999999"
"$SVM_BUILD_DIR/admin/slurm-vm" sweep --config "$SVM_CLUSTER_DIR/etc/slurm-vm.json" >/dev/null ||
    fail "slurm-vm sweep failed"
[[ ! -e "$ckpt/job_999999" ]] || fail "slurm-vm sweep left the checkpoint of a job Slurm does not have"
no_node_drained
pass "a requeued resumable job went on counting on another node; cancelled, it left nothing"
