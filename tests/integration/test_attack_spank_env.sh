#!/bin/bash
# The plugin's options as slurmstepd receives them: a batch job carries them
# in its environment (_SLURM_SPANK_OPTION_<plugin>_<option>), which the user
# writes. Forged there, they must never fail the plugin's init in
# slurmstepd for the node (before Slurm 25.05 that drains the node; 25.05+
# fails the job: slurm_spank_init_failure_mode) and never run a task on the
# host as if it were in a guest:
# 1. an empty --vm-image: the option's failure is logged, the job runs as
#    the plain job it is, the node stays up;
# 2. an image named only there (no VM prepared by the prolog, which reads
#    the job's own record of its options): the task is refused, with the
#    sentence in the job's output and the node's log, the job fails, the node stays up, and the
#    script never ran on the host.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
chown "$SVM_USER:" "$wd"
opt="_SLURM_SPANK_OPTION_slurm___vm_vm_image"
log_of() { cat "$SVM_CLUSTER_DIR/log/slurmd-node3.log"; }

# shellcheck disable=SC2016
id="$(cd "$wd" && as_user "$SVM_USER" env "$opt=" sbatch --parsable -w node3 --wrap 'echo ran on $(hostname)')"
state="$(wait_job "$id" 120)"
[[ "$state" == COMPLETED ]] || fail "job $id with an empty forged --vm-image ended $state: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
grep -q '^ran on ' "$wd/slurm-$id.out" || fail "job $id did not run its script"
log_of | grep -q "\[$id.batch\] error: slurm-vm: --vm-image needs a value" ||
    fail "slurmstepd did not log the forged option's failure for job $id"
no_node_drained
pass "job $id: an empty --vm-image forged in the job's environment is logged; the job runs, the node stays up"

rm -f "$wd/marker"
id="$(cd "$wd" && as_user "$SVM_USER" env "$opt=$VM_TEST_IMAGE" sbatch --parsable -w node3 --wrap 'touch marker')"
state="$(wait_job "$id" 120)"
[[ "$state" == FAILED ]] || fail "job $id with a forged --vm-image ended $state"
[[ ! -e "$wd/marker" ]] || fail "job $id's script ran on the host"
log_of | grep -q "\[$id.batch\] error: slurm-vm: job $id: no guest was prepared on this node; the task does not run on the host" ||
    fail "no sentence for job $id in node3's log"
grep -q "^slurm-vm: job $id: no guest was prepared on this node" "$wd/slurm-$id.out" ||
    fail "job $id's output does not say why: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
wait_clean "$id" 60
no_node_drained
pass "job $id: an image forged in the job's environment, with no guest prepared: refused, not run on the host, node up"
