#!/bin/bash
# Two 2-node VM jobs at once on the shared bridge: each job's guests reach
# each other, and no guest of the other job (the per-job nftables filter on
# the guests' taps). The filter is gone with the job.
source "$(dirname "$0")/lib.sh"

prefix_ip() { # job node_index -> the guest's address (lib/guest_net.hpp)
    echo "10.213.$(( $1 % 254 + 1 )).$(( $2 + 10 ))"
}

# The batch script runs in the guest of the job's first node: it waits until
# its job's second guest answers on port 22 (it may still be booting), says
# so through the shared directory, and once the test has written `targets`
# (the other job's guests, all four now known to be up) tries each of them.
script='#!/bin/bash
try() { timeout 5 bash -c "exec 3<>/dev/tcp/$1/22" 2>/dev/null; }
peer="$(cat peer)"
for i in $(seq 1 180); do try "$peer" && break; sleep 1; done
try "$peer" && echo "reach $peer yes" || echo "reach $peer no"
touch ready
while [ ! -e go ]; do sleep 1; done
for t in $(cat targets); do try "$t" && echo "reach $t yes" || echo "reach $t no"; done
echo done'

declare -A wd id
for j in a b; do
    wd[$j]="$(workdir)"
    printf '%s\n' "$script" >"${wd[$j]}/job.sh"
    chown -R "$SVM_USER:" "${wd[$j]}"
done
# Both jobs on node1+node2 (1 CPU each per node), so their guests share the host's bridge.
for j in a b; do
    # shellcheck disable=SC2046
    id[$j]="$(cd "${wd[$j]}" && as_user "$SVM_USER" sbatch --parsable -N2 -n2 -w node1,node2 --mem=1200 -t 10 \
        $(vm_opts) job.sh)"
done
log "jobs ${id[a]} and ${id[b]} submitted"
prefix_ip "${id[a]}" 1 >"${wd[a]}/peer"
prefix_ip "${id[b]}" 1 >"${wd[b]}/peer"
chown "$SVM_USER:" "${wd[a]}/peer" "${wd[b]}/peer"
end=$(( $(date +%s) + 600 ))
for j in a b; do
    until [[ -e "${wd[$j]}/ready" ]]; do
        (( $(date +%s) < end )) || fail "job ${id[$j]} never got ready: $(cat "${wd[$j]}/slurm-${id[$j]}.out" 2>/dev/null)"
        st="$(job_field "${id[$j]}" JobState)"
        case "$st" in PENDING|RUNNING|CONFIGURING) ;; *) fail "job ${id[$j]} ended $st: $(cat "${wd[$j]}/slurm-${id[$j]}.out" 2>/dev/null)" ;; esac
        sleep 1
    done
done
for j in a b; do
    ip netns exec slurmvm nft list table bridge "svm_job_${id[$j]}" >/dev/null 2>&1 ||
        fail "no network filter (nft table bridge svm_job_${id[$j]}) while job ${id[$j]} runs"
done
log "all four guests up; filters installed"
echo "$(prefix_ip "${id[b]}" 0) $(prefix_ip "${id[b]}" 1)" >"${wd[a]}/targets"
echo "$(prefix_ip "${id[a]}" 0) $(prefix_ip "${id[a]}" 1)" >"${wd[b]}/targets"
for j in a b; do
    chown "$SVM_USER:" "${wd[$j]}/targets"
    touch "${wd[$j]}/go"
done
for j in a b; do
    st="$(wait_job "${id[$j]}" 300)"
    out="$(cat "${wd[$j]}/slurm-${id[$j]}.out")"
    [[ "$st" == COMPLETED ]] || fail "job ${id[$j]} ended $st: $out"
    grep -q "^reach $(cat "${wd[$j]}/peer") yes" <<<"$out" ||
        fail "job ${id[$j]}: its own second guest was not reachable: $out"
    for t in $(cat "${wd[$j]}/targets"); do
        grep -q "^reach $t no" <<<"$out" || fail "job ${id[$j]} reached $t, a guest of the other job: $out"
    done
done
for j in a b; do
    wait_clean "${id[$j]}" 60
    if ip netns exec slurmvm nft list table bridge "svm_job_${id[$j]}" >/dev/null 2>&1; then
        fail "the network filter of job ${id[$j]} outlived the job"
    fi
done
no_node_drained
pass "jobs ${id[a]} and ${id[b]}: each reached its own guests and not the other's; filters removed"
