#!/bin/bash
# Attack (user <-> root, job <-> job): the guest agent's serial channels
# (seed_agent_script, lib/guest/seed.hpp; lib/guest/guest_agent.hpp). Their
# sockets are root's: the keeper hands them to one client of the job's agent
# socket (the batch step's slurm-vm-exec). Another user tries to connect to
# any socket of the job, the job's own user to the channels' sockets directly
# (around the keeper), and both try to take the agent a second time once the
# batch step has it. All fail; the batch script ran through the agent (the
# keeper says so) once the guest was set up, with the limits of a PAM
# session like an SSH login's, in a session of its own, with a login's
# environment; the job completes; nothing is left; nothing drains.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/job.sh" <<'SCRIPT'
#!/bin/sh
echo "script started, guest set up: $(test -e /run/slurm-vm/ready && echo yes || echo no)"
echo "agent memlock: $(ulimit -l)"
read -r pid _ _ _ _ sid _ </proc/$$/stat
echo "session leader: $([ "$pid" = "$sid" ] && echo yes || echo "no ($pid in $sid)")"
echo "environment: $(env | sed -n 's/=.*//p' | sort | tr '\n' ' ')"
echo "shell: $SHELL, login shell: $(getent passwd "$(id -un)" | cut -d: -f7)"
ml=""; i=0
while [ -z "$ml" ] && [ $i -lt 60 ]; do  # the guest's sshd starts after the script may
    ml="$(ssh -o BatchMode=yes "$(hostname)" 'ulimit -l' 2>/dev/null)"; i=$((i+1)); [ -n "$ml" ] || sleep 1
done
echo "ssh memlock: $ml"
SCRIPT
id="$(held_vm_job "$wd" "the batch script" -N1 -w node1 -t 8)"
out="$wd/slurm-$id.out"
grep -q "^script started, guest set up: yes$" "$out" || fail "the script ran before the guest was set up: $(cat "$out")"
jlog="$(cluster_setting log_dir /var/log/slurm-vm)/node1/job_$id.log"
grep -q "the guest's agent takes the job's first command in" "$jlog" || fail "the guest never offered its agent: $jlog"
grep -q "the job's first command takes the guest agent's serial channels" "$jlog" ||
    fail "the batch script did not go through the guest's agent: $jlog"
# The agent's command gets the limits PAM gives a login (pam_limits: the
# test image's limits.d sets memlock unlimited, as sites do for RDMA; the
# kernel's default is 8192 KiB): the same as an SSH login in the guest.
agent_ml="$(sed -n 's/^agent memlock: //p' "$out")"
ssh_ml="$(sed -n 's/^ssh memlock: //p' "$out")"
[[ "$agent_ml" == unlimited && "$ssh_ml" == unlimited ]] ||
    fail "the agent's command has memlock '$agent_ml', an SSH login in the guest '$ssh_ml' (both should be unlimited)"

# In a session of its own (signals reach its group), with a login's
# variables and the job's, nothing of the guest's init or cloud-init.
grep -q "^session leader: yes$" "$out" || fail "the batch script does not lead its session: $(grep '^session' "$out")"
env_names="$(sed -n 's/^environment: //p' "$out")"
for v in HOME LOGNAME PATH SHELL USER SLURM_JOB_ID; do
    [[ " $env_names " == *" $v "* ]] || fail "the batch script lacks $v: $env_names"
done
other="$(tr ' ' '\n' <<<"$env_names" | grep -vxE '(HOME|LOGNAME|PATH|SHELL|USER|PWD|OLDPWD|SHLVL|_|LANG|LC_ALL|TZ|OMP_NUM_THREADS|(SLURM|SLURMD|OMPI|HYDRA)_[A-Za-z0-9_]*)?' || true)"
[[ -z "$other" ]] || fail "the batch script got variables from the guest's own start: $other"
# SHELL is the user's login shell, though the agent's command runs in /bin/sh.
shells="$(sed -n 's/^shell: //p' "$out")"
[[ "$shells" == "/bin/bash, login shell: /bin/bash" ]] || fail "the batch script's SHELL is not the user's login shell: $shells"

dir="$SVM_STATE_ROOT/node1/job_$id"
u() { as_user "$SVM_USER" sh -c "$1" >/dev/null 2>&1; }
o() { as_user "$SVM_USER2" sh -c "$1" >/dev/null 2>&1; }
for ch in agent agent-out agent-err; do
    s="$dir/$ch.sock"
    [[ -S "$s" ]] || fail "no agent channel socket at $s"
    [[ "$(stat -c %U "$s")" == root ]] || fail "the channel's socket $s is $(stat -c %U "$s")'s, not root's"
    u "socat -u OPEN:/dev/null UNIX-CONNECT:$s" && fail "$SVM_USER connected to the agent's channel $s directly"
    o "socat -u OPEN:/dev/null UNIX-CONNECT:$s" && fail "$SVM_USER2 connected to the agent's channel $s"
done
o "socat -u OPEN:/dev/null UNIX-CONNECT:$dir/agent-take.sock" && fail "$SVM_USER2 connected to the job's agent socket"
o "socat -u OPEN:/dev/null UNIX-CONNECT:$dir/ssh.sock" && fail "$SVM_USER2 connected to the job's SSH socket"
# The agent served the batch step: a second take by the job's user gets "0"
# and no channel; a second session goes over TCP (the guest's sshd answers).
# socat's stdin is empty: -t keeps it waiting for the answer after that
# end (0.5 s by default: less than an emulated guest's sshd may take to
# send its banner on a busy machine).
again="$(as_user "$SVM_USER" timeout 20 socat -t 5 -T 5 - UNIX-CONNECT:"$dir/agent-take.sock" </dev/null 2>/dev/null)"
[[ "$again" == 0 ]] || fail "a second take of the agent by the job's user got \"$again\", not 0"
banner="$(as_user "$SVM_USER" timeout 20 socat -t 15 -T 15 - UNIX-CONNECT:"$dir/ssh.sock" </dev/null 2>/dev/null | head -c 8)"
[[ "$banner" == SSH-2.0- ]] || fail "a second connection of the job's user got no SSH banner (\"$banner\")"
[[ "$(grep -c "the job's first command takes the guest agent's serial channels" "$jlog")" == 1 ]] ||
    fail "the agent's channels were handed out more than once: $jlog"

release_job "$id"
wait_ended "$id" COMPLETED 300 "$out"
wait_clean "$id" 120
no_node_drained
pass "the batch script went through the guest's agent, once, with a login's limits; no other user reached the job's sockets, and the job's user not the channels'; nothing left"
