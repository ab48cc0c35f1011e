#!/bin/bash
# Bad images are refused by sbatch with one clear sentence; no node drains and
# no job is created.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/sh\necho hi\n' >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
secret=/root/svmtest-secret.qcow2
qemu-img create -q -f qcow2 "$secret" 64M && chmod 600 "$secret"
mkdir -p "$wd/adir"
printf 'just some text, not a disk\n' >"$wd/notes.txt"
chown "$SVM_USER:" "$wd/notes.txt" "$wd/adir"
before="$(squeue -h -o %i | wc -l)"

expect_refusal() {
    local image="$1" pattern="$2" out rc=0
    out="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 --vm-image="$image" job.sh 2>&1)" || rc=$?
    [[ $rc -ne 0 ]] || fail "sbatch accepted $image (job $out)"
    grep -q -- "$pattern" <<<"$out" || fail "refusal of $image does not say '$pattern': $out"
    log "refused $image: $(grep -m1 slurm-vm <<<"$out")"
}
expect_refusal "$secret" "not readable by"
expect_refusal "$wd/adir" "directory"
expect_refusal "$wd/notes.txt" "not a disk image"
expect_refusal "$wd/missing.qcow2" "does not exist\|No such file"
# The environment twin is checked the same way.
rc=0; out="$(cd "$wd" && as_user "$SVM_USER" env SLURM_VM_IMAGE="$wd/adir" sbatch --parsable -N1 job.sh 2>&1)" || rc=$?
[[ $rc -ne 0 ]] && grep -q directory <<<"$out" || fail "SLURM_VM_IMAGE was not checked: $out"
after="$(squeue -h -o %i | wc -l)"
[[ "$before" == "$after" ]] || fail "a refused submission created a job"
no_node_drained
rm -f "$secret"
pass "bad images refused at submit time, no node drained"
