#!/bin/bash
# srun with --vm-image directly (no sbatch), and srun inside a salloc --vm-image
# allocation: every task runs inside the guest of the node it was placed on,
# with the right rank variables; a task's exit status becomes srun's.
# Both name their nodes (-w): a node still ending the job before (its epilog)
# would otherwise be left out of the allocation.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
chown "$SVM_USER:" "$wd"
cd "$wd" || fail "cannot enter $wd"
rc=0
# shellcheck disable=SC2046,SC2016
out="$(as_user "$SVM_USER" srun -N2 -w node1,node2 -n4 --mem=1500 $(vm_opts) -l /bin/sh -c \
      'echo "host=$(hostname) procid=$SLURM_PROCID localid=$SLURM_LOCALID nodeid=$SLURM_NODEID"; [ $SLURM_PROCID = 3 ] && exit 5; exit 0' 2>&1)" || rc=$?
log "srun output: $(tr '\n' '|' <<<"$out")"
[[ $rc -eq 5 ]] || fail "srun exit status is $rc, expected 5 from the task that exited 5"
for r in 0 1 2 3; do
    line="$(grep "procid=$r " <<<"$out" || true)"
    [[ -n "$line" ]] || fail "task $r printed nothing"
    [[ "$line" =~ host=node[12]-vm ]] || fail "task $r did not run in a guest: $line"
done
# Tasks on the same node run in that node's guest, and the node ids agree.
while read -r l; do
    h="$(sed -n 's/.*host=node\([12]\)-vm.*/\1/p' <<<"$l")"; n="$(sed -n 's/.*nodeid=\([0-9]\).*/\1/p' <<<"$l")"
    [[ "$h" == "$((n + 1))" ]] || fail "a task on node id $n ran in guest node$h-vm: $l"
done < <(grep 'procid=' <<<"$out")
[[ "$(grep -c 'localid=[01] ' <<<"$out")" == 4 ]] || fail "SLURM_LOCALID values are wrong"
pass "srun --vm-image: 4 tasks in 2 guests, rank variables right, exit 5 propagated"

# salloc --vm-image, then plain srun steps inside the allocation.
# shellcheck disable=SC2046,SC2016
out="$(as_user "$SVM_USER" salloc -N2 -w node1,node2 --mem=1500 $(vm_opts) srun -N2 -n2 /bin/sh -c 'echo "step on $(hostname) as $(id -un)"; cat' <<<"from-stdin" 2>&1)" || fail "salloc/srun failed: $out"
log "salloc output: $(tr '\n' '|' <<<"$out")"
grep -q "step on node1-vm as $SVM_USER" <<<"$out" || fail "no step ran in node1's guest"
grep -q "step on node2-vm as $SVM_USER" <<<"$out" || fail "no step ran in node2's guest"
grep -q "from-stdin" <<<"$out" || fail "srun's stdin did not reach the task in the guest"
no_node_drained
pass "salloc --vm-image + srun: steps ran in both guests, stdin forwarded"
