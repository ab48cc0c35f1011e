#!/bin/bash
# Attack (issue: failures that drain the node for a user's mistake): a user
# must not be able to drain nodes. An image path padded with /./ past 1,023
# bytes used to make the prolog's qemu-img fail and drain the node; a guest
# address held by another job (job ids 254 apart shared it) drained it too.
# Addresses no longer depend on the job; what two live jobs can still share
# is a VXLAN network identifier (ids 16,777,215 apart): the second job on a
# node fails with one sentence. Every node stays up.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/sh\necho should-not-run\n' >"$wd/job.sh"
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"

# 1. A 1,400-byte path to a real image.
long="$(dirname "$VM_TEST_IMAGE")"
while (( ${#long} < 1400 )); do long+="/."; done
long+="/$(basename "$VM_TEST_IMAGE")"
if out="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --vm-image="$long" \
        --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh 2>&1)"; then
    id="$out"
    st="$(wait_job "$id" 300)"
    [[ "$st" == FAILED ]] || fail "job $id with a ${#long}-byte image path ended $st"
    grep -q should-not-run "$wd/slurm-$id.out" 2>/dev/null && fail "job $id ran on the host"
    wait_clean "$id" 60
else
    grep -q "longer than 1023 bytes" <<<"$out" || fail "sbatch refused the long path without saying why: $out"
    log "refused at submit: $(tail -n1 <<<"$out")"
fi
no_node_drained

# 2. The next jobs' VXLAN network identifiers on node1 taken by "another job"
# (a VXLAN device in node1's underlay namespace, as a job 16,777,215 ids
# away would have).
last="$(sacct -n -X -o JobID -S now-1days 2>/dev/null | grep -o '^[0-9]*' | sort -n | tail -n1)"
fakes=()
cleanup() { for d in "${fakes[@]}"; do ip -n svmu-node1 link del "$d" 2>/dev/null; done; }
on_exit cleanup
for ((j = last + 1; j <= last + 6; j++)); do
    d="svxt$((j - last))"
    ip -n svmu-node1 link add "$d" type vxlan id $(( (j - 1) % 16777215 + 1 )) local 10.215.0.1 dstport 4789 nolearning ||
        fail "cannot make the VXLAN of a fake job in svmu-node1"
    fakes+=("$d")
done
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 $(vm_opts) job.sh)"
(( id > last && id <= last + 6 )) || fail "job $id got an id outside the prepared range ($((last + 1))-$((last + 6)))"
st="$(wait_job "$id" 300)"
[[ "$st" == FAILED ]] || fail "job $id whose network identifier was taken ended $st"
grep -q should-not-run "$wd/slurm-$id.out" 2>/dev/null && fail "job $id ran on the host"
grep -q "is in use on this node by another live job" "$wd/slurm-$id.out" ||
    fail "job $id's output does not say why: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
wait_clean "$id" 60
for d in "${fakes[@]}"; do
    ip -n svmu-node1 link show "$d" >/dev/null 2>&1 || fail "the failed job removed another job's VXLAN $d"
done
no_node_drained
pass "a 1,400-byte image path and a taken network identifier fail the job with one sentence; no node drained"
