#!/bin/bash
# Stock cloud images, unchanged (issue: "Stock cloud images, unchanged"): the
# images tests/image/cloud/build makes the way a distribution makes its cloud
# image (systemd, the real cloud-init, openssh-server, initramfs-tools and a
# bootloader; one with Debian's generic kernel, one with its cloud kernel,
# which has no 9p), booted with --vm-image only (their own bootloader). A
# 2-node job reads a file from the submit directory (a virtio-fs share), runs
# mpirun across both guests and exits with a chosen code. Then a node set to
# 9p gets a job with the cloud-kernel image: it fails at boot with a sentence
# naming what the image lacks, not a timeout, and the node stays up.
source "$(dirname "$0")/lib.sh"
repo="$(cd "$(dirname "$0")/../.." && pwd)"

image_of() { # flavour -> path of its disk image (built once, cached)
    local env
    env="$("$repo/tests/image/cloud/build" --flavour "$1" --print-env)" || fail "building the $1 cloud image failed"
    sed -n 's/^VM_CLOUD_IMAGE=//p' <<<"$env" | tr -d "'"
}

wd="$(workdir)"
# Every rank reads the factor 3 from input.txt (tests/fixtures/allreduce.c):
# the sum of rank * 3 over 2 ranks is 3.
echo 3 >"$wd/input.txt"
guest_mpi_program "$wd"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
echo "input $(cat input.txt)"
grep -q "^systemd" /proc/1/comm && echo "init: systemd"
mpirun ./allreduce
exit 7
JOB
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"

for flavour in generic cloud; do
    img="$(image_of "$flavour")"
    [[ -r "$img" ]] || fail "no $flavour cloud image ($img)"
    id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N2 --ntasks-per-node=1 --mem=1500 -t 15 \
        --vm-image="$img" job.sh)"
    log "$flavour image: 2-node job $id"
    state="$(wait_job "$id" 1200)"
    out="$wd/slurm-$id.out"
    log "output: $(tr '\n' '|' <"$out")"
    [[ "$state" == FAILED && "$(job_field "$id" ExitCode)" == 7:0 ]] ||
        fail "$flavour image: job $id ended $state with $(job_field "$id" ExitCode), not FAILED with 7:0: $(cat "$out")"
    grep -qx "input 3" "$out" || fail "$flavour image: the script did not read input.txt"
    grep -qx "init: systemd" "$out" || fail "$flavour image: the guest does not run systemd"
    for r in 0 1; do
        grep -q "^rank $r of 2 on node[1-3]-vm: sum 3$" "$out" || fail "$flavour image: rank $r missing: $(cat "$out")"
    done
    wait_clean "$id" 180
done

# The cloud kernel has no 9p: on a node set to 9p, one sentence, at boot.
# shellcheck disable=SC2034 # read by an on_exit command
NODE_CFG="$SVM_CLUSTER_DIR/etc/slurm-vm.node2.json"
on_exit 'rm -f "$NODE_CFG"'
node_shares_9p node2 >/dev/null
img="$(image_of cloud)"
t0=$(date +%s)
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node2 --mem=1500 -t 15 --vm-image="$img" job.sh)"
state="$(wait_job "$id" 900)"
out="$(cat "$wd/slurm-$id.out" 2>/dev/null)"
[[ "$state" == FAILED ]] || fail "the cloud-kernel image on a 9p node: job $id ended $state: $out"
grep -q "the image's kernel has no 9p file system" <<<"$out" ||
    fail "job $id's output does not name the missing 9p: $out"
log "9p job $id failed after $(( $(date +%s) - t0 )) s: $(grep -m1 "no 9p" <<<"$out")"
wait_clean "$id" 180
no_node_drained
pass "stock images (generic and cloud kernels, systemd, cloud-init) ran a 2-node MPI job over virtio-fs shares and returned its exit code; 9p on a cloud kernel failed with the reason"
