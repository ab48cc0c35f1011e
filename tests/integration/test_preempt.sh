#!/bin/bash
# --vm-resume=auto under preemption: a job of a higher-priority partition
# (PriorityTier, PreemptMode=REQUEUE) takes the node of a running resumable
# VM job; Slurm requeues that job, its guest is saved, and when the job runs
# again on another node its script goes on counting. Nothing is left.
source "$(dirname "$0")/lib.sh"

[[ "$(scontrol show config | sed -n 's/^PreemptType *= *//p')" == preempt/partition_prio ]] ||
    fail "the cluster has no PreemptType=preempt/partition_prio (tests/cluster/slurm.conf.in)"
nodes_without_shares
scontrol create PartitionName=urgent Nodes=node[1-3] PriorityTier=10 State=UP ||
    fail "cannot make the partition urgent"
on_exit "scontrol delete PartitionName=urgent"
wd="$(workdir)"
printf '#!/bin/sh\ni=0\nwhile :; do i=$((i + 1)); echo "count $i"; sleep 1; done\n' >"$wd/count.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -p debug -N1 -n2 --mem=1500 \
    --vm-resume=auto $(vm_opts) count.sh)"
on_exit "scancel $id 2>/dev/null"
out="$wd/slurm-$id.out"
wait_output "$out" "^count 4$" "the script counting in its guest" 600
node="$(job_field "$id" NodeList)"
urgent="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -p urgent -w "$node" -N1 -n2 --mem=1000 --wrap 'sleep 15')"
on_exit "scancel $urgent 2>/dev/null"
log "job $urgent of partition urgent takes $node from resumable job $id"
wait_state "$urgent" RUNNING 120
[[ "$(job_field "$id" Restarts)" -ge 1 ]] || fail "job $id was not requeued by the preemption ($(job_field "$id" JobState))"
[[ -e "$SVM_CLUSTER_DIR/checkpoints/job_$id/node0.json" ]] || fail "job $id was not saved at its preemption"
before="$(cat "$out" "$out.requeued" 2>/dev/null | grep -c '^count ' || true)"
wait_state "$id" PENDING 120
scontrol update jobid="$id" StartTime=now
wait_state "$id" RUNNING 300
wait_output "$out" "goes on where it was" "the batch step reattaching to the restored script" 300
wait_output "$out" "^count $((before + 2))$" "the count going on after the preemption" 120
[[ "$(grep -c '^count 1$' "$out")" == 1 ]] || fail "the script started again: $(cat "$out")"
grep -q "DUE TO JOB REQUEUE\|DUE TO PREEMPTION" "$out" || fail "Slurm's preemption is not in the output: $(cat "$out")"
log "job $id goes on counting on $(job_field "$id" NodeList) after its preemption"
scancel "$id" "$urgent"
wait_clean "$id" 120
no_node_drained
pass "a preempted resumable job was saved, requeued and went on counting"
