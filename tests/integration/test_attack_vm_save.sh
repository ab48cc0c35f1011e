#!/bin/bash
# --vm-save attacked: while the guest runs, the user replaces the image's path
# with a FIFO (`mv IMG x; mkfifo IMG`). The save reads the image only through
# a descriptor of the very file the prolog checked, never the path again: it
# fails at once with one sentence (slurm-<jobid>.vm-save.txt), the epilog ends
# promptly, no node is drained and nothing is left. A save slower than the
# node's save_timeout_s (here 1 s on node2) is killed at the bound: it fails
# the same way, never the node. The slow save is made certain, not hoped for
# (a fast disk converts the guest's 64 MiB within the second): node2's qemu_img
# is a root-owned wrapper whose convert first sleeps, as a save onto storage
# that does not keep up would.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
cat >"$wd/wait.sh" <<'JOB'
#!/bin/bash
echo started
while [ ! -e go ]; do sleep 1; done
echo finished
JOB
cat >"$wd/write.sh" <<'JOB'
#!/bin/bash
dd if=/dev/urandom of=/var/tmp/svm-data bs=1M count=64 2>/dev/null && sync
echo "WROTE $(wc -c </var/tmp/svm-data)"
JOB
chmod 755 "$wd"/*.sh
cp "$VM_TEST_IMAGE" "$wd/img.qcow2"
chown -R "$SVM_USER:" "$wd"

# Node2 gets a save bound of 1 s and the slow qemu-img (its own
# configuration, removed at exit).
cfg2="$SVM_CLUSTER_DIR/etc/slurm-vm.node2.json"
slow="$SVM_CLUSTER_DIR/etc/slow-qemu-img"
cat >"$slow" <<'SH'
#!/bin/sh
# qemu-img, but its convert waits first: a save onto storage that stalls.
[ "$1" = convert ] && sleep 300
exec /usr/bin/qemu-img "$@"
SH
chmod 755 "$slow"
on_exit "rm -f '$cfg2' '$slow'"
python3 - "$SVM_CLUSTER_DIR/etc/slurm-vm.json" "$cfg2.tmp" "$slow" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["save_timeout_s"] = 1
c["qemu_img"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
mv "$cfg2.tmp" "$cfg2"

vm="--vm-kernel=$VM_TEST_KERNEL --vm-initrd=$VM_TEST_INITRD"
# shellcheck disable=SC2086
j1="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 --vm-image="$wd/img.qcow2" $vm \
    --vm-save="$wd/fifo-saved.qcow2" wait.sh)"
# shellcheck disable=SC2086
j2="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node2 --mem=1500 --vm-image="$VM_TEST_IMAGE" $vm \
    --vm-save="$wd/slow-saved.qcow2" write.sh)"
log "jobs: image replaced by a FIFO $j1, slow save $j2"

wait_output "$wd/slurm-$j1.out" started "job $j1 in its guest" 600
as_user "$SVM_USER" bash -c "cd '$wd' && mv img.qcow2 x.qcow2 && mkfifo img.qcow2"
as_user "$SVM_USER" touch "$wd/go"
log "job $j1: $wd/img.qcow2 is now a FIFO"
st="$(wait_job "$j1" 300)"
[[ "$st" == COMPLETED ]] || fail "job $j1 is $st: $(cat "$wd/slurm-$j1.out")"
ended=$(date +%s)
note="$wd/slurm-$j1.vm-save.txt"
wait_output "$note" "slurm-vm: job $j1" "job $j1's save failure note" 60
wait_clean "$j1" $(( 60 - ($(date +%s) - ended) ))
took=$(( $(date +%s) - ended ))
(( took < 60 )) || fail "job $j1's epilog took ${took}s after the job's end"
grep -qx "slurm-vm: job $j1: --vm-save=$wd/fifo-saved.qcow2: nothing was saved: $wd/img.qcow2 is a FIFO, not a regular file" "$note" ||
    fail "job $j1's note does not say why in one sentence: $(cat "$note")"
[[ ! -e "$wd/fifo-saved.qcow2" ]] || fail "job $j1 saved something although its image was replaced"
temps="$(find "$wd" -name '.fifo-saved.qcow2.slurm-vm-save*')"
[[ -z "$temps" ]] || fail "a temporary file of job $j1's save was left: $temps"
no_node_drained
pass "job $j1: the image replaced by a FIFO fails the save in one sentence ($(cat "$note")), epilog done ${took}s after the job, nothing left, no node drained"

st="$(wait_job "$j2" 900)"
[[ "$st" == COMPLETED ]] || fail "job $j2 is $st: $(cat "$wd/slurm-$j2.out")"
grep -q "^WROTE 67108864" "$wd/slurm-$j2.out" || fail "job $j2 did not write its data: $(cat "$wd/slurm-$j2.out")"
ended=$(date +%s)
note="$wd/slurm-$j2.vm-save.txt"
wait_output "$note" "slurm-vm: job $j2" "job $j2's save failure note" 60
wait_clean "$j2" 60
grep -qx "slurm-vm: job $j2: --vm-save=$wd/slow-saved.qcow2: the guest's disk could not be written as $SVM_USER (it took longer than the 1 s a save may take on this node)" "$note" ||
    fail "job $j2's note does not say the save was too slow: $(cat "$note")"
[[ ! -e "$wd/slow-saved.qcow2" ]] || fail "job $j2 saved although its save was past the bound"
temps="$(find "$wd" -name '.slow-saved.qcow2.slurm-vm-save*')"
[[ -z "$temps" ]] || fail "a temporary file of job $j2's save was left: $temps"
pgrep -u "$SVM_USER" -f "qemu-img convert" >/dev/null && fail "the save's qemu-img still runs after the bound"
pgrep -u "$SVM_USER" -fx "sleep 300" >/dev/null && fail "the slow qemu-img's sleep still runs after the bound"
no_node_drained
pass "job $j2: a save slower than node2's 1 s bound fails the save ($(cat "$note")), qemu-img killed, nothing left, no node drained"
