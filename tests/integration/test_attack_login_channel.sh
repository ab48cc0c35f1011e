#!/bin/bash
# Attack (user <-> root, job <-> job): the guest's serial channel of the
# job's first login (seed_first_login_script, lib/guest/seed.hpp). Its socket
# is root's: the keeper hands it to one client of the job's SSH socket. Another
# user tries to connect to either socket of the job, the job's own user to
# the channel's socket directly (around the keeper), and both try to take a
# second session over the channel once the first has used it. All fail; the
# batch script ran over the channel (the keeper says so) while the guest was
# still setting itself up; the job completes; nothing is left; nothing drains.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/job.sh" <<'SCRIPT'
#!/bin/sh
echo "script started, guest set up: $(test -e /run/slurm-vm/ready && echo yes || echo no)"
echo "probe ready"
i=0; while [ ! -e "$HOME/svm-login-over.$SLURM_JOB_ID" ] && [ $i -lt 300 ]; do sleep 1; i=$((i+1)); done
SCRIPT
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -t 8 --vm-image="$VM_TEST_IMAGE" \
    --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh)"
on_exit 'scancel "$id" 2>/dev/null || true; rm -f "/home/$SVM_USER/svm-login-over.$id"'
log "job $id"
out="$wd/slurm-$id.out"
wait_output "$out" "^probe ready" "the batch script" 600
grep -q "^script started, guest set up: yes$" "$out" || fail "the script ran before the guest was set up: $(cat "$out")"
jlog="$(cluster_setting log_dir /var/log/slurm-vm)/node1/job_$id.log"
grep -q "the guest takes the job's first login in" "$jlog" || fail "the guest never offered its first login: $jlog"
grep -q "the job's first login goes over the guest's serial channel" "$jlog" ||
    fail "the batch script's login did not go over the serial channel: $jlog"

dir="$SVM_STATE_ROOT/node1/job_$id"
ch="$dir/login.sock"
[[ -S "$ch" ]] || fail "no login channel socket at $ch"
[[ "$(stat -c %U "$ch")" == root ]] || fail "the channel's socket is $(stat -c %U "$ch")'s, not root's"
u() { as_user "$SVM_USER" sh -c "$1" >/dev/null 2>&1; }
o() { as_user "$SVM_USER2" sh -c "$1" >/dev/null 2>&1; }
u "socat -u OPEN:/dev/null UNIX-CONNECT:$ch" && fail "$SVM_USER connected to the login channel directly"
o "socat -u OPEN:/dev/null UNIX-CONNECT:$ch" && fail "$SVM_USER2 connected to the login channel"
o "socat -u OPEN:/dev/null UNIX-CONNECT:$dir/ssh.sock" && fail "$SVM_USER2 connected to the job's SSH socket"
# The channel served one session: a second login by the job's user goes over
# TCP (the guest's sshd answers with its SSH banner), never to the used channel.
banner="$(as_user "$SVM_USER" timeout 20 socat -T 15 - UNIX-CONNECT:"$dir/ssh.sock" </dev/null 2>/dev/null | head -c 8)"
[[ "$banner" == SSH-2.0- ]] || fail "a second connection of the job's user got no SSH banner (\"$banner\")"
[[ "$(grep -c "the job's first login goes over the guest's serial channel" "$jlog")" == 1 ]] ||
    fail "the serial channel was handed out more than once: $jlog"

touch "/home/$SVM_USER/svm-login-over.$id"
st="$(wait_job "$id" 300)"
[[ "$st" == COMPLETED ]] || fail "job $id ended $st: $(cat "$out")"
wait_clean "$id" 120
no_node_drained
pass "the first login went over the guest's serial channel, once; no other user reached the job's sockets, and the job's user not the channel's; nothing left"
