#!/bin/bash
# Attack (guest -> host, user -> host): srun from the batch script inside the
# guest goes to the host's srun through the relay (lib/guest/srun_relay.hpp);
# srun options that run programs on the host (--prolog, --epilog,
# --task-prolog, --task-epilog), that load the user's code into the host's
# programs (--export=LD_PRELOAD=...), that write host files (--output) or that
# take the step out of the VM (--vm-image=none) must fail with one sentence,
# and their environment twins in the batch step's environment must not
# reach the host's srun. From outside (this host is the login node), a step
# of the VM job with --export=LD_PRELOAD=... does not load the library on
# the node's host either, nor do --task-prolog and --task-epilog (run by
# slurmstepd on the node: the plugin lets a VM job's step execute only the
# project's and the site's programs). Each attack that works writes a marker naming the
# host in the host's /tmp and the user's home: none may appear. Plain srun
# from the guest still works; nothing is left; nothing drains.
source "$(dirname "$0")/lib.sh"

host="$(hostname)"
wd="$(workdir)"
tag="svm-relay-attack.$$"
home="/home/$SVM_USER"
# Markers naming the host (a guest's name is NODE-vm): NAME.HOST or NAME.HOST.PID.
# shellcheck disable=SC2010 # globs that may match nothing, filtered by the host's suffix
markers() { ls -d /tmp/"$tag".* "$home/$tag".* "$wd/$tag".* 2>/dev/null | grep -E "\.${host//./\\.}(\.[0-9]+)?\$" || true; }
on_exit 'rm -f /tmp/"$tag".* "$home/$tag".* 2>/dev/null || true'

# What an attack runs on the host if it gets there: a marker naming the host.
cat >"$wd/evil.sh" <<EOF2
#!/bin/sh
for d in /tmp "$home"; do touch "\$d/$tag.\${1:-task}.\$(hostname)"; done
exit 0
EOF2
chmod 755 "$wd/evil.sh"
have_cc=0
if command -v cc >/dev/null; then
    cat >"$wd/evil.c" <<EOF2
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
    char h[256] = "", p[600];
    gethostname(h, sizeof h - 1);
    snprintf(p, sizeof p, "/tmp/$tag.preload.%s.%d", h, (int)getpid());
    FILE* f = fopen(p, "w");
    if (f) fclose(f);
}
EOF2
    cc -shared -fPIC -o "$wd/evil.so" "$wd/evil.c" && have_cc=1
fi
[[ $have_cc == 1 ]] || log "no C compiler: the LD_PRELOAD attacks are not tried"

cat >"$wd/job.sh" <<SCRIPT
#!/bin/bash
try() {  # try NAME srun-args...: the srun's status and first line of stderr
    local name="\$1"; shift
    srun "\$@" 2>"/tmp/\$name.err" >/dev/null
    echo "attack \$name rc=\$? err=\$(head -n1 "/tmp/\$name.err")"
}
mark='for d in /tmp $home; do touch "\$d/$tag.\$0.\$(hostname)"; done'
try prolog --overlap -N1 -n1 --prolog=/usr/bin/env sh -c "\$mark" prolog
try prolog2 --overlap -N1 -n1 --prolog /usr/bin/env sh -c "\$mark" prolog2
try epilog --overlap -N1 -n1 --epilog=/usr/bin/env sh -c "\$mark" epilog
try task-prolog --overlap -N1 -n1 --task-prolog=$wd/evil.sh true
try task-epilog --overlap -N1 -n1 --task-epilog=$wd/evil.sh true
try task-pro-abbrev --overlap -N1 -n1 --task-pro=$wd/evil.sh true
try preload --overlap -N1 -n1 --export=ALL,LD_PRELOAD=$wd/evil.so true
try vm-none --overlap -N1 -n1 --vm-image=none sh -c "\$mark" vmnone
try vm-console --overlap -N1 -n1 --vm-console true
try output --overlap -N1 -n1 -o $wd/$tag.output.$host true
try chdir --overlap -N1 -n1 -D /tmp true
try bcast --overlap -N1 -n1 --bcast=/tmp/$tag.bcast.$host /bin/true
try jobid --overlap --jobid=1 -N1 -n1 true
# A heterogeneous step: srun takes each part's options after a lone ':'.
try hetstep --overlap -N1 -n1 true : --overlap -N1 -n1 --prolog=/usr/bin/env sh -c "\$mark" hetstep
# Twins of those options in the batch step's environment (given at sbatch).
srun --overlap -N1 -n1 true
echo "twins rc=\$?"
echo "plain: \$(srun --overlap -N1 -n1 hostname)"
echo "probe done"
i=0; while [ ! -e "$home/svm-relay-over.\$SLURM_JOB_ID" ] && [ \$i -lt 600 ]; do sleep 1; i=\$((i+1)); done
SCRIPT
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
extra=()
[[ $have_cc == 1 ]] && extra=(--export="ALL,LD_PRELOAD=$wd/evil.so")
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" env SLURM_TASK_PROLOG="$wd/evil.sh" SLURM_TASK_EPILOG="$wd/evil.sh" \
    SLURM_PROLOG="$wd/evil.sh" SLURM_EPILOG="$wd/evil.sh" SLURM_VM_IMAGE=none \
    sbatch --parsable "${extra[@]}" -N1 -w node1 -t 10 $(vm_opts) job.sh)"
on_exit 'scancel "$id" 2>/dev/null || true; rm -f "$home/svm-relay-over.$id"'
log "job $id"
out="$wd/slurm-$id.out"
wait_output "$out" "^probe done" "the batch script" 900

# From the login node (this host): a step of the VM job whose environment
# carries LD_PRELOAD; it must run in the guest without loading the library
# on the node's host.
if [[ $have_cc == 1 ]]; then
    lp="$(cd "$wd" && as_user "$SVM_USER" timeout 300 srun --jobid="$id" --overlap -N1 -n1 \
        --export="ALL,LD_PRELOAD=$wd/evil.so" hostname 2>&1)" || true
    [[ "$lp" == node1-vm ]] || fail "srun --jobid --export=LD_PRELOAD from the login node did not run in the guest: $lp"
fi
# From the login node: --task-prolog and --task-epilog run by slurmstepd on
# the node as the user; the plugin lets a VM job's step execute only the
# project's and the site's programs there.
tp="$(cd "$wd" && as_user "$SVM_USER" timeout 300 srun --jobid="$id" --overlap -N1 -n1 \
    --task-prolog="$wd/evil.sh" hostname 2>&1)" && fail "srun --jobid --task-prolog from the login node succeeded: $tp"
log "login node --task-prolog: $tp"
te="$(cd "$wd" && as_user "$SVM_USER" timeout 300 srun --jobid="$id" --overlap -N1 -n1 \
    --task-epilog="$wd/evil.sh" hostname 2>&1)" || true
log "login node --task-epilog: $te"
[[ "$te" == *node1-vm* ]] || fail "the step with --task-epilog did not run in the guest: $te"
touch "$home/svm-relay-over.$id"
st="$(wait_job "$id" 300)"
[[ "$st" == COMPLETED ]] || fail "job $id ended $st: $(cat "$out")"
log "$(grep '^attack\|^twins\|^plain' "$out")"

for a in prolog prolog2 epilog task-prolog task-epilog task-pro-abbrev vm-none vm-console output chdir bcast jobid; do
    line="$(grep "^attack $a " "$out")" || fail "attack $a did not report: $(cat "$out")"
    [[ "$line" != *" rc=0 "* ]] || fail "srun $a from the guest succeeded: $line"
    [[ "$line" == *"srun: slurm-vm: option "*" is not available inside a VM job"* ]] ||
        fail "srun $a from the guest was not refused with the sentence: $line"
done
line="$(grep "^attack hetstep " "$out")" || fail "attack hetstep did not report: $(cat "$out")"
[[ "$line" != *" rc=0 "* && "$line" == *"heterogeneous steps (':' between parts) are not available inside a VM job"* ]] ||
    fail "srun with a ':' part from the guest was not refused with the sentence: $line"
if [[ $have_cc == 1 ]]; then
    line="$(grep "^attack preload " "$out")"
    [[ "$line" == *"option --export is not available inside a VM job"* ]] || fail "--export was not refused: $line"
fi
grep -q "^twins rc=0$" "$out" || fail "srun with the twins in the batch environment failed: $(cat "$out")"
grep -q "^plain: node1-vm$" "$out" || fail "plain srun from the guest no longer works: $(cat "$out")"
m="$(markers)"
[[ -z "$m" ]] || fail "attacks ran on the host $host: $m"
[[ ! -e "$wd/$tag.output.$host" ]] || fail "srun -o from the guest wrote a host file"
wait_clean "$id" 120
no_node_drained
pass "job $id: --prolog, --epilog, --task-prolog, --task-epilog, --export=LD_PRELOAD, --vm-image=none, -o, -D, --bcast, --jobid and a second part after ':' refused from the guest with one sentence; their twins in the batch environment and LD_PRELOAD from the login node ran nothing on the host; plain srun works"
