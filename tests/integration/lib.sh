# Shared helpers for the integration tests on the local cluster. Sourced.
# shellcheck shell=bash
set -euo pipefail

SVM_CLUSTER_DIR="${SVM_CLUSTER_DIR:-/var/tmp/slurm-vm-cluster}"
if [[ ! -r "$SVM_CLUSTER_DIR/env.sh" ]]; then
    echo "FAIL: the local cluster is not set up ($SVM_CLUSTER_DIR/env.sh missing): run tests/cluster/up" >&2
    exit 1
fi
# shellcheck disable=SC1091
source "$SVM_CLUSTER_DIR/env.sh"
: "${VM_TEST_IMAGE:?the cluster env has no VM_TEST_IMAGE (tests/image/build failed?)}"
SVM_USER=svmuser
# shellcheck disable=SC2034 # for the tests that source this file
SVM_USER2=svmuser2
SVM_NODES=(node1 node2 node3)
SVM_STATE_ROOT=/run/slurm-vm
T0=$(date +%s)

log() { printf '[%s +%ss] %s\n' "$(basename "$0" .sh)" "$(( $(date +%s) - T0 ))" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
pass() { log "PASS: $*"; }

as_user() { local u="$1"; shift; runuser -u "$u" -- env SLURM_CONF="$SLURM_CONF" PATH=/usr/bin:/bin "$@"; }

# What a test undoes when it exits, however it exits: its own actions
# (on_exit CMD, the last registered runs first), then the working directories
# workdir made, so that no test leaves its images behind.
# An action's own status does not count; one that finds something wrong
# calls fail_at_exit. SVM_KEEP_WORKDIRS=1 keeps the directories to look at.
# Before them, the jobs vm_batch submitted are cancelled (a no-op for one
# that ended) and their release files removed (held_vm_job).
SVM_EXIT_ACTIONS=()
SVM_EXIT_FAILED=0
SVM_WORKDIR_LIST="$(mktemp /tmp/svm-workdirs.XXXXXX)"
SVM_JOB_LIST="$(mktemp /tmp/svm-jobs.XXXXXX)"
on_exit() { SVM_EXIT_ACTIONS=("$1" "${SVM_EXIT_ACTIONS[@]}"); }
fail_at_exit() { log "FAIL: $*"; SVM_EXIT_FAILED=1; }
run_exit_actions() {
    local rc=$? action d j
    set +e
    while read -r j; do
        scancel "$j" 2>/dev/null
        rm -f -- "/home/$SVM_USER/svm-release.$j"
    done <"$SVM_JOB_LIST"
    rm -f -- "$SVM_JOB_LIST"
    for action in "${SVM_EXIT_ACTIONS[@]}"; do eval "$action"; done
    (( rc == 0 && SVM_EXIT_FAILED )) && rc=1
    while read -r d; do
        if [[ -n "${SVM_KEEP_WORKDIRS:-}" ]]; then log "kept $d"; else rm -rf -- "$d"; fi
    done <"$SVM_WORKDIR_LIST"
    rm -f -- "$SVM_WORKDIR_LIST"
    exit "$rc"
}
trap run_exit_actions EXIT

# A fresh working directory owned by the test user, removed when the test exits.
workdir() {
    local d
    d="$(runuser -u "${1:-$SVM_USER}" -- mktemp -d "/home/${1:-$SVM_USER}/svmtest.XXXXXX")"
    chmod 755 "$d"
    echo "$d" >>"$SVM_WORKDIR_LIST"
    echo "$d"
}

# The VM options every test job uses (direct kernel boot of the test image).
vm_opts() {
    echo "--vm-image=$VM_TEST_IMAGE --vm-kernel=$VM_TEST_KERNEL --vm-initrd=$VM_TEST_INITRD"
}

# vm_batch DIR [SBATCH_OPTION...]: the test user's batch job of DIR/job.sh,
# submitted from DIR (made the user's) as a VM job of the test image (or of
# the image an --vm-image= option names) with the test kernel and initrd;
# prints the job's id. The job is cancelled when the test exits.
vm_batch() {
    local dir="$1" o id image="--vm-image=$VM_TEST_IMAGE"
    shift
    for o in "$@"; do [[ "$o" != --vm-image=* ]] || image=""; done
    chmod 755 "$dir/job.sh"
    chown -R "$SVM_USER:" "$dir"
    id="$(cd "$dir" && as_user "$SVM_USER" sbatch --parsable "$@" ${image:+"$image"} \
        --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh)" || fail "sbatch $* refused the job in $dir"
    echo "$id" >>"$SVM_JOB_LIST"
    log "submitted job $id"
    echo "$id"
}

# held_vm_job DIR WHAT [SBATCH_OPTION...]: DIR/job.sh, then a line "probe
# ready" and a wait (up to 300 s) for release_job, submitted as vm_batch
# does; returns once the output says "probe ready" (WHAT: what the test
# waits for, for a failure's sentence); prints the job's id.
held_vm_job() {
    local dir="$1" what="$2" id
    shift 2
    cat >>"$dir/job.sh" <<'SCRIPT'
echo "probe ready"
i=0; while [ ! -e "$HOME/svm-release.$SLURM_JOB_ID" ] && [ $i -lt 300 ]; do sleep 1; i=$((i+1)); done
SCRIPT
    id="$(vm_batch "$dir" "$@")" || exit 1  # (errexit is off in a command substitution)
    wait_output "$dir/slurm-$id.out" "^probe ready" "$what" 600
    echo "$id"
}

# release_job ID: the held_vm_job ID goes on past its wait.
release_job() { touch "/home/$SVM_USER/svm-release.$1"; }

# sbatch_refused DIR WHAT PATTERN SBATCH_ARG...: the test user's sbatch of
# SBATCH_ARGs, from DIR, is refused with PATTERN (grep) in what it says (WHAT:
# the case, for the log and a failure's sentence).
sbatch_refused() {
    local dir="$1" what="$2" pattern="$3" rc=0 out
    shift 3
    out="$(cd "$dir" && as_user "$SVM_USER" sbatch --parsable "$@" 2>&1)" || rc=$?
    if (( rc == 0 )); then
        echo "$out" >>"$SVM_JOB_LIST"
        fail "$what: sbatch accepted it (job $out)"
    fi
    grep -q -- "$pattern" <<<"$out" || fail "$what: the refusal does not say '$pattern': $out"
    log "$what: $(grep -m1 slurm-vm <<<"$out")"
}

# guest_mpi_program DIR [NAME]: puts the MPI program NAME (default allreduce:
# tests/fixtures/allreduce.c) in DIR, built for the guest image's MPI (Open MPI 4.1, the image is Debian
# 12's), as a user builds theirs for their image: with this host's mpicc on
# Debian 12 (and 13: the same ABI), or, where the host's MPI is another
# (Debian forky's Open MPI 6), the binary that tests/matrix built on its
# Debian 12 host (SVM_GUEST_MPI_PROGRAM).
guest_mpi_program() {
    local name="${2:-allreduce}"
    if [[ -n "${SVM_GUEST_MPI_PROGRAM:-}" && "$name" == allreduce ]]; then
        install -o "$SVM_USER" -m 0755 "$SVM_GUEST_MPI_PROGRAM" "$1/allreduce" || fail "no $SVM_GUEST_MPI_PROGRAM"
        return
    fi
    command -v mpicc >/dev/null || fail "mpicc is missing (tests/cluster/up installs libopenmpi-dev)"
    cp "$(dirname "${BASH_SOURCE[0]}")/../fixtures/$name.c" "$1/$name.c" && chown "$SVM_USER:" "$1/$name.c"
    runuser -u "$SVM_USER" -- mpicc -O2 -o "$1/$name" "$1/$name.c" || fail "mpicc failed"
}

# keep_cluster_config: the cluster's node configuration as it is now comes
# back when the test exits, whatever the test made of it.
keep_cluster_config() {
    local cfg="$SVM_CLUSTER_DIR/etc/slurm-vm.json" kept
    kept="$cfg.kept-by-$(basename "$0" .sh)"
    cp -p "$cfg" "$kept"
    on_exit "mv -f '$kept' '$cfg'"
}

# need_registry: the cluster's registry, and skopeo to push images to it.
need_registry() {
    [[ -n "${SVM_REGISTRY:-}" ]] || fail "the cluster env has no SVM_REGISTRY (tests/cluster/up started no registry)"
    command -v skopeo >/dev/null || fail "skopeo is not installed"
}

# oci_settings JSON: the cluster's "oci" settings (keep_cluster_config
# first) become the object JSON, with the cluster's registry as an insecure
# one (plain HTTP).
oci_settings() {
    local cfg="$SVM_CLUSTER_DIR/etc/slurm-vm.json"
    python3 - "$cfg" "$SVM_REGISTRY" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["oci"] = dict(json.loads(sys.argv[3]), insecure_registries=[sys.argv[2]])
json.dump(c, open(sys.argv[1] + ".new", "w"), indent=1)
PY
    mv -f "$cfg.new" "$cfg"
}

# cluster_setting KEY DEFAULT: a top-level key of the cluster's node configuration.
cluster_setting() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], sys.argv[3]))' \
        "$SVM_CLUSTER_DIR/etc/slurm-vm.json" "$1" "$2"
}

job_field() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1; }

# wait_job ID TIMEOUT: until the job leaves PENDING/RUNNING/CONFIGURING/COMPLETING.
wait_job() {
    local id="$1" t="${2:-600}" s end=$(( $(date +%s) + ${2:-600} ))
    while (( $(date +%s) < end )); do
        s="$(job_field "$id" JobState)"
        case "$s" in
            PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|"") sleep 1 ;;
            *) echo "$s"; return 0 ;;
        esac
    done
    job_report "$id"
    fail "job $id still $(job_field "$id" JobState) after ${t}s (its report above)"
}

# job_report ID: what a stuck job was doing, on stderr, for a failure that
# may not come back: Slurm's view of the job and its steps, its output so
# far, and per node the tails of slurm-vm's log and the guest's console,
# and the job's processes.
job_report() {
    local id="$1" out n f log_dir
    log_dir="$(cluster_setting log_dir /var/log/slurm-vm)"
    {
        echo "----- job $id: scontrol show job"
        scontrol show job "$id" 2>&1 || true
        echo "----- job $id: steps"
        squeue -s -j "$id" -o '%i %j %M %N' 2>&1 || true
        out="$(job_field "$id" StdOut)"
        echo "----- job $id: ${out:-its output} (last 40 lines)"
        [[ -n "$out" ]] && tail -n 40 -- "$out" 2>&1
        for n in "${SVM_NODES[@]}"; do
            f="$log_dir/$n/job_$id.log"
            [[ -e "$f" ]] || continue
            echo "----- job $id on $n: $f (last 40 lines)"
            tail -n 40 -- "$f" 2>&1
            f="$SVM_STATE_ROOT/$n/job_$id/console.log"
            [[ -e "$f" ]] || f="$log_dir/$n/job_$id.console.log"
            echo "----- job $id on $n: $f (last 30 lines)"
            tail -n 30 -- "$f" 2>&1
        done
        echo "----- processes of slurm-vm, ssh and srun"
        ps -eo pid,ppid,etimes,args | grep -E "slurm-vm|ssh |srun|qemu" |
            grep -vE "grep|slurmctld|slurmd |slurmdbd|mariadbd|docker-registry" | cut -c1-240
        echo "----- end of job $id's report"
    } >&2 || true
}

# wait_ended ID STATE TIMEOUT OUTPUT: until job ID ends (wait_job); fails,
# with the job's OUTPUT file, unless it ended STATE.
wait_ended() {
    local st
    st="$(wait_job "$1" "$3")"
    [[ "$st" == "$2" ]] || fail "job $1 ended $st, not $2: $(cat "$4" 2>&1)"
}

# wait_state ID STATE TIMEOUT
wait_state() {
    local id="$1" want="$2" end=$(( $(date +%s) + ${3:-600} )) s
    while (( $(date +%s) < end )); do
        s="$(job_field "$id" JobState)"
        [[ "$s" == "$want" ]] && return 0
        case "$s" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) fail "job $id ended ($s) while waiting for $want" ;; esac
        sleep 0.5
    done
    fail "job $id not $want after ${3:-600}s (state $(job_field "$id" JobState))"
}

# Until no slurm-vm process or state of job ID is left on any node (bounded).
wait_clean() {
    local id="$1" t="${2:-120}" end=$(( $(date +%s) + ${2:-120} ))
    while (( $(date +%s) < end )); do
        if [[ -z "$(leftovers "$id")" ]]; then return 0; fi
        sleep 1
    done
    fail "leftovers of job $id after ${t}s: $(leftovers "$id")"
}

# What is left of job ID (empty = nothing): job dirs, ledgers, overlays,
# keepers, guests, share servers, cgroups, ACL entries on every node, and the
# job's network: its namespaces (with their bridge, VXLAN, guard table), any
# VXLAN of the job's left in a node's underlay namespace and the job's part of
# the node's VXLAN guard there.
leftovers() {
    local id="$1" n out=""
    for n in "${SVM_NODES[@]}"; do
        [[ -e "$SVM_STATE_ROOT/$n/job_$id" ]] && out+=" $n:job_dir"
        [[ -e "$SVM_STATE_ROOT/$n/ledger/job_$id.json" ]] && out+=" $n:ledger"
        [[ -e "/var/lib/slurm-vm/$n/overlays/job_$id" ]] && out+=" $n:overlay"
    done
    [[ -e "$SVM_CLUSTER_DIR/checkpoints/job_$id" ]] && out+=" checkpoint"
    if grep -rlsx "job $id on .*" "$SVM_STATE_ROOT"/leases-* >/dev/null 2>&1; then out+=" lease"; fi
    if ip netns list | grep -qE "^svmj${id}n[0-9]+( |$)"; then out+=" netns"; fi
    for n in "${SVM_NODES[@]}"; do
        ip -n "svmu-$n" link show "svx$(printf %x "$id")" >/dev/null 2>&1 && out+=" $n:vxlan"
        ip netns exec "svmu-$n" nft list chain inet svm_underlay "job_$id" >/dev/null 2>&1 && out+=" $n:vxlan_guard"
    done
    if pgrep -f "slurm-vm-keeper .*--job $id( |$)" >/dev/null; then out+=" keeper"; fi
    if pgrep -f "guest=slurm-vm-$id-" >/dev/null; then out+=" qemu"; fi
    if pgrep -f "^slurm-vm-virtiofsd:job=$id:" >/dev/null; then out+=" virtiofsd"; fi
    if [[ -n "$(find /sys/fs/cgroup -mindepth 4 -maxdepth 4 -name "job_$id" 2>/dev/null | head -n1)" ]]; then
        out+=" cgroup"
    fi
    if [[ -e /dev/kvm ]] && getfacl -n /dev/kvm 2>/dev/null | grep -q "^group:$((0x70000000 + id)):"; then
        out+=" kvm-acl"
    fi
    echo "${out# }"
}

# node_setting NODE KEY JSON: gives NODE a configuration of its own (the
# cluster's, or NODE's own already, with KEY set to the JSON value; the
# prolog and epilog wrappers pick etc/slurm-vm.NODE.json) and prints its
# path; the caller removes it.
node_setting() {
    local cfg="$SVM_CLUSTER_DIR/etc/slurm-vm.$1.json" from="$SVM_CLUSTER_DIR/etc/slurm-vm.json"
    [[ -e "$cfg" ]] && from="$cfg"
    python3 - "$from" "$cfg.tmp" "$2" "$3" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[3]] = json.loads(sys.argv[4])
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
    mv "$cfg.tmp" "$cfg"
    echo "$cfg"
}

# nodes_without_shares: every node a configuration of its own without
# shares (QEMU before 8.2 cannot save a guest with one mounted: resumable
# jobs), removed when the test exits.
nodes_without_shares() {
    local n cfg
    for n in "${SVM_NODES[@]}"; do
        cfg="$(node_setting "$n" shares '[]')"
        on_exit "rm -f $cfg"
    done
}

# wait_saved ID NODES TIMEOUT: until every node of requeued job ID (NODES
# of them) has its entry in the job's checkpoint: the epilogs saved it whole.
wait_saved() {
    local d="$SVM_CLUSTER_DIR/checkpoints/job_$1" end=$(( $(date +%s) + $3 )) i
    for ((i = 0; i < $2; i++)); do
        until [[ -e "$d/node$i.json" ]]; do
            (( $(date +%s) < end )) || fail "job $1 not saved whole after its requeue: $(ls -l "$d" 2>&1)"
            sleep 1
        done
    done
}

# node_shares_9p NODE: NODE serves the guests' shares over 9p (node_setting).
node_shares_9p() { node_setting "$1" shares_via '"9p"'; }

# wait_output FILE PATTERN WHAT TIMEOUT: until PATTERN (grep) is in FILE.
wait_output() {
    local end=$(( $(date +%s) + $4 ))
    until grep -q "$2" "$1" 2>/dev/null; do
        (( $(date +%s) < end )) || fail "$3: '$2' not in $1 after $4 s: $(cat "$1" 2>/dev/null)"
        sleep 0.5
    done
}

# wait_drained NODE TIMEOUT WHY: until NODE is drained; prints its reason.
wait_drained() {
    local end=$(( $(date +%s) + $2 ))
    until [[ "$(sinfo -h -n "$1" -o '%t')" == drain* ]]; do
        (( $(date +%s) < end )) || fail "$1 not drained after $2 s although $3"
        sleep 1
    done
    sinfo -h -n "$1" -o '%E'
}

# wait_idle NODE TIMEOUT WHEN: until NODE is idle again (WHEN: after what).
wait_idle() {
    local end=$(( $(date +%s) + $2 ))
    until [[ "$(sinfo -h -n "$1" -o '%t')" == idle ]]; do
        (( $(date +%s) < end )) || fail "$1 is $(sinfo -h -n "$1" -o '%t') ($(sinfo -h -n "$1" -o '%E')) $3"
        sleep 1
    done
}

no_node_drained() {
    local bad
    bad="$(sinfo -h -N -o '%N %t' | awk '$2 ~ /drain|drng|down|fail/ {print}')"
    [[ -z "$bad" ]] || fail "nodes drained or down: $bad ($(sinfo -h -R))"
}

# power_loss NODE JOB: what a power loss of NODE during JOB leaves, made on
# this host: every process of NODE's Slurm and of the job there killed
# (slurmd, slurmstepd, keeper, QEMU, share servers), what lives in memory
# gone (NODE's state_dir under /run, the job's IP lease, network namespace,
# VXLAN device and cgroups), what lives on disk kept (its overlay). slurmd
# is then started again, as at boot. The kernel's ACL entry on /dev/kvm is
# left (a device node here is the host's): sweep takes it back.
power_loss() {
    local node="$1" id="$2" p pidf="$SVM_CLUSTER_DIR/run/slurmd-$1.pid" ns
    p="$(cat "$pidf" 2>/dev/null || true)"
    [[ -z "$p" ]] || kill -KILL "$p" 2>/dev/null || true
    for p in $(pgrep -f "slurmstepd: \[$id\." || true) $(pgrep -f "slurm-vm-keeper .*--job $id( |$)" || true) \
        $(pgrep -f "guest=slurm-vm-$id-$node" || true) $(pgrep -f "^slurm-vm-virtiofsd:job=$id:" || true); do
        kill -KILL "$p" 2>/dev/null || true
    done
    # Every other process of the job on the node (the extern step's sleep).
    for p in $(cat /sys/fs/cgroup/*/slurm_"$node"/uid_*/job_"$id"/{,*/,*/*/}tasks 2>/dev/null || true); do
        kill -KILL "$p" 2>/dev/null || true
    done
    sleep 1
    find "$SVM_STATE_ROOT/$node" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null || true
    { grep -rlsx "job $id on $node.*" "$SVM_STATE_ROOT"/leases-* || true; } | xargs -r rm -f
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^svmj${id}n[0-9]+$" || true); do ip netns del "$ns"; done
    ip -n "svmu-$node" link del "svx$(printf %x "$id")" 2>/dev/null || true
    ip netns exec "svmu-$node" nft delete table bridge "svm_job_$id" 2>/dev/null || true
    # The node's kernel firewall starts empty after a reboot: its underlay
    # table (every job's chain in it) is gone; the next VM job's prolog makes
    # it again.
    ip netns exec "svmu-$node" nft delete table inet svm_underlay 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        find /sys/fs/cgroup -depth -type d -path "*slurm_$node*/job_$id*" -exec rmdir {} \; 2>/dev/null || true
        [[ -z "$(find /sys/fs/cgroup -mindepth 4 -maxdepth 4 -path "*slurm_$node*" -name "job_$id")" ]] && break
        sleep 1
    done
    (cd / && env SVM_TEST_CLUSTER="$SVM_CLUSTER_DIR" SLURM_CONF="$SLURM_CONF" \
        /usr/sbin/slurmd -f "$SLURM_CONF" -N "$node" </dev/null) ||
        fail "slurmd $node did not start again (log: $SVM_CLUSTER_DIR/log/slurmd-$node.log)"
    return 0
}

# oci_layout DIR LAYER [DIFF_ID]: an OCI image layout in DIR (tag v1, for
# `skopeo copy oci:DIR:v1 ...`) of one image whose one layer is the gzip'd
# tar in the file LAYER (its bytes become a blob; LAYER is left as it is).
# Its config names DIFF_ID as the layer's uncompressed digest, the layer's
# own digest when none is given (a bomb's would have to be decompressed).
oci_layout() {
    python3 - "$@" <<'PY'
import hashlib, json, os, sys
lay, layer_file = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(lay, "blobs", "sha256"))
def blob(data):
    h = hashlib.sha256(data).hexdigest()
    open(os.path.join(lay, "blobs", "sha256", h), "wb").write(data)
    return "sha256:" + h, len(data)
layer, lsize = blob(open(layer_file, "rb").read())
diff_id = sys.argv[3] if len(sys.argv) > 3 else layer
config, csize = blob(json.dumps({"architecture": "amd64", "os": "linux",
                                 "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode())
manifest, msize = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": csize},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": lsize}]}).encode())
json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": manifest, "size": msize, "annotations": {"org.opencontainers.image.ref.name": "v1"}}]},
    open(os.path.join(lay, "index.json"), "w"))
json.dump({"imageLayoutVersion": "1.0.0"}, open(os.path.join(lay, "oci-layout"), "w"))
PY
}
