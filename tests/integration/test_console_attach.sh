#!/bin/bash
# Attach to a running VM job: `srun --jobid=ID --overlap --pty bash` is a
# shell in the guest of that node (with a terminal there), and `slurm-vm
# console JOBID [NODE]` shows the guest's serial console to the job's owner
# and to root. Another user gets neither.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
echo "STARTED on $(hostname)"
sleep 600
JOB
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 $(vm_opts) job.sh)"
on_exit 'scancel "$id" 2>/dev/null || true'
log "submitted job $id"
end=$(( $(date +%s) + 600 ))
until grep -q "^STARTED on node1-vm" "$wd/slurm-$id.out" 2>/dev/null; do
    st="$(job_field "$id" JobState)"
    [[ "$st" == PENDING || "$st" == RUNNING || "$st" == CONFIGURING ]] ||
        fail "job $id is $st before its script started: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
    (( $(date +%s) < end )) || fail "job $id: its script did not start within 600 s"
    sleep 1
done
admin="$SVM_BUILD_DIR/admin/slurm-vm"

# A command with a terminal, and an interactive shell fed through script(1).
out="$(cd "$wd" && timeout 180 runuser -u "$SVM_USER" -- env SLURM_CONF="$SLURM_CONF" PATH=/usr/bin:/bin \
    script -qec "srun --jobid=$id --overlap --pty bash -c 'echo ATTACHED=\$(hostname); tty'" /dev/null 2>&1)" ||
    fail "srun --jobid=$id --overlap --pty failed: $out"
grep -q "ATTACHED=node1-vm" <<<"$out" || fail "srun --jobid=$id --pty did not land in the guest: $out"
grep -q "^/dev/pts/" <<<"$(tr -d '\r' <<<"$out")" || fail "the command in the guest has no terminal: $out"
out="$(cd "$wd" && printf 'echo "INTERACTIVE=$(hostname)"\nexit\n' |
    timeout 180 runuser -u "$SVM_USER" -- env SLURM_CONF="$SLURM_CONF" PATH=/usr/bin:/bin \
    script -qec "srun --jobid=$id --overlap --pty bash" /dev/null 2>&1)" ||
    fail "srun --jobid=$id --overlap --pty bash failed: $out"
grep -q "INTERACTIVE=node1-vm" <<<"$(tr -d '\r' <<<"$out")" || fail "the interactive shell is not in the guest: $out"
pass "srun --jobid=$id --overlap --pty bash is a shell in the guest of node1, with a terminal"

# The console: the owner (through a step of the job) and root (on the node).
out="$(cd "$wd" && as_user "$SVM_USER" timeout 120 "$admin" console "$id" 2>&1)" ||
    fail "slurm-vm console $id as $SVM_USER failed: $out"
grep -q "Linux version" <<<"$out" || fail "slurm-vm console $id as $SVM_USER shows no boot messages: $(head -c 2000 <<<"$out")"
out="$(cd "$wd" && as_user "$SVM_USER" timeout 120 "$admin" console "$id" node1 2>&1)" ||
    fail "slurm-vm console $id node1 as $SVM_USER failed: $out"
grep -q "Linux version" <<<"$out" || fail "slurm-vm console $id node1 shows no boot messages"
grep -q $'\e' <<<"$out" && fail "the console was shown with terminal escapes"
out="$(timeout 120 "$admin" console --config "$SVM_CLUSTER_DIR/etc/slurm-vm.json" "$id" node1 2>&1)" ||
    fail "slurm-vm console as root failed: $out"
grep -q "Linux version" <<<"$out" || fail "slurm-vm console as root shows no boot messages"
pass "slurm-vm console $id [node1] shows the guest's console to its owner and to root"

# Another user: no console, no shell in the guest, not the log itself.
rc=0; out="$(cd /tmp && as_user "$SVM_USER2" timeout 120 "$admin" console "$id" 2>&1)" || rc=$?
[[ $rc -ne 0 ]] || fail "slurm-vm console $id as $SVM_USER2 succeeded: $(head -c 500 <<<"$out")"
grep -q "Linux version" <<<"$out" && fail "$SVM_USER2 saw job $id's console"
log "$SVM_USER2: slurm-vm console $id: $(head -n2 <<<"$out" | tr '\n' ' ')"
rc=0; out="$(cd /tmp && as_user "$SVM_USER2" timeout 120 srun --jobid="$id" --overlap --vm-console true 2>&1)" || rc=$?
[[ $rc -ne 0 ]] && ! grep -q "Linux version" <<<"$out" || fail "$SVM_USER2 got job $id's console through srun: $out"
rc=0; out="$(cd /tmp && as_user "$SVM_USER2" timeout 120 srun --jobid="$id" --overlap hostname 2>&1)" || rc=$?
[[ $rc -ne 0 ]] || fail "$SVM_USER2 ran a step in job $id: $out"
rc=0; out="$(as_user "$SVM_USER2" cat "$SVM_STATE_ROOT/node1/job_$id/console.log" 2>&1)" || rc=$?
[[ $rc -ne 0 ]] || fail "$SVM_USER2 read job $id's console log directly"
pass "$SVM_USER2 gets neither job $id's console nor a shell in its guest"

scancel "$id"
wait_job "$id" 300 >/dev/null
wait_clean "$id" 120
no_node_drained
pass "job $id cancelled, nothing left, no node drained"
