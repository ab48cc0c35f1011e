#!/bin/bash
# Image intake on the node: the prolog refuses hostile images with their own
# sentence and exits 0 (the job fails, the node stays up); the user's image is
# never written. (An image swapped after the submit-time check, caught by the
# prolog: test_refusals; swapped after the prolog's check: test_attack_image_swap.)
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho should-not-run\n' >"$wd/job.sh"
qemu-img create -q -u -f qcow2 -F raw -b /etc/shadow "$wd/shadow.qcow2" 64M
qemu-img create -q -u -f qcow2 -F qcow2 -b 'json:{"driver":"file","filename":"/etc/shadow"}' "$wd/json.qcow2" 64M
mkdir "$wd/dir.qcow2"
mkfifo "$wd/fifo.qcow2"
qemu-img create -q -f qcow2 "$wd/other.qcow2" 64M
chown -R "$SVM_USER:" "$wd"
chown 2002:2002 "$wd/other.qcow2"; chmod 600 "$wd/other.qcow2"

prolog_refuses() {  # image expected-substring
    local job=$((900000 + RANDOM)) rc=0 state
    env -i SLURM_JOB_ID=$job SLURM_JOB_UID=2001 SLURM_JOB_GID=2001 SLURM_JOB_USER=$SVM_USER \
        SLURMD_NODENAME=node1 SLURM_NODELIST=node1 SLURM_JOB_WORK_DIR="$wd" SPANK_SLURM_VM_IMAGE="$1" \
        timeout 60 "$SVM_CLUSTER_DIR/bin/prolog" 2>/dev/null || rc=$?
    [[ $rc -eq 0 ]] || fail "the prolog failed (rc $rc) for a user-side problem with $1: that would drain the node"
    state="$(cat "$SVM_STATE_ROOT/node1/job_$job/state" 2>/dev/null || true)"
    [[ "$state" == "failed: "*"$2"* ]] || fail "prolog verdict for $1 is '$state', expected '$2'"
    env -i SLURM_JOB_ID=$job SLURMD_NODENAME=node1 "$SVM_CLUSTER_DIR/bin/epilog" || fail "epilog failed for job $job"
    [[ -z "$(leftovers $job)" ]] || fail "refused job $job left $(leftovers $job)"
    log "prolog refused $(basename "$1"): ${state#failed: }"
}
prolog_refuses "$wd/shadow.qcow2" "has a backing file (/etc/shadow)"
prolog_refuses "$wd/json.qcow2" "has a backing file (json:"
prolog_refuses "$wd/dir.qcow2" "is a directory"
prolog_refuses "$wd/fifo.qcow2" "FIFO"
prolog_refuses "$wd/other.qcow2" "not readable by user $SVM_USER"
prolog_refuses "sub/relative.qcow2" "absolute"
# A bare name reaching the node is a name of the site's catalogue (sbatch
# makes file names absolute).
prolog_refuses "relative.qcow2" "is not an image of this site's catalogue"
pass "the prolog refuses hostile images as the user, with one sentence each, exit 0"

# The user's image is never written: bytes, owner, mode, mtime unchanged by a job.
img="$wd/keep.qcow2"
cp "$VM_TEST_IMAGE" "$img"; chown "$SVM_USER:" "$img"; chmod 640 "$img"; touch -d '2020-01-02 03:04:05' "$img"
before="$(stat -c '%U %G %a %Y %s' "$img") $(sha256sum <"$img")"
printf '#!/bin/bash\ndd if=/dev/urandom of=/var/tmp/scribble bs=1M count=8 status=none && sync && echo wrote\n' >"$wd/write.sh"; chown "$SVM_USER:" "$wd/write.sh"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 --vm-image="$img" \
      --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" write.sh)"
[[ "$(wait_job "$id" 600)" == COMPLETED ]] || fail "job $id failed: $(cat "$wd/slurm-$id.out")"
grep -qx wrote "$wd/slurm-$id.out" || fail "the guest could not write to its disk"
after="$(stat -c '%U %G %a %Y %s' "$img") $(sha256sum <"$img")"
[[ "$before" == "$after" ]] || fail "the user's image changed: $before -> $after"
wait_clean "$id" 60
pass "the guest wrote to its disk; the user's image is byte-for-byte, owner, mode and mtime unchanged"
