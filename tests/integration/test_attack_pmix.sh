#!/bin/bash
# The PMIx channel of srun --mpi=pmix (lib/guest/pmix.hpp), attacked:
# - one forward per node and step, not per task, the user's own process,
#   writing no file on the host (what a guest makes it log is not kept);
# - another user's guest (job B, on another node) cannot reach job A's step
#   server: not on its loopback, not through its gateway, nor through a
#   forward of its own made from PMIX_* variables the user gave a step
#   without a PMIx server (srun --mpi=none --export=PMIX_SERVER_URI4=...);
# - a guest that floods its own step's server with garbage over many
#   connections fails at most that step: the job's next MPI step works, no
#   node drains, nothing is left.
source "$(dirname "$0")/lib.sh"

wa="$(workdir)"
wb="$(workdir "$SVM_USER2")"
echo 7 >"$wa/input.txt"
guest_mpi_program "$wa"
# shellcheck disable=SC2016
cat >"$wa/a.sh" <<'JOB'
#!/bin/bash
# Step 1: two tasks hold the step's server while job B tries to reach it.
srun --mpi=pmix -n2 bash -c 'p=${PMIX_SERVER_URI4##*:}; [ "$SLURM_PROCID" = 0 ] && echo "$p" >port.txt; for i in $(seq 300); do [ -e attacked ] && break; sleep 1; done'
echo "hold step exit $?"
# Step 2: garbage at the step's own server, 20 connections of 4 MB each.
srun --mpi=pmix -n2 bash -c 'p=${PMIX_SERVER_URI4##*:}; for i in $(seq 20); do (head -c 4000000 /dev/urandom >/dev/tcp/127.0.0.1/$p) 2>/dev/null & done; wait; echo flooded'
echo "flood step exit $?"
# Step 3: a real MPI step after it.
srun --mpi=pmix -n2 ./allreduce
echo "allreduce exit $?"
JOB
# shellcheck disable=SC2016
cat >"$wb/b.sh" <<'JOB'
#!/bin/bash
for i in $(seq 600); do [ -s port.txt ] && break; sleep 1; done
p=$(cat port.txt)
try() { if timeout 10 bash -c "echo hello >/dev/tcp/$1/$p" 2>/dev/null; then echo "REACHED $1:$p"; else echo "refused $1:$p"; fi; }
try 127.0.0.1
gw=$(ip -4 route show default | awk '{print $3; exit}')
[ -n "$gw" ] && try "$gw"
echo "b done"
JOB
chmod 755 "$wa/a.sh" "$wb/b.sh"
chown -R "$SVM_USER:" "$wa"
chown -R "$SVM_USER2:" "$wb"

# shellcheck disable=SC2046
a="$(cd "$wa" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -n2 --mem=1500 $(vm_opts) a.sh)"
on_exit "scancel $a"
# shellcheck disable=SC2046
b="$(cd "$wb" && as_user "$SVM_USER2" sbatch --parsable -N1 -w node2 -n1 --mem=1500 $(vm_opts) b.sh)"
on_exit "scancel $b"
log "job A $a (node1), job B $b (node2)"
end=$(($(date +%s) + 600))
until [[ -s "$wa/port.txt" ]]; do
    (($(date +%s) < end)) || fail "job A's first step never published its port: $(cat "$wa/slurm-$a.out" 2>/dev/null)"
    sleep 1
done
port="$(cat "$wa/port.txt")"
[[ "$port" =~ ^[0-9]+$ ]] || fail "job A's port is '$port'"
fwd="$(pgrep -f -- "-R 127.0.0.1:$port:127.0.0.1:$port" || true)"
[[ "$(wc -w <<<"$fwd")" == 1 ]] || fail "expected one forward for 2 tasks on node1, found pids: $fwd"
[[ "$(ps -o user= -p "$fwd" | tr -d ' ')" == "$SVM_USER" ]] || fail "the forward does not run as the job's user"
# What the guest makes the session say once it is made (a refused channel, a
# failed connection, without end) goes to no file on the host's disk.
files="$(for f in /proc/"$fwd"/fd/*; do readlink "$f"; done | grep '^/' | grep -v '^/dev/null$' || true)"
[[ -z "$files" ]] || fail "the forward holds files open on the host: $files"
pass "one forward for the step's 2 tasks on node1, as the user, holding no file"

# Job B's user gives a step without a PMIx server job A's port in PMIX_*:
# refused, no forward.
wait_state "$b" RUNNING 300
rc=0
o="$(cd "$wb" && as_user "$SVM_USER2" srun --jobid="$b" --overlap -n1 --mpi=none \
    --export="ALL,PMIX_NAMESPACE=x,PMIX_SERVER_URI4=x;tcp4://127.0.0.1:$port,PMIX_SERVER_TMPDIR=$wb" \
    bash -c "if timeout 10 bash -c 'echo hello >/dev/tcp/127.0.0.1/$port'; then echo REACHED; fi" 2>&1)" || rc=$?
log "forged PMIx step: $(tr '\n' '|' <<<"$o")"
grep -q "REACHED" <<<"$o" && fail "job B's guest reached job A's PMIx server through a forward of forged PMIX_*"
grep -q "do not name its own PMIx server" <<<"$o" || fail "forged PMIX_* were not refused with their sentence"
[[ $rc -ne 0 ]] || fail "the step with forged PMIX_* exited 0"
pgrep -u "$SVM_USER2" -f "ExitOnForwardFailure=yes" >/dev/null && fail "job B has a forward"
pass "PMIX_* forged in a step without a PMIx server make no forward"

install -o "$SVM_USER2" -m 0644 "$wa/port.txt" "$wb/port.txt"
state="$(wait_job "$b" 900)"
log "job B: $(tr '\n' '|' <"$wb/slurm-$b.out")"
[[ "$state" == COMPLETED ]] || fail "job B ended $state"
grep -q "^b done$" "$wb/slurm-$b.out" || fail "job B did not run its tries"
grep -q "^REACHED" "$wb/slurm-$b.out" && fail "job B's guest reached job A's PMIx server"
grep -q "^refused 127.0.0.1:$port$" "$wb/slurm-$b.out" || fail "job B did not try its loopback"
pass "another user's guest cannot reach the step's PMIx server"

touch "$wa/attacked" && chown "$SVM_USER:" "$wa/attacked"
state="$(wait_job "$a" 900)"
out="$wa/slurm-$a.out"
log "job A: $(tr '\n' '|' <"$out")"
[[ "$state" == COMPLETED ]] || fail "job A ended $state"
grep -q "^hold step exit 0$" "$out" || fail "job A's first step failed"
grep -q "^flood step exit" "$out" || fail "job A's flood step never ended"
grep -q "^allreduce exit 0$" "$out" || fail "job A's MPI step after the flood failed"
for r in 0 1; do
    grep -q "^rank $r of 2 on node1-vm: sum 7$" "$out" || fail "rank $r of the step after the flood did not print sum 7"
done
wait_clean "$a" 120
wait_clean "$b" 120
pgrep -f -- "-R 127.0.0.1:$port:127.0.0.1:$port" >/dev/null && fail "job A's forward is left"
no_node_drained
pass "a guest that floods its step's PMIx server fails at most that step; the next MPI step works"
