#!/bin/bash
# The VM record of a job on every node of the cluster, with one writer: the
# keepers of node2 and node3 hand their entries to the head node's keeper
# (node1) over the job's segment, and only node1 writes the AdminComment;
# all three entries are there (none lost to a racing read-merge-write).
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho ran\n' >"$wd/job.sh"
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N3 --ntasks-per-node=1 --mem=1200 -t 10 $(vm_opts) job.sh)"
log "submitted 3-node job $id"
st="$(wait_job "$id" 900)"
[[ "$st" == COMPLETED ]] || fail "job $id ended $st: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
complete() { # AdminComment -> whether it holds all three nodes' entries
    python3 - "$1" "$VM_TEST_IMAGE" <<'PY'
import json, sys
try:
    nodes = json.loads(sys.argv[1])["slurm_vm"]["nodes"]
except Exception:
    sys.exit(1)
assert sorted(nodes) == ["node1", "node2", "node3"], sorted(nodes)
for n, e in nodes.items():
    assert e["image"] == sys.argv[2] and e["ready_ms"] > 0, (n, e)
PY
}
end=$(( $(date +%s) + 120 )); comment=""
while (( $(date +%s) < end )); do
    comment="$(sacct -n -X -j "$id" -o AdminComment%8000 -P 2>/dev/null | head -n1)"
    complete "$comment" 2>/dev/null && break
    sleep 2
done
complete "$comment" || fail "the VM record lacks a node's entry: $comment"
logs=/var/log/slurm-vm
for n in node2 node3; do
    grep -q "VM record entry handed to the job's head node node1" "$logs/$n/job_$id.log" ||
        fail "$n's keeper did not hand its entry to node1: $(grep -i record "$logs/$n/job_$id.log")"
    grep -q "published in AdminComment" "$logs/$n/job_$id.log" && fail "$n's keeper wrote the AdminComment itself"
done
writes="$(grep -c "VM record published in AdminComment" "$logs/node1/job_$id.log" || true)"
grep -q "VM record published in AdminComment: 3 node(s)" "$logs/node1/job_$id.log" ||
    fail "node1's keeper did not write the three entries: $(grep -i record "$logs/node1/job_$id.log")"
wait_clean "$id" 60
no_node_drained
pass "job $id: one writer (node1, $writes write(s)), entries of node1, node2 and node3 all in AdminComment"
