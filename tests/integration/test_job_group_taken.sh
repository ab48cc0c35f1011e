#!/bin/bash
# A job's guest group is job_gid_base + job id; a site whose name service
# holds a group there (SSSD's default AD id-mapping range covers the default
# base) would hand that group's files to the job's QEMU. The prolog must see
# the group (getgrgid: the name service, not only /etc/group) and fail the
# job with one sentence, without draining the node; the next job, whose group
# is free, runs. `slurm-vm doctor` reports the overlap.
source "$(dirname "$0")/lib.sh"

base="$(cluster_setting job_gid_base $((0x70000000)))"
wd="$(workdir)"
printf '#!/bin/sh\necho RAN\n' >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable --hold -N1 -w node1 --mem=1500 $(vm_opts) job.sh)"
gid=$((base + id))
group="svmtest-taken-$id"
getent group "$gid" >/dev/null && fail "gid $gid is a group already"
groupadd -g "$gid" "$group"
cleanup() { scancel "$id" 2>/dev/null || true; groupdel "$group" 2>/dev/null || true; }
on_exit cleanup
getent group "$gid" | grep -q "^$group:" || fail "the test's group $group ($gid) is not in the name service"

out="$("$SVM_BUILD_DIR/admin/slurm-vm" doctor --config "$SVM_CLUSTER_DIR/etc/slurm-vm.json" 2>&1)" || true
grep -q "job groups.*$group ($gid)" <<<"$out" || fail "doctor does not report the group $group ($gid): $out"
log "doctor: $(grep -m1 "job groups" <<<"$out")"

scontrol release "$id"
st="$(wait_job "$id" 300)"
[[ "$st" == FAILED ]] || fail "job $id, whose guest group $gid is $group, is $st: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
want="job $id's guest group, gid $gid (job_gid_base + job id), is the group \"$group\""
grep -qF "$want" "$wd/slurm-$id.out" || fail "job $id does not say '$want': $(cat "$wd/slurm-$id.out")"
grep -qx RAN "$wd/slurm-$id.out" && fail "job $id ran with its guest group taken"
wait_clean "$id" 60
no_node_drained
log "job $id: $(grep -m1 -F "guest group" "$wd/slurm-$id.out")"
groupdel "$group"
pass "a job whose guest group is a group of the site fails in one sentence, no node drained, nothing left"

out="$("$SVM_BUILD_DIR/admin/slurm-vm" doctor --config "$SVM_CLUSTER_DIR/etc/slurm-vm.json" 2>&1)" || true
grep -q "job groups" <<<"$out" || fail "doctor has no job groups check: $out"
grep "job groups" <<<"$out" | grep -q "FAIL" && fail "doctor still reports a group in the range: $out"
# shellcheck disable=SC2046
id2="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 $(vm_opts) job.sh)"
st="$(wait_job "$id2" 600)"
[[ "$st" == COMPLETED ]] && grep -qx RAN "$wd/slurm-$id2.out" || fail "job $id2 (group free) is $st: $(cat "$wd/slurm-$id2.out")"
wait_clean "$id2" 120
no_node_drained
pass "the next job, whose guest group is free, runs; doctor reports no overlap"
