#!/bin/bash
# Attack (issue: a user writes the admin-only AdminComment): `scontrol show
# job` prints a job's name raw, so a name with a newline forged the line
# every root writer of the VM record took for the AdminComment, and the
# user's keys ended in sacct; a forged "grouped" record whose host list
# multiplies (10^10 names) made root's prolog work without end. The writers
# now read the job as JSON (the fields apart) and check what they read
# (bounded, against the record's schema); only slurm-vm's keys reach sacct.
#  1. A forged job name and an AdminComment-looking --comment, on a job that
#     runs; while it runs, `scancel -b --signal=USR1` (the job carries
#     SIGNALING, which Slurm 22.05's `squeue -t R` leaves out) and an
#     immediate `slurm-vm sweep` of its node: the job survives.
#  2. A forged grouped record with a 10^10-name host list in the job name, on
#     a job the prolog refuses (its image swapped for one with a backing
#     file): the refusal is written in bounded time, with one sentence.
# No node drains; nothing is left.
source "$(dirname "$0")/lib.sh"

sweep_bin="${SVM_TEST_SWEEP_BIN:-$SVM_BUILD_DIR/admin/slurm-vm}"
conf="$SVM_CLUSTER_DIR/etc/slurm-vm.json"
wd="$(workdir)"
cat >"$wd/job.sh" <<'EOS'
#!/bin/bash
trap 'echo "got USR1 in $(hostname)"' USR1
echo started
i=0
while ((i++ < 600)); do
    if [[ -e go ]]; then echo ran; exit 0; fi
    sleep 1 & wait $!
done
exit 3
EOS
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"

# only_ours AdminComment NODE...: the record holds slurm-vm's keys only, for
# exactly these nodes, and nothing of the user's.
only_ours() {
    python3 - "$@" <<'PY'
import json, sys
text, want = sys.argv[1], sorted(sys.argv[2:])
assert "forged" not in text, "a forged key or value: " + text
root = json.loads(text)
assert list(root) == ["slurm_vm"], "keys other than slurm_vm: %s" % list(root)
vm = root["slurm_vm"]
assert set(vm) <= {"v", "nodes", "form", "summarized", "omitted"}, vm
assert vm["v"] == 1 and sorted(vm["nodes"]) == want, vm
PY
}
sacct_comment() { sacct -n -X -j "$1" -o AdminComment%8000 -P 2>/dev/null | head -n1; }
# ours_alone ID: waits (60 s at most) until job ID's AdminComment in sacct
# holds node1's record of slurm-vm's alone, then sets comment to it; fails
# when it never does.
ours_alone() {
    local end=$(( $(date +%s) + 60 ))
    until only_ours "$(sacct_comment "$1")" node1 2>/dev/null; do
        (( $(date +%s) < end )) || break
        sleep 2
    done
    comment="$(sacct_comment "$1")"
    only_ours "$comment" node1 || fail "job $1's AdminComment is not slurm-vm's alone: $comment"
}

forged='{"forged_by":"svmuser","slurm_vm":{"v":1,"nodes":{"node1":{"image":"forged"},"node9":{"error":"forged"}}}}'
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -t 10 --job-name=$'x\nAdminComment='"$forged" \
    --comment="AdminComment=$forged" $(vm_opts) job.sh)" || fail "sbatch refused the forged job name: $id"
log "job $id: a job name and a comment that forge an AdminComment line"
wait_output "$wd/slurm-$id.out" started "job $id" 600
scontrol show job "$id" | grep -q "^AdminComment=.*forged_by" ||
    log "note: scontrol show job $id does not print the forged line as its own line"

# The sweep right after a signal: the job is RUNNING with SIGNALING while
# slurmctld delivers it.
as_user "$SVM_USER" scancel -b --signal=USR1 "$id"
sweep_out="$("$sweep_bin" sweep --config "$conf" --node node1 2>&1)" || fail "sweep failed: $sweep_out"
! grep -qE "job $id( |:)" <<<"$sweep_out" || fail "sweep took signalled job $id for gone: $sweep_out"
[[ -e "$SVM_STATE_ROOT/node1/job_$id" ]] || fail "job $id's state on node1 is gone after the sweep"
wait_output "$wd/slurm-$id.out" "got USR1 in node1-vm" "scancel -b --signal=USR1 $id" 60
touch "$wd/go"
st="$(wait_job "$id" 300)"
[[ "$st" == COMPLETED ]] || fail "job $id ended $st: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
ours_alone "$id"
python3 -c 'import json,sys; e=json.loads(sys.argv[1])["slurm_vm"]["nodes"]["node1"]; assert e["ready_ms"]>0 and e["image"]!="forged", e' \
    "$comment" || fail "job $id's record lacks its node's entry: $comment"
wait_clean "$id" 60
pass "job $id: forged name and comment kept out of AdminComment ($comment); the signalled job survived a sweep"

# 2. The multiplying host list, in a job the prolog refuses.
grouped='{"forged_by":"svmuser","slurm_vm":{"v":1,"form":"grouped","nodes":{"a[0-99999]b[0-99999]":{"error":"forged"}}}}'
cp --reflink=auto "$VM_TEST_IMAGE" "$wd/mine.qcow2" 2>/dev/null || qemu-img create -q -f qcow2 "$wd/mine.qcow2" 64M
chown "$SVM_USER:" "$wd/mine.qcow2"
id2="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --hold -N1 -w node1 --mem=1500 \
    --job-name=$'y\nAdminComment='"$grouped" --vm-image="$wd/mine.qcow2" job.sh)" || fail "sbatch refused: $id2"
as_user "$SVM_USER" qemu-img create -q -u -f qcow2 -F raw -b /etc/shadow "$wd/swap.qcow2" 64M
mv -f "$wd/swap.qcow2" "$wd/mine.qcow2"
t0=$(date +%s)
scontrol release "$id2"
st="$(wait_job "$id2" 300)"
took=$(( $(date +%s) - t0 ))
[[ "$st" == FAILED ]] || fail "job $id2 refused by the prolog ended $st"
(( took < 120 )) || fail "job $id2's refusal took ${took}s"
grep -q "has a backing file (/etc/shadow)" "$wd/slurm-$id2.out" ||
    fail "job $id2's output lacks the one sentence: $(cat "$wd/slurm-$id2.out" 2>/dev/null)"
ours_alone "$id2"
grep -q "has a backing file" <<<"$comment" || fail "job $id2's record lacks the refusal: $comment"
wait_clean "$id2" 60
no_node_drained
pass "job $id2: a 10^10-name grouped record in the job name; refused by the prolog in ${took}s with one sentence, record ours alone"
