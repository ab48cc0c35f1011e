#!/bin/bash
# Attack (issue: one job's user must never reach another job or root): a user
# whose image has a set-user-ID-root shell is root in their guest and tries
# to make, in their shared home, a set-group-ID copy of a shell owned by the
# group of their guest's QEMU, then to use it on the host. That group used to
# be "kvm", shared by every job's QEMU: the file then read another user's
# running job's private keys. Now each job's QEMU has a group of its own
# (job_gid_base + job id) and cannot make any file setuid or setgid; the
# attack must fail, the other job's keys and the job's libvirt tree must stay
# out of reach, and no node may drain.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/attacker_image.sh"

wd="$(workdir)"
img="$(attacker_copy "$wd")" || fail "could not build the attacker's image"
kvm_gid="$(getent group kvm | cut -d: -f3)"
base=$((0x70000000))

# The victim: another user's job, running on node2 while the attack goes on.
vwd="$(workdir "$SVM_USER2")"
printf '#!/bin/sh\nsleep 240\n' >"$vwd/v.sh"
chmod 755 "$vwd/v.sh"
chown -R "$SVM_USER2:" "$vwd"
# shellcheck disable=SC2046
victim="$(cd "$vwd" && as_user "$SVM_USER2" sbatch --parsable -N1 -w node2 -t 6 $(vm_opts) v.sh)"
cleanup() { scancel "$victim" "${id:-0}" 2>/dev/null || true; }
on_exit cleanup

cat >"$wd/attack.sh" <<SCRIPT
#!/bin/sh
F=\$HOME/svm-gid-shell.\$SLURM_JOB_ID
G=\$(( $base + SLURM_JOB_ID ))
cp /usr/local/bin/rootsh \$F
/usr/local/bin/rootsh -c "id -u" | sed 's/^/root-in-guest uid=/'
/usr/local/bin/rootsh -c "chgrp \$G \$F && chmod 2755 \$F" 2>&1 && echo "SETGID-JOBGROUP-DONE" || echo "setgid job group refused"
/usr/local/bin/rootsh -c "chgrp $kvm_gid \$F" 2>&1 && echo "CHGRP-KVM-DONE" || echo "chgrp kvm refused"
/usr/local/bin/rootsh -c "chmod 4755 \$F" 2>&1 && echo "SETUID-DONE" || echo "setuid refused"
ls -ln \$F
echo attack-done
# Stay up while the host side is tried.
i=0; while [ ! -e \$HOME/svm-attack-over.\$SLURM_JOB_ID ] && [ \$i -lt 240 ]; do sleep 1; i=\$((i+1)); done
SCRIPT
chmod 755 "$wd/attack.sh"
chown -R "$SVM_USER:" "$wd"
wait_state "$victim" RUNNING 300
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -t 6 --vm-image="$img" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" attack.sh)"
log "attacker job $id (image with a setuid-root shell), victim job $victim of $SVM_USER2"
out="$wd/slurm-$id.out"
wait_output "$out" "^attack-done" "the attack script" 600
log "in the guest: $(tr '\n' '|' <"$out")"
grep -q "^root-in-guest uid=0" "$out" || fail "the attacker was not root in the guest: the attack did not really run"
f="/home/$SVM_USER/svm-gid-shell.$id"
[[ -e "$f" ]] || fail "the attack's file $f is missing"
grep -q "SETGID-JOBGROUP-DONE\|SETUID-DONE" "$out" && fail "root in the guest made $f setuid/setgid: $(stat -c '%A %U:%G' "$f")"
perm="$(stat -c '%A' "$f")"
[[ "$perm" != *s* && "$perm" != *S* ]] || fail "$f is $perm on the host"
grep -q "CHGRP-KVM-DONE" "$out" && fail "root in the guest gave $f to the kvm group"
[[ "$(stat -c '%g' "$f")" != "$kvm_gid" ]] || fail "$f belongs to the kvm group"

# On the host, as the user, with whatever the file gives: the victim's keys,
# its overlay, and the attacker's own job's libvirt tree stay out of reach.
vdir="$SVM_STATE_ROOT/node2/job_$victim"
vovl="/var/lib/slurm-vm/node2/overlays/job_$victim/overlay.qcow2"
[[ -e "$vdir/seed.iso" && -e "$vovl" ]] || fail "the victim's seed or overlay is not where expected ($vdir, $vovl)"
if as_user "$SVM_USER" "$f" -c "cat '$vdir/seed.iso' >/dev/null" 2>/dev/null; then
    fail "$SVM_USER read job $victim's seed.iso (its private keys) through $f"
fi
if as_user "$SVM_USER" "$f" -c "test -w '$vovl' || test -r '$vovl'" 2>/dev/null; then
    fail "$SVM_USER could write job $victim's overlay"
fi
if as_user "$SVM_USER" "$f" -c "ls '$SVM_STATE_ROOT/node1/job_$id/libvirt/lib'" >/dev/null 2>&1; then
    fail "$SVM_USER reached into the job's libvirt tree (root's) through $f"
fi
as_user "$SVM_USER" sh -c "cat '$SVM_STATE_ROOT/node1/job_$id/seed.iso'" >/dev/null 2>&1 &&
    fail "$SVM_USER read the own job's seed (the guest's host key) directly"
# The other job's QEMU has a group of its own, different from the attacker's.
vq="$(pgrep -f "guest=slurm-vm-$victim-node2" | head -n1)"
aq="$(pgrep -f "guest=slurm-vm-$id-node1" | head -n1)"
[[ -n "$vq" && -n "$aq" ]] || fail "the guests' QEMU processes are not both running"
vg="$(awk '/^Gid:/ {print $2}' "/proc/$vq/status")"; ag="$(awk '/^Gid:/ {print $2}' "/proc/$aq/status")"
[[ "$vg" == $((base + victim)) && "$ag" == $((base + id)) ]] ||
    fail "QEMU groups are $vg (job $victim) and $ag (job $id), expected each job's own"
grep -q "^Seccomp:[[:space:]]*2" "/proc/$aq/status" || fail "the attacker's QEMU runs without a seccomp filter"

touch "/home/$SVM_USER/svm-attack-over.$id"
st="$(wait_job "$id" 300)"
[[ "$st" == COMPLETED ]] || fail "the attacker's job ended $st"
scancel "$victim"
wait_job "$victim" 120 >/dev/null
rm -f "$f" "/home/$SVM_USER/svm-attack-over.$id"
wait_clean "$id" 120
wait_clean "$victim" 120
no_node_drained
pass "root in the guest could not make a setgid/setuid file; another job's keys, overlay and root's libvirt tree stayed out of reach"
