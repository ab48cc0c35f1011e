#!/bin/bash
# MPI across the guests of 2- and 3-node VM jobs: plain `mpirun ./app` in the
# batch script; the program and its input live in the submit directory (shared
# into the guests with the user's rights), its output file is checked on the host.
source "$(dirname "$0")/lib.sh"
# The program must be built for the guest image's MPI (Open MPI 4.1, the
# image is Debian 12's), as a user builds theirs for their image: with this
# host's mpicc on Debian 12 (and 13: the same ABI), or, where the host's MPI
# is another (Debian forky's Open MPI 6), the binary that tests/matrix built
# on its Debian 12 host (SVM_GUEST_MPI_PROGRAM).
[[ -n "${SVM_GUEST_MPI_PROGRAM:-}" ]] || command -v mpicc >/dev/null ||
    fail "mpicc is missing (tests/cluster/up installs libopenmpi-dev)"

wd="$(workdir)"
echo 7 >"$wd/input.txt"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
mpirun ./allreduce
JOB
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
if [[ -n "${SVM_GUEST_MPI_PROGRAM:-}" ]]; then
    install -o "$SVM_USER" -m 0755 "$SVM_GUEST_MPI_PROGRAM" "$wd/allreduce" || fail "no $SVM_GUEST_MPI_PROGRAM"
else
    cp "$(dirname "$0")/../fixtures/allreduce.c" "$wd/allreduce.c" && chown "$SVM_USER:" "$wd/allreduce.c"
    runuser -u "$SVM_USER" -- mpicc -O2 -o "$wd/allreduce" "$wd/allreduce.c" || fail "mpicc failed"
fi

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
