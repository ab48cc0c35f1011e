#!/bin/bash
# MPI across the guests of 2- and 3-node VM jobs: plain `mpirun ./app` in the
# batch script; the program and its input live in the submit directory (shared
# into the guests with the user's rights), its output file is checked on the host.
source "$(dirname "$0")/lib.sh"
wd="$(workdir)"
echo 7 >"$wd/input.txt"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
mpirun ./allreduce
JOB
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
guest_mpi_program "$wd"

for nodes in 2 3; do
    rm -f "$wd/result.txt"
    # shellcheck disable=SC2046
    id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N"$nodes" --ntasks-per-node=1 --mem=1500 $(vm_opts) job.sh)"
    log "submitted $nodes-node MPI job $id"
    state="$(wait_job "$id" 900)"
    out="$wd/slurm-$id.out"
    log "output: $(tr '\n' '|' <"$out")"
    [[ "$state" == COMPLETED ]] || fail "MPI job $id ended $state: $(cat "$out")"
    want=$(( 7 * nodes * (nodes - 1) / 2 ))
    for ((r = 0; r < nodes; r++)); do
        grep -q "^rank $r of $nodes on node[1-3]-vm: sum $want$" "$out" || fail "rank $r did not print sum $want"
    done
    [[ "$(grep -o 'on node[1-3]-vm' "$out" | sort -u | wc -l)" == "$nodes" ]] || fail "ranks did not run in $nodes different guests"
    [[ "$(cat "$wd/result.txt" 2>/dev/null)" == "$nodes $want" ]] || fail "result.txt on the host is '$(cat "$wd/result.txt" 2>/dev/null)'"
    [[ "$(stat -c %U "$wd/result.txt")" == "$SVM_USER" ]] || fail "result.txt is not owned by the job's user"
    wait_clean "$id" 120
    pass "$nodes-node MPI job $id: allreduce sum $want from every rank, result file on the host"
done
no_node_drained
