#!/bin/bash
# Bad images are refused by sbatch with one clear sentence; no node drains and
# no job is created. An image that turns bad after the submit is refused by the
# prolog: the job fails, and `scontrol show job` gives the sentence as this
# node's "error" in the AdminComment record.
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

expect_refusal() { sbatch_refused "$wd" "the image $1" "$2" -N1 --vm-image="$1" job.sh; }
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

# Refused on the node (the image was swapped for one with a backing file after
# sbatch checked it): the reason is in `scontrol show job`.
cp --reflink=auto "$VM_TEST_IMAGE" "$wd/mine.qcow2" 2>/dev/null || qemu-img create -q -f qcow2 "$wd/mine.qcow2" 64M
chown "$SVM_USER:" "$wd/mine.qcow2"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --hold -N1 -w node1 --mem=1500 --vm-image="$wd/mine.qcow2" job.sh)"
as_user "$SVM_USER" qemu-img create -q -u -f qcow2 -F raw -b /etc/shadow "$wd/swap.qcow2" 64M
mv -f "$wd/swap.qcow2" "$wd/mine.qcow2"
scontrol release "$id"
state="$(wait_job "$id" 300)"
[[ "$state" == FAILED ]] || fail "job $id refused by the prolog is $state"
comment="$(scontrol show job "$id" | sed -n 's/^ *AdminComment=//p' | head -n1)"
python3 - "$comment" <<'PY' || fail "scontrol show job $id has no refusal in AdminComment: '$comment'"
import json, sys
rec = json.loads(sys.argv[1])["slurm_vm"]
assert rec["v"] == 1, rec
err = rec["nodes"]["node1"]["error"]
assert "has a backing file (/etc/shadow)" in err, err
PY
grep -q "has a backing file (/etc/shadow)" "$wd/slurm-$id.out" || fail "the job's output lacks the reason: $(cat "$wd/slurm-$id.out")"
grep -qx hi "$wd/slurm-$id.out" && fail "job $id ran with a swapped image"
wait_clean "$id" 60
no_node_drained
pass "refused by the prolog: job $id failed, scontrol show job says why (AdminComment $comment), no node drained"
