#!/bin/bash
# --vm-save=PATH: when the job ends, the head guest's disk (overlay and base)
# becomes a new image at PATH, owned by the user, that the next job boots
# from (a file written on the guest's root disk is there); the user's image
# is not written. A path the user cannot write is refused by sbatch in one
# sentence; one that turns unwritable during the job fails only the save
# (said in slurm-<jobid>.vm-save.txt beside the job's output), never the node.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
mkdir "$wd/images" "$wd/locked"
cat >"$wd/write.sh" <<'JOB'
#!/bin/bash
echo "saved by job $SLURM_JOB_ID" >/var/tmp/svm-save-marker
echo "WROTE=$(cat /var/tmp/svm-save-marker) on $(hostname)"
JOB
cat >"$wd/read.sh" <<'JOB'
#!/bin/bash
echo "READ=$(cat /var/tmp/svm-save-marker 2>&1) on $(hostname)"
JOB
chmod 755 "$wd"/*.sh
chown -R "$SVM_USER:" "$wd"
image_stat() { stat -c '%s %Y %Z %i' "$VM_TEST_IMAGE"; }
image_before="$(image_stat)"

# Refused at submit.
# shellcheck disable=SC2046
sbatch_refused "$wd" "a directory the user cannot write" \
    "slurm-vm: --vm-save=/root/next.qcow2: you cannot create files in /root" \
    -N1 $(vm_opts) --vm-save=/root/next.qcow2 write.sh
# shellcheck disable=SC2046
sbatch_refused "$wd" "a missing directory" "the directory $wd/nope does not exist" \
    -N1 $(vm_opts) --vm-save="$wd/nope/x.qcow2" write.sh
sbatch_refused "$wd" "no --vm-image" "need --vm-image" -N1 --vm-save="$wd/images/x.qcow2" write.sh
no_node_drained
pass "unwritable or missing --vm-save paths and --vm-save without a VM are refused at submit"

# Job 1 writes a file on its root disk and saves it (relative path: made
# absolute at submit); job 3 saves into a directory locked after the submit.
# shellcheck disable=SC2046
j1="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 $(vm_opts) \
    --vm-save=images/next.qcow2 write.sh)"
# shellcheck disable=SC2046
j3="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --hold -N1 -w node2 --mem=1500 $(vm_opts) \
    --vm-save="$wd/locked/next.qcow2" write.sh)"
chmod 0555 "$wd/locked"
scontrol release "$j3"
log "jobs: save $j1, save into a locked directory $j3"
for j in "$j1" "$j3"; do
    st="$(wait_job "$j" 900)"
    [[ "$st" == COMPLETED ]] || fail "job $j is $st: $(cat "$wd/slurm-$j.out")"
done
grep -q "^WROTE=saved by job $j1 on node1-vm" "$wd/slurm-$j1.out" || fail "job $j1: $(cat "$wd/slurm-$j1.out")"
saved="$wd/images/next.qcow2"
[[ -f "$saved" ]] || fail "job $j1 saved nothing at $saved (ls: $(ls -la "$wd/images"); record: $(sacct -n -X -P -j "$j1" -o AdminComment))"
[[ "$(stat -c %U "$saved")" == "$SVM_USER" ]] || fail "$saved is owned by $(stat -c %U "$saved"), not $SVM_USER"
info="$(qemu-img info -U --output=json "$saved")"
grep -q '"format": "qcow2"' <<<"$info" || fail "$saved is not a qcow2 image: $info"
grep -q backing <<<"$info" && fail "$saved still has a backing file: $info"
[[ -z "$(find "$wd/images" -name '.*slurm-vm-save*')" ]] || fail "a temporary file of the save was left in $wd/images"
[[ "$(image_stat)" == "$image_before" ]] || fail "the job's image $VM_TEST_IMAGE changed ($image_before -> $(image_stat))"
[[ ! -e "$wd/slurm-$j1.vm-save.txt" ]] || fail "job $j1 left a failure note: $(cat "$wd/slurm-$j1.vm-save.txt")"
pass "job $j1 saved its guest's disk to $saved ($SVM_USER's, qcow2 without backing file), the image unchanged"

[[ ! -e "$wd/locked/next.qcow2" ]] || fail "job $j3 wrote into a directory that was made read-only"
note="$wd/slurm-$j3.vm-save.txt"
grep -q "^slurm-vm: job $j3: --vm-save=$wd/locked/next.qcow2: the guest's disk could not be written as $SVM_USER" "$note" ||
    fail "job $j3 did not tell why the save failed in $note: $(cat "$note" 2>&1)"
[[ "$(stat -c %U "$note")" == "$SVM_USER" ]] || fail "$note is not $SVM_USER's"
no_node_drained
pass "job $j3: the save into a locked directory failed, $note says why ($(cat "$note")), no node drained"

# Job 2 boots the saved image and finds job 1's file.
j2="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 --vm-image="$saved" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" read.sh)"
st="$(wait_job "$j2" 900)"
[[ "$st" == COMPLETED ]] || fail "job $j2 (from the saved image) is $st: $(cat "$wd/slurm-$j2.out")"
grep -q "^READ=saved by job $j1 on node1-vm" "$wd/slurm-$j2.out" ||
    fail "job $j2 did not start from job $j1's disk: $(cat "$wd/slurm-$j2.out")"
for j in "$j1" "$j2" "$j3"; do wait_clean "$j" 120; done
no_node_drained
pass "job $j2 started from the saved image and found job $j1's file"
chmod 0755 "$wd/locked"
