#!/bin/bash
# Attack (guest <-> host, user <-> root): the shares over virtio-fs. Root in
# the guest (the user's image has a set-user-ID-root shell) tries to create
# files as root on the share, give them away to root, make them set-user-ID,
# and the job's user and another user try, on the node, to inspect the
# share's virtiofsd (it maps the guest's memory) and to connect to its socket.
# All fail; what the guest's user writes is the user's on the host; the
# virtiofsd is gone with the job; nothing drains.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/attacker_image.sh"

wd="$(workdir)"
img="$(attacker_copy "$wd")" || fail "could not build the attacker's image"
cat >"$wd/job.sh" <<'SCRIPT'
#!/bin/sh
cd "$SLURM_SUBMIT_DIR" || exit 3
grep -q " $PWD virtiofs \| $(dirname "$PWD") virtiofs " /proc/mounts && echo "via virtiofs"
echo mine >by-user.txt
R=/usr/local/bin/rootsh
$R -c 'echo root >by-root.txt' 2>/dev/null && echo "ROOT-CREATED" || echo "root create refused"
$R -c 'chown 0:0 by-user.txt' 2>/dev/null && echo "ROOT-CHOWNED" || echo "chown refused"
cp /bin/sh sh-copy && $R -c 'chmod 4755 sh-copy' 2>/dev/null && echo "SETUID-MADE" || echo "setuid refused"
chmod 4755 sh-copy 2>/dev/null && echo "USER-SETUID-MADE" || echo "user setuid refused"
SCRIPT
id="$(held_vm_job "$wd" "the guest's attempts" -N1 -w node1 -t 8 --vm-image="$img")"
out="$wd/slurm-$id.out"
grep -q "^via virtiofs$" "$out" || fail "the submit directory is not a virtiofs mount in the guest: $(cat "$out")"
for bad in ROOT-CREATED ROOT-CHOWNED SETUID-MADE USER-SETUID-MADE; do
    grep -q "^$bad$" "$out" && fail "through the share, the guest: $bad ($(cat "$out"))"
done
[[ -e "$wd/by-root.txt" ]] && fail "root in the guest created a file on the host"
[[ "$(stat -c %U "$wd/by-user.txt")" == "$SVM_USER" ]] || fail "the guest user's file is not $SVM_USER's on the host"
[[ -u "$wd/sh-copy" || -g "$wd/sh-copy" ]] && fail "a set-user/group-ID file appeared on the host"

v="$(pgrep -f "^slurm-vm-virtiofsd:job=$id:share=0:" | head -n1)"
[[ -n "$v" ]] || fail "no virtiofsd for job $id"
[[ "$(stat -c %U /proc/"$v")" == "$SVM_USER" ]] || fail "virtiofsd does not run as $SVM_USER"
sock="$SVM_STATE_ROOT/node1/job_$id/share0.sock"
[[ -S "$sock" ]] || fail "no share socket at $sock"
u() { as_user "$SVM_USER" sh -c "$1" >/dev/null 2>&1; }
o() { as_user "$SVM_USER2" sh -c "$1" >/dev/null 2>&1; }
u "cat /proc/$v/environ" && fail "$SVM_USER read virtiofsd's environment (ptrace rights over it)"
u "head -c1 /proc/$v/mem" && fail "$SVM_USER read virtiofsd's memory"
u "ls -l /proc/$v/fd/ | grep -q memfd" && fail "$SVM_USER followed virtiofsd's descriptors (the guest's memory)"
u "socat -u OPEN:/dev/null UNIX-CONNECT:$sock" && fail "$SVM_USER connected to the share's socket"
o "socat -u OPEN:/dev/null UNIX-CONNECT:$sock" && fail "$SVM_USER2 connected to the share's socket"
o "cat /proc/$v/environ" && fail "$SVM_USER2 read virtiofsd's environment"

release_job "$id"
wait_ended "$id" COMPLETED 300 "$out"
wait_clean "$id" 120
no_node_drained
pass "root in the guest could not create, give away or make set-user-ID files over virtio-fs; the users could not inspect virtiofsd or reach its socket; nothing left"
