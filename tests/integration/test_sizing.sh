#!/bin/bash
# The guest is sized from the allocation: two VM jobs sharing a node get
# disjoint CPUs (read back from the kernel: QEMU's vCPU thread affinity); too
# little memory is refused clearly; an image boots through its own bootloader.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho "vcpus=$(nproc) mem=$(awk "/MemTotal/ {print int(\\$2/1024)}" /proc/meminfo)"\nsleep 40\n' >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
ids=()
for _ in 1 2; do
    # shellcheck disable=SC2046
    ids+=("$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node3 -n1 --mem=1200 $(vm_opts) job.sh)")
done
log "submitted jobs ${ids[*]} on node3"
cpus=()
for id in "${ids[@]}"; do
    end=$(( $(date +%s) + 600 ))
    until grep -q vcpus= "$wd/slurm-$id.out" 2>/dev/null; do
        (( $(date +%s) < end )) || fail "job $id never ran in its guest: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
        case "$(job_field "$id" JobState)" in
            COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) fail "job $id ended before its guest ran: $(cat "$wd/slurm-$id.out" 2>/dev/null)" ;;
        esac
        sleep 1
    done
    qpid="$(pgrep -f "guest=slurm-vm-$id-node3" | head -n1)"
    set=""
    for t in /proc/"$qpid"/task/*; do
        [[ "$(cat "$t/comm")" == CPU* ]] || continue
        set+="$(awk '/Cpus_allowed_list/ {print $2}' "$t/status")"
    done
    [[ -n "$set" ]] || fail "no vCPU thread found in QEMU $qpid"
    slurm_cpus="$(cat /sys/fs/cgroup/cpuset/slurm_node3/uid_2001/job_"$id"/cpuset.cpus)"
    [[ "$set" == "$slurm_cpus" ]] || fail "job $id's vCPU is pinned to $set, Slurm gave it $slurm_cpus"
    grep -q "^vcpus=1 " "$wd/slurm-$id.out" || fail "job $id's guest does not have 1 vCPU: $(cat "$wd/slurm-$id.out")"
    cpus+=("$set")
    log "job $id: vCPU pinned to host CPU $set (Slurm's cpuset $slurm_cpus); $(grep vcpus= "$wd/slurm-$id.out")"
done
[[ "${cpus[0]}" != "${cpus[1]}" ]] || fail "two VM jobs on node3 share CPU ${cpus[0]}"
scancel "${ids[@]}"
for id in "${ids[@]}"; do wait_clean "$id" 60; done
pass "two VM jobs on one node: disjoint pinned CPUs matching their cpusets"

# Too little memory for a guest: a clear sentence, the job fails, the node stays.
# shellcheck disable=SC2046 # vm_opts: options, one a word
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=300 $(vm_opts) job.sh)"
[[ "$(wait_job "$id" 300)" == FAILED ]] || fail "job $id with 300 MiB did not fail"
grep -q "request at least .* MiB with --mem" "$wd/slurm-$id.out" || fail "no clear memory message: $(cat "$wd/slurm-$id.out")"
wait_clean "$id" 60
no_node_drained
pass "too little memory: '$(grep -m1 'slurm-vm' "$wd/slurm-$id.out")'"

# The image's own bootloader (no --vm-kernel).
printf '#!/bin/bash\necho "booted $(cat /proc/cmdline)"\n' >"$wd/boot.sh"; chown "$SVM_USER:" "$wd/boot.sh"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node2 --mem=1500 --vm-image="$VM_TEST_IMAGE" boot.sh)"
[[ "$(wait_job "$id" 900)" == COMPLETED ]] || fail "bootloader job $id failed: $(cat "$wd/slurm-$id.out")"
grep -q "^booted .*BOOT_IMAGE\|^booted .*root=" "$wd/slurm-$id.out" || fail "unexpected output: $(cat "$wd/slurm-$id.out")"
wait_clean "$id" 60
pass "an image booted through its own bootloader: $(head -c 120 "$wd/slurm-$id.out")"
