#!/bin/bash
# Attack (issue: paths reopened after the check): the user swaps their image
# path for another file right after the node checked it, hoping that QEMU
# opens the new file by path. QEMU gets the checked file as a descriptor
# (the keeper reopens the path as the user and compares it with what was
# checked), so either the job runs on the checked image or it fails with one
# sentence saying the image changed; never on the swapped file, and no node
# drains.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
img="$wd/mine.qcow2"
cp "$VM_TEST_IMAGE" "$img"
# The file swapped in: an image that boots nothing (a guest on it never
# becomes ready, so a job that ran shows it was not opened).
as_user "$SVM_USER" qemu-img create -q -f qcow2 "$wd/other.qcow2" 64M
printf '#!/bin/sh\necho ran-on-the-checked-image\n' >"$wd/job.sh"
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -t 5 --vm-image="$img" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh)"
# As soon as the prolog has checked the image (its plan is written), swap.
plan="$SVM_STATE_ROOT/node1/job_$id/plan.json"
end=$(( $(date +%s) + 300 ))
until [[ -e "$plan" ]]; do
    (( $(date +%s) < end )) || fail "job $id: no plan after 300 s"
    sleep 0.01
done
as_user "$SVM_USER" mv -f "$wd/other.qcow2" "$img"
log "job $id: image swapped $(( $(date +%s%N) / 1000000 - $(stat -c %Y "$plan") * 1000 )) ms after the plan"
st="$(wait_job "$id" 600)"
out="$(cat "$wd/slurm-$id.out" 2>/dev/null)"
case "$st" in
    COMPLETED) grep -q ran-on-the-checked-image <<<"$out" || fail "job $id completed without its output: $out"
               log "job $id ran on the checked image (QEMU had its descriptor)" ;;
    FAILED) grep -q "changed since the job started" <<<"$out" ||
                fail "job $id failed, but not because the image changed: $out"
            log "job $id refused: $(grep -m1 'changed since' <<<"$out")" ;;
    *) fail "job $id ended $st: $out" ;;
esac
wait_clean "$id" 120
no_node_drained
pass "a swap right after the check neither reached QEMU nor drained the node"
