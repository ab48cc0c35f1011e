#!/bin/bash
# srun --mpi=pmix in VM jobs: Slurm starts the MPI ranks in the guests and
# they wire up through the step's PMIx server on the host (lib/guest/pmix.hpp).
# - From the batch script in the guest: srun --mpi=pmix -N2 -n4.
# - From outside, into the running VM job, with MpiDefault=pmix in the login
#   node's slurm.conf: plain srun --jobid --overlap.
# - srun --mpi=pmi2 is refused with one sentence.
# Each run is checked: all 4 ranks in 2 guests agree on the allreduce sum.
# Nothing of the steps' forwards is left after the job.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
echo 7 >"$wd/input.txt"
guest_mpi_program "$wd"
want=$((7 * (0 + 1 + 2 + 3)))

# check_ranks FILE LABEL COUNT: every rank of 4 printed the sum COUNT times,
# from both guests.
check_ranks() {
    local r
    for ((r = 0; r < 4; r++)); do
        [[ "$(grep -c "^rank $r of 4 on node[12]-vm: sum $want$" "$1")" == "$3" ]] ||
            fail "$2: rank $r did not print 'sum $want' $3 time(s): $(tr '\n' '|' <"$1")"
    done
    [[ "$(grep -o "of 4 on node[12]-vm" "$1" | sort -u | wc -l)" == 2 ]] || fail "$2: the ranks did not run in 2 guests"
}

cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
srun --mpi=pmix -N2 -n4 ./allreduce
echo "pmix srun exit $?"
srun --mpi=pmi2 -N1 -n1 true
echo "pmi2 srun exit $?"
JOB
id="$(vm_batch "$wd" -N2 -w node1,node2 --ntasks-per-node=2 --mem=1500)"
out="$wd/slurm-$id.out"
wait_ended "$id" COMPLETED 900 "$out"
log "output: $(tr '\n' '|' <"$out")"
grep -q "^pmix srun exit 0$" "$out" || fail "srun --mpi=pmix did not exit 0"
check_ranks "$out" "srun --mpi=pmix in the batch script" 1
[[ "$(cat "$wd/result.txt")" == "4 $want" ]] || fail "result.txt is '$(cat "$wd/result.txt")'"
grep -q "srun --mpi=pmi2 cannot wire up ranks in a VM job's guests: use --mpi=pmix" "$out" ||
    fail "srun --mpi=pmi2 was not refused with its sentence"
grep -Eq "^pmi2 srun exit [1-9]" "$out" || fail "srun --mpi=pmi2 did not fail"
wait_clean "$id" 120
pass "job $id: srun --mpi=pmix from the batch script, 4 ranks in 2 guests; pmi2 refused"

# From outside: a VM job that waits, and a plain srun into it from a login
# node whose slurm.conf says MpiDefault=pmix (srun reads it there).
conf="$(dirname "$SLURM_CONF")/slurm.mpi-default.conf"
sed 's/^MpiDefault=.*/MpiDefault=pmix/' "$SLURM_CONF" >"$conf" && chmod 644 "$conf"
on_exit "rm -f $conf"
grep -q '^MpiDefault=pmix$' "$conf" || fail "no MpiDefault line in $SLURM_CONF"
printf '#!/bin/bash\nsleep 900\n' >"$wd/job.sh"
rm -f "$wd/result.txt"
id="$(vm_batch "$wd" -N2 -w node1,node2 --ntasks-per-node=2 --mem=1500)"
wait_state "$id" RUNNING 300
rc=0
o="$(cd "$wd" && as_user "$SVM_USER" env SLURM_CONF="$conf" srun --jobid="$id" --overlap -N2 -n4 ./allreduce 2>&1)" || rc=$?
echo "$o" >"$wd/outside.txt"
log "outside srun: $(tr '\n' '|' <<<"$o")"
[[ $rc -eq 0 ]] || fail "srun with MpiDefault=pmix into job $id exited $rc"
check_ranks "$wd/outside.txt" "srun with MpiDefault=pmix from outside" 1
[[ "$(cat "$wd/result.txt")" == "4 $want" ]] || fail "result.txt is '$(cat "$wd/result.txt")'"
# The steps' forwards ended with their steps (Slurm kills a step's processes).
pgrep -u "$SVM_USER" -f "ExitOnForwardFailure=yes" >/dev/null && fail "an SSH forward of an ended step is left"
scancel "$id"
wait_clean "$id" 180
no_node_drained
pass "job $id: plain srun --jobid with MpiDefault=pmix from outside, 4 ranks in 2 guests, no forward left"
