#!/bin/bash
# An MPI application, the same under both launchers: LAMMPS (the image's
# Debian 12 lmp) runs a Lennard-Jones melt (tests/fixtures/lammps_melt.in:
# 2048 atoms, 30 steps, a fixed velocity seed) with 4 ranks in the 2 guests
# of one VM job, once with `mpirun -np 4` and once with `srun --mpi=pmix -n4`,
# from the batch script. Both runs must finish with 4 MPI tasks and print the
# same thermo table (at least 5 rows): same physics, however the ranks were
# started and wired up. Each run's wall time in the guest is logged.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cp "$(dirname "$0")/../fixtures/lammps_melt.in" "$wd/in.melt"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
export OMP_NUM_THREADS=1
# run LABEL LAUNCHER...: lmp under LAUNCHER, its log in log.LABEL
run() {
    local label="$1" t0 rc=0
    shift
    t0=$(date +%s%N)
    "$@" lmp -in in.melt -log "log.$label" || rc=$?
    echo "$label exit $rc wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
run mpirun mpirun -np 4
run srun srun --mpi=pmix -n4
JOB
id="$(vm_batch "$wd" -N2 -w node1,node2 --ntasks-per-node=2 --mem=1500)"
out="$wd/slurm-$id.out"
wait_ended "$id" COMPLETED 900 "$out"

# thermo LOG: the thermo table of a LAMMPS log, its header and rows.
thermo() { awk '/^Step /{on = 1} /^Loop time of /{on = 0} on' "$1"; }
for l in mpirun srun; do
    f="$wd/log.$l"
    grep -Eq "^$l exit 0 wall [0-9]+ ms$" "$out" || fail "$l did not exit 0: $(cat "$out")"
    log "$l: $(grep "^$l exit" "$out"); LAMMPS: $(grep -E '^(Total wall time:|Loop time|Pair|Comm) ' "$f" 2>/dev/null | tr -s ' ' | tr '\n' ';')"
    [[ -s "$f" ]] || fail "$l: no LAMMPS log $f: $(cat "$out")"
    grep -q "^Total wall time: " "$f" || fail "$l: the run did not finish: $(tail -n 20 "$f")"
    grep -q "^Loop time of .* on 4 procs for 30 steps with 2048 atoms$" "$f" ||
        fail "$l: not 30 steps on 4 procs: $(grep '^Loop time' "$f")"
    grep -q " with 4 MPI tasks x " "$f" || fail "$l: not 4 MPI tasks: $(grep 'MPI tasks' "$f")"
    thermo "$f" >"$wd/thermo.$l"
done
rows="$(($(wc -l <"$wd/thermo.mpirun") - 1))"
(( rows >= 5 )) || fail "the thermo table has $rows rows: $(cat "$wd/thermo.mpirun")"
head -n1 "$wd/thermo.mpirun" | grep -q "^Step Temp E_pair " || fail "no thermo header: $(cat "$wd/thermo.mpirun")"
diff "$wd/thermo.mpirun" "$wd/thermo.srun" >"$wd/thermo.diff" ||
    fail "srun's thermo output differs from mpirun's: $(tr -s ' ' <"$wd/thermo.diff" | tr '\n' '|')"
log "thermo, the same in both runs: $(tail -n1 "$wd/thermo.srun" | tr -s ' ')"
wait_clean "$id" 120
no_node_drained
pass "job $id: LAMMPS with 4 ranks in 2 guests, the same $rows thermo rows under mpirun and srun --mpi=pmix"
