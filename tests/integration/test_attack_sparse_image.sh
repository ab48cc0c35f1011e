#!/bin/bash
# Attack (issue: a user drains a node with a sparse image): a qcow2 of 64 MiB
# virtual size padded to 8 TiB with a sparse tail costs the user nothing, and
# a root prolog that reads every byte of it (the digest) runs for hours, past
# Slurm's PrologEpilogTimeout, which drains the node. A file that grows while
# the node looks at it does the same. Intake caps the file's size as it caps
# the virtual size, on the descriptor, before reading anything; the digest is
# read once per job by the head node's keeper as the user, never past the size
# that was checked. So: refused with one sentence at submit, refused with one
# sentence by the prolog (the file padded after submit), refused or run on the
# checked bytes when it grows meanwhile; each quickly, no node drained,
# nothing left.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
img="$wd/sparse.qcow2"
printf '#!/bin/sh\necho should-not-run\n' >"$wd/job.sh"
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
as_user "$SVM_USER" qemu-img create -q -f qcow2 "$img" 64M
as_user "$SVM_USER" truncate -s 8T "$img"
[[ "$(stat -c %s "$img")" == $((8 << 40)) ]] || fail "the padded image is $(stat -c %s "$img") bytes"
sentence="is a file of 8 TiB, more than"

# 1. At submit: sbatch (as the user) refuses it at once, no job is made.
before="$(squeue -h -o %i | wc -l)"
t0=$(date +%s)
rc=0; out="$(cd "$wd" && as_user "$SVM_USER" timeout 60 sbatch --parsable -N1 -w node1 --vm-image="$img" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh 2>&1)" || rc=$?
if (( rc == 0 )); then scancel "$out"; fail "sbatch took the 8 TiB image: job $out"; fi
(( rc != 124 )) || fail "sbatch took more than 60 s over the 8 TiB image: $out"
grep -q "$sentence" <<<"$out" || fail "sbatch refused the 8 TiB image without saying why: $out"
(( $(date +%s) - t0 < 60 )) || fail "sbatch took $(( $(date +%s) - t0 )) s to refuse it"
[[ "$(squeue -h -o %i | wc -l)" == "$before" ]] || fail "a refused submission created a job"
pass "refused at submit in $(( $(date +%s) - t0 )) s: $(grep -m1 "$sentence" <<<"$out")"

# 2. Padded after the submit-time check (held, padded, released): the prolog
# refuses it, as the user, before reading it; the job fails with the sentence.
as_user "$SVM_USER" truncate -s 64M "$img"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --hold -N1 -w node1 --mem=1500 --vm-image="$img" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh)"
as_user "$SVM_USER" truncate -s 8T "$img"
t0=$(date +%s)
scontrol release "$id"
state="$(wait_job "$id" 120)"
took=$(( $(date +%s) - t0 ))
[[ "$state" == FAILED ]] || fail "job $id with the padded image is $state: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
(( took < 60 )) || fail "job $id took $took s to be refused"
grep -q "$sentence" "$wd/slurm-$id.out" || fail "job $id's output lacks the reason: $(cat "$wd/slurm-$id.out")"
grep -q should-not-run "$wd/slurm-$id.out" && fail "job $id ran"
comment="$(scontrol show job "$id" | sed -n 's/^ *AdminComment=//p' | head -n1)"
python3 - "$comment" "$sentence" <<'PY' || fail "job $id's AdminComment lacks the refusal: '$comment'"
import json, sys
err = json.loads(sys.argv[1])["slurm_vm"]["nodes"]["node1"]["error"]
assert sys.argv[2] in err and err.count(". ") == 0, err
PY
wait_clean "$id" 60
no_node_drained
pass "refused by the prolog in $took s: job $id failed with '$(grep -m1 "$sentence" "$wd/slurm-$id.out")'"

# 3. A file that grows while the job starts (a writer appends 4 MiB every
# 20 ms as the user): the prolog refuses it (grown past what its virtual size
# allows, or changed while checked) or the job runs on the bytes that were
# checked; within the same bound either way, and nothing is read past them.
grow="$wd/grow.qcow2"
as_user "$SVM_USER" qemu-img create -q -f qcow2 "$grow" 64M
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --hold -N1 -w node2 --mem=1500 --vm-image="$grow" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh)"
# (It stops by itself: after 60 s, at 512 MiB, or once $wd/stop exists.)
as_user "$SVM_USER" bash -c 'end=$((SECONDS + 60))
    while (( SECONDS < end )) && [[ -e "$1" && ! -e "$2" ]] && (( $(stat -c %s "$1") < (512 << 20) )); do
        head -c 4M /dev/zero >>"$1" || exit 0; sleep 0.02; done' grow "$grow" "$wd/stop" &
writer=$!
on_exit "touch $wd/stop 2>/dev/null"
t0=$(date +%s)
scontrol release "$id"
state="$(wait_job "$id" 120)"
took=$(( $(date +%s) - t0 ))
touch "$wd/stop"; wait "$writer" 2>/dev/null || true
out="$(cat "$wd/slurm-$id.out" 2>/dev/null)"
[[ "$state" == FAILED ]] || fail "job $id with a growing image is $state: $out"
grep -qE "more than what its virtual size|changed while it was being checked|changed since" <<<"$out" \
    || fail "job $id failed without saying the image grew: $out"
(( took < 60 )) || fail "job $id took $took s to be refused"
wait_clean "$id" 60
no_node_drained
pass "a growing image: job $id refused in $took s: $(grep -m1 -E 'more than|changed' <<<"$out")"
