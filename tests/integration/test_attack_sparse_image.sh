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

# 4. The digest, once per job: a new version of an image (a fresh copy) on a
# 2-node job is read by the head node's keeper only, as the user; the head's
# entry carries what sha256sum says, the other node's none.
fresh="$wd/fresh.qcow2"
cp "$VM_TEST_IMAGE" "$fresh"; chown "$SVM_USER:" "$fresh"
want="sha256:$(sha256sum <"$fresh" | cut -c1-64)"
printf '#!/bin/sh\necho ran\n' >"$wd/ok.sh"; chmod 755 "$wd/ok.sh"; chown "$SVM_USER:" "$wd/ok.sh"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N2 -w node1,node2 --mem=1500 --vm-image="$fresh" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" ok.sh)"
[[ "$(wait_job "$id" 600)" == COMPLETED ]] || fail "job $id failed: $(cat "$wd/slurm-$id.out")"
comment=""; end=$(( $(date +%s) + 60 ))
while (( $(date +%s) < end )); do
    comment="$(scontrol show job "$id" | sed -n 's/^ *AdminComment=//p' | head -n1)"
    [[ "$comment" == *'"digest"'* ]] && break
    sleep 1
done
python3 - "$comment" "$want" <<'PY' || fail "job $id's record: the head's digest should be $want, node2's none: $comment"
import json, sys
nodes = json.loads(sys.argv[1])["slurm_vm"]["nodes"]
assert nodes["node1"]["digest"] == sys.argv[2], nodes
assert "digest" not in nodes["node2"] and nodes["node2"]["image"] == nodes["node1"]["image"], nodes
PY
log_dir="$(cluster_setting log_dir /var/log/slurm-vm)"
grep -q "image digest $want (as user $SVM_USER" "$log_dir/node1/job_$id.log" \
    || fail "node1's keeper did not read the digest as $SVM_USER: $(grep -h digest "$log_dir/node1/job_$id.log")"
! grep -q "image digest" "$log_dir/node2/job_$id.log" || fail "node2 read the image for a digest too"
wait_clean "$id" 120
no_node_drained
pass "job $id: the image's digest read once, on the head node, as $SVM_USER: $want"
