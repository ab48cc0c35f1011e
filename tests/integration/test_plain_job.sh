#!/bin/bash
# A job without --vm-image runs exactly as before, on the host.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
printf '#!/bin/bash\necho "HOST=$(hostname)"\nsrun -N3 -n3 /bin/sh -c %s\nexit 0\n' "'echo task \$SLURM_PROCID on \$SLURMD_NODENAME'" >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N3 -n3 job.sh)"
[[ "$(wait_job "$id" 120)" == COMPLETED ]] || fail "plain job $id did not complete: $(cat "$wd/slurm-$id.out")"
out="$wd/slurm-$id.out"
grep -qx "HOST=$(hostname)" "$out" || fail "plain job did not run on the host: $(cat "$out")"
[[ "$(grep -c '^task [0-2] on node[1-3]$' "$out")" == 3 ]] || fail "srun tasks missing: $(cat "$out")"
[[ -z "$(leftovers "$id")" ]] || fail "a plain job left slurm-vm state: $(leftovers "$id")"
no_node_drained
pass "plain job ran on the host"
