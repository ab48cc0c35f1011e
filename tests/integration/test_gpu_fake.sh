#!/bin/bash
# A GPU job through the local cluster against a fake sysfs tree (issue: GPUs
# and VFs from Slurm's allocation). node3 declares one GPU in gres.conf
# (tests/cluster/up builds its tree: a GPU 0000:3b:00.0 on nvidia with its
# audio function 0000:3b:00.1 in the same IOMMU group, an InfiniBand HCA
# 0000:2b:00.0 with two VFs). For the length of this test node3's slurm-vm
# configuration points at that tree, with the emulated kernel
# (build/tests/svm-emulated-kernel) taking every sysfs write.
#
#  1. The job gets gres gpu:1: Slurm's allocation is mapped to 0000:3b:00.0,
#     the GPU and its audio function go to vfio-pci, a VF is claimed and given
#     GUIDs. The domain cannot start here (no real device): the job fails with
#     one clear sentence, everything is given back (the tree is exactly as
#     before), nothing is left, no node drains.
#  2. The GPU does not leave vfio-pci at the end (a host process holds it):
#     the epilog leaves it there (quarantined: nothing else can use it), keeps
#     the job's ledger, and drains node3 with a reason that names the device.
#     Once the device is free, `slurm-vm sweep` gives it back; the tree is as
#     before.
source "$(dirname "$0")/lib.sh"

C="$SVM_CLUSTER_DIR"
TREE="$C/fake/node3"
K="$SVM_BINARY_DIR/tests/svm-emulated-kernel"
NODE_CFG="$C/etc/slurm-vm.node3.json"
GPU=0000:3b:00.0
AUDIO=0000:3b:00.1
[[ -x "$K" ]] || fail "$K is missing (build the project)"
[[ "$(sinfo -h -n node3 -o '%G')" == *gpu:1* ]] ||
    fail "node3 declares no gres gpu:1 (tests/cluster/up writes gres.conf; restart its slurmd)"

cleanup() {
    rm -f "$NODE_CFG"
    if [[ "$(sinfo -h -n node3 -o '%t')" == drain* && "$(sinfo -h -n node3 -o '%E')" == slurm-vm:* ]]; then
        scontrol update nodename=node3 state=resume || true
    fi
}
on_exit cleanup

fresh_tree() {
    "$K" --build "$TREE" gpu-node
    rm -rf "$C/fake/node3-vf-pool"
    "$K" --snapshot "$TREE" >"$C/fake/node3.before"
}

tree_unchanged() { # what
    local d
    "$K" --snapshot "$TREE" >"$C/fake/node3.after"
    d="$(diff "$C/fake/node3.before" "$C/fake/node3.after" || true)"
    [[ -z "$d" ]] || fail "$1: the fake tree differs from before the job:
$d"
}

python3 - "$C/etc/slurm-vm.json" "$NODE_CFG" "$TREE" "$K" "$C/fake/node3-vf-pool" <<'EOF'
import json, sys
base, out, tree, kernel, pool = sys.argv[1:]
c = json.load(open(base))
c["sysfs_root"] = tree
# The job's traffic over IPoIB on the VF (the guest never boots here: this
# shows the prolog plans it and builds its seed).
c["network"]["fabric"] = "ipoib"
c["network"]["fabric_prefix"] = "10.214.0.0/16"
c["devices"] = {"gpus": [{"pci": "0000:3b:00.0", "nvidia_minor": 0}],
                "vf_providers": [{"pci": "0000:2b:00.0", "link_layer": "infiniband"}],
                "guid_prefix": "02:c9:00:00", "node_id": 3,
                "vf_state_dir": pool, "unbind_timeout_s": 2, "emulated_kernel": kernel}
json.dump(c, open(out + ".tmp", "w"), indent=1)
EOF
mv "$NODE_CFG.tmp" "$NODE_CFG"

submit_gpu_job() { # workdir
    # shellcheck disable=SC2046 # vm_opts: options, one a word
    (cd "$1" && as_user "$SVM_USER" sbatch --parsable -w node3 --gres=gpu:1 -t 5 $(vm_opts) \
        -o "$1/slurm-%j.out" --wrap 'echo guest ran')
}

# ------------------------------------------------------------ 1. rollback
fresh_tree
wd="$(workdir)"
id="$(submit_gpu_job "$wd")"
log "GPU job $id on node3"
st="$(wait_job "$id" 300)"
out="$(cat "$wd/slurm-$id.out" 2>/dev/null || true)"
[[ "$st" == FAILED ]] || fail "job $id ended $st (want FAILED: no real device here); output: $out"
grep -qE "^slurm-vm: (job $id: )?the guest on node3 could not be started: " <<<"$out" ||
    fail "job $id output has no clear reason: $out"
grep -q "guest ran" <<<"$out" && fail "job $id's script ran although its guest never started"
w="$TREE/.emulated-kernel/writes"
for want in "devices/$GPU/driver_override <- vfio-pci" "drivers/nvidia/unbind <- $GPU" \
            "devices/$AUDIO/driver_override <- vfio-pci" "drivers/snd_hda_intel/unbind <- $AUDIO" \
            "sriov/0/node <- 02:c9:00:00:00:03:00:00" "sriov/0/policy <- Follow" \
            "drivers/nvidia/bind <- $GPU" "drivers/snd_hda_intel/bind <- $AUDIO" \
            "sriov/0/node <- 00:00:00:00:00:00:00:00"; do
    grep -qF "$want" "$w" || fail "the emulated kernel never saw '$want'; writes:
$(cat "$w")"
done
grep -q -- "-> " "$w" && fail "the emulated kernel refused writes:
$(grep -- '-> ' "$w")"
wait_clean "$id" 60
tree_unchanged "job $id"
[[ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$C/fake/node3-vf-pool/pool.json")" == 0 ]] ||
    fail "VF pool still has claims: $(cat "$C/fake/node3-vf-pool/pool.json")"
no_node_drained
pass "GPU job $id: $GPU and $AUDIO bound to vfio-pci, VF given GUIDs; domain refused (no device); all given back: '$(head -n1 "$wd/slurm-$id.out")'"

# ------------------------------------------------------------ 2. no give-back
fresh_tree
"$K" --busy "$TREE" "$GPU@vfio-pci" -1
id="$(submit_gpu_job "$wd")"
log "GPU job $id on node3; $GPU will not leave vfio-pci"
st="$(wait_job "$id" 300)"
[[ "$st" == FAILED ]] || fail "job $id ended $st"
reason="$(wait_drained node3 60 "job $id did not give $GPU back")"
[[ "$reason" == "slurm-vm: job $id: "*"$GPU"* ]] || fail "node3's drain reason does not name $GPU: '$reason'"
[[ "$("$K" --driver "$TREE" "$GPU")" == vfio-pci ]] || fail "$GPU left vfio-pci: not quarantined"
[[ -e "$SVM_STATE_ROOT/node3/ledger/job_$id.json" ]] || fail "the ledger of job $id is gone: sweep cannot repair"
log "node3 drained: $reason"
out="$("$SVM_BINARY_DIR/admin/slurm-vm" sweep --config "$NODE_CFG" --node node3 2>&1)" &&
    fail "sweep reported success while $GPU is still busy: $out"
"$K" --busy "$TREE" "$GPU@vfio-pci" 0
out="$("$SVM_BINARY_DIR/admin/slurm-vm" sweep --config "$NODE_CFG" --node node3 2>&1)" ||
    fail "sweep failed once $GPU was free: $out"
[[ "$("$K" --driver "$TREE" "$GPU")" == nvidia ]] || fail "sweep did not give $GPU back to nvidia: $out"
wait_clean "$id" 30
tree_unchanged "job $id after sweep"
scontrol update nodename=node3 state=resume
no_node_drained
pass "job $id: $GPU kept on vfio-pci, node3 drained ('$reason'); sweep gave it back once free"

# ------------------------------------------------------------ 3. host holds the GPU
# A host process keeps the GPU on nvidia: the prolog waits a bounded time
# (unbind_timeout_s), undoes what it did, and fails; node3 is drained with a
# reason naming the device, and Slurm requeues the job (held).
fresh_tree
"$K" --busy "$TREE" "$GPU@nvidia" -1
id="$(submit_gpu_job "$wd")"
log "GPU job $id on node3; $GPU will not leave nvidia"
reason="$(wait_drained node3 120 "job $id's prolog could not take $GPU")"
[[ "$reason" == "slurm-vm: job $id: "*"$GPU"*"did not release"* ]] ||
    fail "node3's drain reason does not name $GPU and the cause: '$reason'"
end=$((SECONDS + 60))
until [[ "$(job_field "$id" Reason)" == launch_failed_requeued_held ]]; do
    ((SECONDS < end)) || fail "job $id not requeued after its prolog failed (state $(job_field "$id" JobState), reason $(job_field "$id" Reason))"
    sleep 1
done
scancel "$id"
"$K" --busy "$TREE" "$GPU@nvidia" 0
wait_clean "$id" 60
tree_unchanged "job $id (prolog failed)"
scontrol update nodename=node3 state=resume
no_node_drained
pass "job $id: $GPU held on the host: bounded wait, rollback, node3 drained ('${reason:0:100}...'), job requeued held"

# ------------------------------------------------------------ 4. fabric without a VF
# network.fabric "ipoib" on a node that has no VF to give: a node-side
# problem, named in the drain reason.
python3 - "$NODE_CFG" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
del c["devices"]["vf_providers"]
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
fresh_tree
# shellcheck disable=SC2046 # vm_opts: options, one a word
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -w node3 -t 5 $(vm_opts) -o "$wd/slurm-%j.out" --wrap 'echo guest ran')"
reason="$(wait_drained node3 120 "job $id's guest cannot join the IPoIB fabric")"
[[ "$reason" == *'network.fabric is "ipoib" but the guest on node3 gets no InfiniBand VF'* ]] ||
    fail "node3's drain reason does not say what is missing: '$reason'"
scancel "$id"
wait_clean "$id" 60
tree_unchanged "job $id (fabric without a VF)"
scontrol update nodename=node3 state=resume
no_node_drained
pass "job $id: fabric ipoib without a VF: node3 drained ('$reason')"
