#!/bin/bash
# Attack (issue: a work directory that points into the state directory is
# exported as a share): the user submits with a working directory inside
# slurm-vm's state directory, or one that is not theirs, hoping the guest
# gets it. Shares are only directories the user owns and never slurm-vm's
# own: each such job fails with one sentence, no node drains.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/sh\necho should-not-run\n' >"$wd/job.sh"
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
try_dir() { # dir expected-words
    local id st out
    # shellcheck disable=SC2046
    id="$(as_user "$SVM_USER" sbatch --parsable -N1 -w node1 -D "$1" -o "$wd/slurm-%j.out" $(vm_opts) "$wd/job.sh")" ||
        fail "sbatch -D $1 failed at submit"
    st="$(wait_job "$id" 300)"
    out="$(cat "$wd/slurm-$id.out" 2>/dev/null)"
    [[ "$st" == FAILED ]] || fail "job $id with working directory $1 ended $st: $out"
    grep -q should-not-run <<<"$out" && fail "job $id ran with working directory $1"
    grep -q "$2" <<<"$out" || fail "job $id's output does not say why ($2): $out"
    wait_clean "$id" 60
    log "-D $1: $(grep -m1 "$2" <<<"$out")"
}
try_dir "$SVM_STATE_ROOT/node1" "slurm-vm's own directories"
try_dir "$SVM_STATE_ROOT" "slurm-vm's own directories"
try_dir "/tmp" "is not yours"
no_node_drained
pass "working directories in the state directory or of another owner are not shown to guests; no node drained"
