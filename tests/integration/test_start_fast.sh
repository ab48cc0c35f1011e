#!/bin/bash
# Guest creation does not depend on how the node set up /dev/kvm, and a stale
# QEMU capabilities cache costs one probe on the node, not one per guest.
# On a fresh machine /dev/kvm may be 0600 root:root (no udev): libvirt then
# took the cached capabilities (probed with KVM) as stale on every creation
# and probed QEMU again, about 60 s per guest. Each job's guest now gets the
# device through an ACL entry for the job's own group, taken back afterwards.
source "$(dirname "$0")/lib.sh"

kvm=/dev/kvm
[[ -e $kvm ]] || { log "SKIP: no $kvm on this machine"; exit 77; }
# The jobs of earlier tests end first: while an entry of theirs is on the
# device, chmod below would set only the ACL's mask, and their epilogs would
# then bring back the group bits the device had before (seen with Slurm
# 24.11, whose epilogs of test_srun's jobs ran into this test).
for ((i = 0; i < 120; i++)); do
    [[ -z "$(squeue -h 2>/dev/null)" ]] && break
    sleep 1
done
[[ -z "$(squeue -h)" ]] || fail "jobs of earlier tests still in the queue after 120 s: $(squeue -h)"
# Entries of earlier jobs (ended: none runs now) would keep the group bits
# this test checks: a leak of an earlier run, which `slurm-vm sweep` removes.
base_gid=$(cluster_setting job_gid_base $((0x70000000)))
for g in $(getfacl -n "$kvm" 2>/dev/null | sed -n 's/^group:\([0-9]*\):.*/\1/p'); do
    (( g >= base_gid )) &&
        fail "$kvm holds the entry of ended job $(( g - base_gid )) (group $g), left by an earlier run: run slurm-vm sweep"
done
saved="$(stat -c '%u:%g %a' "$kvm")"
# QEMU "changed" (an upgrade): every node's cached capabilities are stale.
# libvirt takes its modules directory's time as part of QEMU (so does a
# package upgrade), and unlike the binary's ctime it can be set back: the
# nodes' caches are kept aside and put back afterwards, valid again, so the
# tests that follow do not pay a probe per node and CPU for this one.
moddir=/usr/lib/x86_64-linux-gnu/qemu
[[ -d $moddir ]] || fail "no $moddir (QEMU's modules directory, whose time libvirt checks) on this machine"
moddir_mtime="$(stat -c %Y "$moddir")"
caps_saved="$(mktemp -d)"
state_pattern="$(cluster_setting state_dir /run/slurm-vm/%n)"
caps_dir() { echo "${state_pattern//%n/$1}/libvirt-caps"; }  # NODE's capabilities caches
nodes="$(sinfo -h -N -o %N | sort -u)"
for n in $nodes; do
    if [[ -d $(caps_dir "$n") ]]; then cp -a "$(caps_dir "$n")" "$caps_saved/$n"; fi
done
restore() {
    chown "${saved% *}" "$kvm"
    chmod "${saved#* }" "$kvm"
    touch -m -d "@$moddir_mtime" "$moddir"
    for n in $nodes; do
        rm -rf "$(caps_dir "$n")"  # a node without caches before has none after
        if [[ -d $caps_saved/$n ]]; then cp -a "$caps_saved/$n" "$(caps_dir "$n")"; fi
    done
    rm -rf "$caps_saved"
}
on_exit restore
chown root:root "$kvm" && chmod 0600 "$kvm"     # a fresh machine's /dev/kvm

log_dir="$(cluster_setting log_dir /var/log/slurm-vm)"
wd="$(workdir)"
printf '#!/bin/sh\necho ran in $(hostname)\n' >"$wd/job.sh"
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"

run_job() { # prints the job id once it ended COMPLETED
    local id state
    # shellcheck disable=SC2046
    id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -n1 --mem=1500 $(vm_opts) job.sh)"
    state="$(wait_job "$id" 600)"
    [[ "$state" == COMPLETED ]] || fail "job $id ended $state: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
    grep -qx "ran in node1-vm" "$wd/slurm-$id.out" || fail "job $id did not run in its guest"
    echo "$id"
}
created_ms() { sed -n 's/.*guest slurm-vm-[0-9]*-node1 created in \([0-9]*\) ms.*/\1/p' "$log_dir/node1/job_$1.log"; }

# A node that never started a guest has no capabilities cache to go stale
# (the first job's prolog would probe QEMU as it is now): one job makes it.
if [[ ! -d "$(caps_dir node1)/cache/qemu/capabilities" ]]; then
    w="$(run_job)"
    log "job $w: node1's first guest made its capabilities cache"
fi
touch -m "$moddir"  # now: a time no cache of an earlier run can hold
[[ "$(stat -c %Y "$moddir")" != "$moddir_mtime" ]] || { sleep 1; touch -m "$moddir"; }

a="$(run_job)"
grep -q "libvirt probed QEMU's capabilities again" "$log_dir/node1/job_$a.log" ||
    fail "job $a: QEMU's change went unnoticed (no probe reported in $log_dir/node1/job_$a.log)"
log "job $a: stale cache noticed and refreshed (created in $(created_ms "$a") ms)"

b="$(run_job)"
ms="$(created_ms "$b")"
[[ -n "$ms" ]] || fail "job $b: no creation time in its log"
if grep -q "probed QEMU's capabilities" "$log_dir/node1/job_$b.log"; then
    fail "job $b: libvirt probed QEMU again: $(grep probed "$log_dir/node1/job_$b.log")"
fi
(( ms < 5000 )) || fail "job $b: guest created in $ms ms with $kvm 0600 root:root"
log "job $b: created in $ms ms, no probe, with $kvm $(stat -c '%a %U:%G' "$kvm")"

# The jobs' ACL entries went with them, and the site's own bits for the
# device are as they were (other jobs running now may hold entries of theirs).
wait_clean "$b" 60
acl="$(getfacl -n "$kvm" 2>/dev/null)" || fail "getfacl $kvm failed"
for j in "$a" "$b"; do
    grep -q "^group:$((0x70000000 + j)):" <<<"$acl" && fail "job $j's entry is still on $kvm: $acl"
done
grep -qx "user::rw-" <<<"$acl" && grep -qx "group::---" <<<"$acl" && grep -qx "other::---" <<<"$acl" ||
    fail "$kvm's own bits changed: $acl"
[[ "$(stat -c '%U:%G' "$kvm")" == "root:root" ]] || fail "$kvm now belongs to $(stat -c '%U:%G' "$kvm")"
no_node_drained
pass "guests start without probing QEMU whatever /dev/kvm's mode; a stale cache costs one probe"
