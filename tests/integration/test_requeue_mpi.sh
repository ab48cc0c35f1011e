#!/bin/bash
# --vm-resume=auto with MPI: a 2-node job whose mpirun runs an allreduce a
# second over TCP between its guests is requeued while it runs and goes on,
# on other nodes, with the same ranks and connections: no step runs twice,
# every step's sum is right, and the job completes. Its guests' addresses
# are the same on the new nodes' segment. Nothing is left after it.
source "$(dirname "$0")/lib.sh"

nodes_without_shares
wd="$(workdir)"
guest_mpi_program "$wd" mpi_count
# No shares: the program travels in the script, to both guests.
# shellcheck disable=SC2016
{
    echo '#!/bin/bash'
    echo 'set -e'
    echo 'cd /tmp'
    echo "base64 -d >mpi_count <<'B64'"
    base64 "$wd/mpi_count"
    echo 'B64'
    echo 'chmod 755 mpi_count'
    echo 'for h in $(awk "{print \$1}" "$OMPI_MCA_orte_default_hostfile"); do'
    echo '    [ "$h" = "$(hostname)" ] || ssh "$h" "cat >/tmp/mpi_count && chmod 755 /tmp/mpi_count" <mpi_count'
    echo 'done'
    echo 'mpirun --mca btl tcp,self /tmp/mpi_count 30'
} >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N2 --ntasks-per-node=1 --mem=1500 \
    --vm-resume=auto $(vm_opts) job.sh)"
on_exit "scancel $id 2>/dev/null"
log "submitted resumable 2-node MPI job $id"
out="$wd/slurm-$id.out"
wait_output "$out" "^step 4 of 30" "the MPI program's steps" 900
nodes="$(job_field "$id" NodeList)"
scontrol requeue "$id" || fail "scontrol requeue $id failed"
log "requeued job $id on $nodes"
wait_saved "$id" 2 180
wait_state "$id" PENDING 120
# Off node1: one of its guests is restored on a node that ran the other,
# once Slurm's requeue delay (AuthInfo=cred_expire) has passed.
scontrol update jobid="$id" ExcNodeList=node1 || fail "cannot move job $id off node1"
wait_state "$id" RUNNING 300
log "job $id runs again on $(job_field "$id" NodeList)"
state="$(wait_job "$id" 600)"
[[ "$state" == COMPLETED ]] || fail "job $id ended $state: $(tail -20 "$out")"
grep -q "goes on where it was" "$out" || fail "the batch step did not reattach: $(cat "$out")"
for ((i = 1; i <= 30; i++)); do
    [[ "$(grep -c "^step $i of 30: sum 3 over 2 ranks on " "$out")" == 1 ]] ||
        fail "step $i is not in the output once with sum 3: $(grep -E "^step ($i|$((i - 1))) " "$out")"
done
[[ "$(job_field "$id" NodeList)" != *node1* ]] || fail "job $id ran again on node1"
wait_clean "$id" 120
no_node_drained
pass "a requeued 2-node MPI job went on from where it was on other nodes and completed"
