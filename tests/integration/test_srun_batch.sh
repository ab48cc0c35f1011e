#!/bin/bash
# srun called by the batch script, which runs inside the guest (no Slurm
# client there): the guest's srun hands the command line to the batch step on
# the host, whose real srun starts a step whose tasks run in the guests of
# their nodes. Ranks, hostnames, output, stderr and exit status come back.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/job.sh" <<'SCRIPT'
#!/bin/bash
echo "batch in $(hostname)"
srun -N2 -n4 bash -c 'echo "rank $SLURM_PROCID local $SLURM_LOCALID node $SLURM_NODEID on $(hostname)"' | sort
echo "srun exit ${PIPESTATUS[0]}"
srun -N1 -n1 bash -c 'echo to-stderr >&2; exit 5' 2>"stderr.txt"
echo "exit5 -> $?"
SCRIPT
id="$(vm_batch "$wd" -N2 -n4 -w node1,node2 -t 10)"
wait_ended "$id" COMPLETED 600 "$wd/slurm-$id.out"
out="$(cat "$wd/slurm-$id.out")"
grep -q "^batch in node1-vm$" <<<"$out" || fail "the batch script did not run in node1's guest: $out"
want="rank 0 local 0 node 0 on node1-vm
rank 1 local 1 node 0 on node1-vm
rank 2 local 0 node 1 on node2-vm
rank 3 local 1 node 1 on node2-vm"
got="$(grep '^rank ' <<<"$out")"
[[ "$got" == "$want" ]] || fail "srun -N2 -n4 from the batch script printed:
$got
want:
$want
(whole output: $out)"
grep -q "^srun exit 0$" <<<"$out" || fail "srun's exit status was not 0: $out"
grep -q "^exit5 -> 5$" <<<"$out" || fail "a task's exit 5 did not become srun's exit status: $out"
grep -q "^to-stderr$" "$wd/stderr.txt" || fail "the task's stderr did not reach the script's redirection: $(cat "$wd/stderr.txt" 2>&1)"
wait_clean "$id" 60
no_node_drained
pass "job $id: srun -N2 -n4 from the batch script ran in both guests with the right ranks; exit 5 and stderr came back"
