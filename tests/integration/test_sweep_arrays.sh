#!/bin/bash
# `slurm-vm sweep` while array and heterogeneous VM jobs run leaves them alone
# (issue 12): the state on a node is keyed by job id, which squeue's %i does
# not show for array tasks (340_5) or heterogeneous components (350+1). A
# 2-task VM array job and, where this Slurm takes them, a 2-component
# heterogeneous VM job are submitted; once every guest is up, sweep runs on
# every node; every guest (QEMU, keeper, job directory, ledger) must be the
# same afterwards, every task must then complete with its output, nothing may
# be left, and no node drained. A /dev/kvm ACL entry of a job group whose
# job Slurm does not have (left by a crash that lost the job's ledger) goes
# in the same sweep; the running jobs' entries stay.
# SVM_TEST_SWEEP_BIN runs another build's slurm-vm (to see this test fail).
source "$(dirname "$0")/lib.sh"

sweep_bin="${SVM_TEST_SWEEP_BIN:-$SVM_BUILD_DIR/admin/slurm-vm}"
conf="$SVM_CLUSTER_DIR/etc/slurm-vm.json"
wd="$(workdir)"
# The jobs wait for the test's go-ahead (a file in the shared working
# directory), so they still run whatever the guests' boot times.
cat >"$wd/job.sh" <<'EOF'
#!/bin/bash
echo "started job $SLURM_JOB_ID task ${SLURM_ARRAY_TASK_ID:-none} on $(hostname)"
for _ in $(seq 900); do
    if [[ -e go ]]; then echo "finished job $SLURM_JOB_ID"; exit 0; fi
    sleep 1
done
echo "no go-ahead within 900 s"
exit 3
EOF
chown -R "$SVM_USER:" "$wd"

submitted=()
stale_job=3999999 kvm=/dev/kvm
stale_gid=$(( $(cluster_setting job_gid_base $((0x70000000))) + stale_job ))
cleanup() {
    if ((${#submitted[@]})); then scancel "${submitted[@]}" 2>/dev/null || true; fi
    [[ ! -e $kvm ]] || setfacl -x "g:$stale_gid" "$kvm" 2>/dev/null || true
}
on_exit cleanup

# shellcheck disable=SC2046
base="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --array=0-1 -N1 --mem=1500 $(vm_opts) job.sh)"
submitted+=("$base")
log "submitted array job $base (tasks 0-1)"
# shellcheck disable=SC2046
if het_out="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 --mem=1500 $(vm_opts) \
        : -N1 --mem=1500 $(vm_opts) job.sh 2>&1)"; then
    leader="${het_out%%;*}"
    leader="${leader%%+*}"
    submitted+=("$leader")
    log "submitted heterogeneous job $leader (2 components)"
else
    [[ "$het_out" != *slurm-vm* ]] || fail "the heterogeneous VM job was refused by slurm-vm: $het_out"
    leader=""
    log "this Slurm takes no heterogeneous job ($het_out): arrays only"
fi

# records JOB: "JOBID NODE KEY" for each of JOB's records once all run
# (KEY: the array task index or the heterogeneous offset).
records() {
    scontrol show job -o "$1" 2>/dev/null | python3 -c '
import sys
for line in sys.stdin:
    f = dict(w.split("=", 1) for w in line.split() if "=" in w)
    key = f.get("ArrayTaskId", f.get("HetJobOffset", "-"))
    print(f["JobId"], f.get("NodeList", ""), key, f["JobState"])'
}
# All records of JOB running with a node, WANT of them; prints "JOBID NODE KEY".
wait_records() {
    local job="$1" want="$2" end=$(( $(date +%s) + 600 )) r
    while (( $(date +%s) < end )); do
        r="$(records "$job")"
        if [[ "$(awk '$4 == "RUNNING" && $2 != "" && $2 != "(null)"' <<<"$r" | wc -l)" == "$want" \
              && "$(wc -l <<<"$r")" == "$want" ]]; then
            awk '{print $1, $2, $3}' <<<"$r"
            return 0
        fi
        if grep -qE 'FAILED|CANCELLED|TIMEOUT|NODE_FAIL|COMPLETED' <<<"$r"; then fail "job $job ended early: $r"; fi
        sleep 1
    done
    fail "job $job: not $want running records after 600 s: $(records "$job")"
}

# field JOBID NAME: NAME of exactly that job record (`scontrol show job` of an
# array's base id or a heterogeneous leader lists the other records too).
field() { scontrol show job -o "$1" 2>/dev/null | grep "^JobId=$1 " | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1; }

jobs=()   # "JOBID NODE OUTFILE" (OUTFILE: where its script's output goes, or - )
recs="$(wait_records "$base" 2)"
while read -r id node idx; do
    [[ "$idx" =~ ^[0-9]+$ ]] || fail "array job $base: record $id has task index '$idx'"
    jobs+=("$id $node $wd/slurm-${base}_$idx.out")
done <<<"$recs"
if [[ -n "$leader" ]]; then
    recs="$(wait_records "$leader" 2)"
    while read -r id node off; do
        if [[ "$off" == 0 ]]; then jobs+=("$id $node $wd/slurm-$leader.out"); else jobs+=("$id $node -"); fi
    done <<<"$recs"
fi
(( ${#jobs[@]} == (${leader:+2}+2) )) || fail "expected $(( ${leader:+2}+2 )) job records, got: ${jobs[*]}"
log "running: ${jobs[*]}"

# guest JOBID NODE: one line describing the job's guest on NODE (QEMU and
# keeper pids, guest state, job dir entries, ledger), or fails.
guest() {
    local id="$1" node="$2" d="$SVM_STATE_ROOT/$2/job_$1" qpid kpid
    [[ -d "$d" ]] || { echo "no job dir $d"; return 1; }
    [[ -e "$SVM_STATE_ROOT/$node/ledger/job_$id.json" ]] || { echo "no ledger of job $id on $node"; return 1; }
    qpid="$(pgrep -f "guest=slurm-vm-$id-$node( |,|$)" | head -n1)"
    [[ -n "$qpid" ]] || { echo "no QEMU of job $id on $node"; return 1; }
    kpid="$(cat "$d/keeper.pid" 2>/dev/null)"
    if [[ -z "$kpid" ]] || ! grep -q slurm-vm-keeper "/proc/$kpid/cmdline" 2>/dev/null; then
        echo "no keeper of job $id on $node (pid '$kpid')"
        return 1
    fi
    echo "qemu=$qpid keeper=$kpid state=$(cat "$d/state" 2>/dev/null) files=$(find "$d" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ,)"
}

# Every guest up and settled: the script started (its output), and every
# guest ready (the batch script, through the guest's agent, may start
# before its guest's readiness: the state then goes from "login" to
# "ready" by itself, and guest.json comes, while the sweep runs).
for j in "${jobs[@]}"; do
    read -r id node out <<<"$j"
    [[ "$out" == - ]] || wait_output "$out" "^started job $id " "job $id in its guest" 600
    end=$(( $(date +%s) + 600 ))
    until [[ "$(cat "$SVM_STATE_ROOT/$node/job_$id/state" 2>/dev/null)" == ready ]]; do
        (( $(date +%s) < end )) || fail "the guest of job $id on $node not ready after 600 s"
        sleep 1
    done
done
declare -A before
for j in "${jobs[@]}"; do
    read -r id node _ <<<"$j"
    before[$id]="$(guest "$id" "$node")" || fail "before the sweep: ${before[$id]}"
done
log "every guest up: $(for j in "${jobs[@]}"; do read -r id _ <<<"$j"; printf '[%s: %s] ' "$id" "${before[$id]}"; done)"

if [[ -e $kvm ]]; then
    setfacl -m "g:$stale_gid:rw" "$kvm" || fail "cannot plant a stale entry on $kvm"
fi
# The sweep an admin's cron runs: every node, for real.
sweep_out="$("$sweep_bin" sweep --config "$conf" 2>&1)" || fail "sweep failed while the jobs ran: $sweep_out"
log "sweep said: ${sweep_out:-(nothing)}"
for j in "${jobs[@]}"; do
    read -r id node _ <<<"$j"
    ! grep -qE "job $id( |:)" <<<"$sweep_out" || fail "sweep acted on running job $id: $sweep_out"
done
sleep 3
for j in "${jobs[@]}"; do
    read -r id node _ <<<"$j"
    now="$(guest "$id" "$node")" || fail "after the sweep, job $id ($node): $now (sweep said: $sweep_out)"
    [[ "$now" == "${before[$id]}" ]] || fail "after the sweep, job $id's guest changed: '${before[$id]}' -> '$now'"
done
if [[ -e $kvm ]]; then
    acl="$(getfacl -n "$kvm" 2>/dev/null)"
    ! grep -q "^group:$stale_gid:" <<<"$acl" || fail "sweep left the entry of job $stale_job on $kvm: $acl"
    grep -q "$kvm: entry of ended job $stale_job removed" <<<"$sweep_out" || fail "sweep did not say it removed job $stale_job's entry: $sweep_out"
    for j in "${jobs[@]}"; do
        read -r id _ <<<"$j"
        grep -q "^group:$(( stale_gid - stale_job + id )):rw" <<<"$acl" || fail "sweep took running job $id's entry off $kvm: $acl"
    done
    pass "sweep removed the $kvm entry of job $stale_job (not in Slurm) and kept the running jobs' entries"
fi
pass "sweep during the array job $base${leader:+ and the heterogeneous job $leader} left every guest as it was"

touch "$wd/go"
chown "$SVM_USER:" "$wd/go"
for j in "${jobs[@]}"; do
    read -r id node out <<<"$j"
    end=$(( $(date +%s) + 300 ))
    while state="$(field "$id" JobState)"; [[ "$state" =~ ^(PENDING|RUNNING|CONFIGURING|COMPLETING|)$ ]]; do
        (( $(date +%s) < end )) || fail "job $id still $state 300 s after its go-ahead"
        sleep 1
    done
    exit_code="$(field "$id" ExitCode)"
    [[ "$state $exit_code" == "COMPLETED 0:0" ]] \
        || fail "job $id ended $state $exit_code: $(cat "$out" 2>/dev/null)"
    if [[ "$out" != - ]]; then
        grep -q "^finished job $id$" "$out" || fail "job $id's output lacks its end: $(cat "$out")"
    fi
done
for j in "${jobs[@]}"; do
    read -r id _ <<<"$j"
    wait_clean "$id" 120
done
submitted=()
no_node_drained
pass "every task and component completed with its output (${jobs[*]}), nothing left, no drain"
