#!/bin/bash
# sacct after a VM job: the job's CPU time includes the guest's work (QEMU runs
# in the job's cgroup), and the VM record (image, digest, boot and readiness
# times, per node) is in the job's AdminComment as JSON.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/burn.sh" <<'JOB'
#!/bin/bash
# Burn ~12 s of guest CPU (TCG: every guest instruction is QEMU's CPU time).
end=$((SECONDS + 12)); while (( SECONDS < end )); do :; done
echo burned
JOB
chmod 755 "$wd/burn.sh"; chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node2 -n1 --mem=1500 $(vm_opts) burn.sh)"
log "submitted job $id"
wait_state "$id" RUNNING 300
# While it runs: the QEMU process is in the job's cgroups, under the job's limits.
end=$(( $(date +%s) + 300 ))
qpid=""
while [[ -z "$qpid" ]] && (( $(date +%s) < end )); do qpid="$(pgrep -f "guest=slurm-vm-$id-node2" | head -n1 || true)"; sleep 0.5; done
[[ -n "$qpid" ]] || fail "no QEMU process for job $id"
grep -q "memory:/slurm_node2/uid_2001/job_$id/step_extern" "/proc/$qpid/cgroup" \
    || fail "QEMU ($qpid) is not in the job's memory cgroup: $(cat /proc/$qpid/cgroup)"
grep -q "cpuset:/slurm_node2/uid_2001/job_$id/step_extern" "/proc/$qpid/cgroup" \
    || fail "QEMU is not in the job's cpuset cgroup"
# The freezer (how Slurm signals and kills a step) at the job's level: a
# signal to the extern step must not end the guest; the epilog does.
grep -qE "freezer:/slurm_node2/uid_2001/job_$id\$" "/proc/$qpid/cgroup" \
    || fail "QEMU is not in the job's own freezer cgroup: $(grep freezer "/proc/$qpid/cgroup")"
limit="$(cat "/sys/fs/cgroup/memory/slurm_node2/uid_2001/job_$id/memory.limit_in_bytes")"
[[ "$limit" == $((1500 * 1024 * 1024)) ]] || fail "the job's memory limit is $limit, expected 1500 MiB"
pass "QEMU $qpid runs in job $id's cgroups (memory limit $((limit >> 20)) MiB)"

[[ "$(wait_job "$id" 600)" == COMPLETED ]] || fail "job $id did not complete: $(cat "$wd/slurm-$id.out")"
grep -qx burned "$wd/slurm-$id.out" || fail "the guest did not run the burner"
# Accounting reaches slurmdbd asynchronously: wait (bounded) for the record.
end=$(( $(date +%s) + 120 )); cpu=""; comment=""
while (( $(date +%s) < end )); do
    cpu="$(sacct -n -j "$id" -o TotalCPU -P 2>/dev/null | head -n1)"  # the job line sums its steps
    comment="$(sacct -n -X -j "$id" -o AdminComment%4000 -P 2>/dev/null | head -n1)"
    [[ -n "$cpu" && "$comment" == *slurm_vm* ]] && break
    sleep 2
done
log "sacct TotalCPU=$cpu AdminComment=$comment"
secs="$(python3 - "$cpu" <<'PY'
import sys, re
t = sys.argv[1].strip()
d = 0
if '-' in t: d, t = t.split('-', 1); d = int(d)
parts = [float(x) for x in t.split(':')]
while len(parts) < 3: parts.insert(0, 0.0)
print(int(d * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]))
PY
)"
(( secs >= 8 )) || fail "sacct TotalCPU of job $id is $cpu: the guest's 12 s of work is not counted"
image_sha="sha256:$(sha256sum <"$VM_TEST_IMAGE" | cut -c1-64)"
python3 - "$comment" "$VM_TEST_IMAGE" "$image_sha" <<'PY' || fail "the VM record in AdminComment is incomplete (the image is $image_sha): $comment"
import json, sys
rec = json.loads(sys.argv[1])["slurm_vm"]
n = rec["nodes"]["node2"]
assert n["image"] == sys.argv[2], n
assert n["digest"] == sys.argv[3], n  # the content's, as sha256sum says
assert n["ready_ms"] > 0 and n["create_ms"] > 0 and n["ready_ms"] >= n["create_ms"], n
assert n["vcpus"] == 1 and n["memory_mib"] > 0, n
PY
pass "sacct: TotalCPU $cpu includes the guest; AdminComment holds the VM record"
