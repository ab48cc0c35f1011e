#!/bin/bash
# Registry images: a disk packaged as KubeVirt's containerDisk (the qcow2 under
# /disk/ of an OCI image) is pushed with skopeo to the cluster's registry
# (Debian's docker-registry, started by tests/cluster/up); jobs with
# --vm-image=docker://... (and oci://...) boot it. Each node pulls it once
# into its cache by digest, shared by concurrent jobs; the VM record's digest
# is the manifest's; a reference the registry lacks is refused by sbatch;
# sweep prunes the cache to its bound.
source "$(dirname "$0")/lib.sh"
need_registry

cfg="$SVM_CLUSTER_DIR/etc/slurm-vm.json"
tmp="$(mktemp -d /var/tmp/svm-oci.XXXXXX)"
on_exit 'rm -rf "$tmp"'
keep_cluster_config
oci_settings '{"cache_max_gib": 20}'

# The containerDisk: one layer holding disk/disk.qcow2 (owned 107:107, as
# KubeVirt's images have it), in an OCI layout, pushed with skopeo.
mkdir -p "$tmp/l/disk"
cp --reflink=auto "$VM_TEST_IMAGE" "$tmp/l/disk/disk.qcow2"
# The same bytes every run (no dates in the tar or the gzip header): the
# registry stores one blob however often the suite runs.
tar --owner=107 --group=107 --mtime=@0 --sort=name -C "$tmp/l" -cf "$tmp/layer.tar" disk
python3 -c 'import gzip, sys; open(sys.argv[2], "wb").write(gzip.compress(open(sys.argv[1], "rb").read(), compresslevel=1, mtime=0))' \
    "$tmp/layer.tar" "$tmp/layer.tar.gz"
oci_layout "$tmp/layout" "$tmp/layer.tar.gz" "sha256:$(sha256sum <"$tmp/layer.tar" | cut -d' ' -f1)"
rm -rf "$tmp/l" "$tmp/layer.tar" "$tmp/layer.tar.gz"
ref="$SVM_REGISTRY/svm/testdisk:v1"
skopeo --insecure-policy copy --quiet --dest-tls-verify=false "oci:$tmp/layout:v1" "docker://$ref" ||
    fail "skopeo could not push the containerDisk to $SVM_REGISTRY"
digest="$(skopeo --insecure-policy inspect --tls-verify=false --no-tags --format '{{.Digest}}' "docker://$ref")"
log "pushed docker://$ref ($digest)"
# The same bytes give the same digest: an entry an earlier run left in a
# node's cache (a run cut short before its sweep) would make this run pull
# nothing. Start from none, as an admin's cleaning would.
for n in node1 node2; do rm -rf "/var/lib/slurm-vm/$n/oci/${digest#sha256:}"; done

wd="$(workdir)"
printf '#!/bin/bash\necho "HOSTNAME=$(hostname)"\n' >"$wd/job.sh"
chmod 755 "$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
kopts="--vm-kernel=$VM_TEST_KERNEL --vm-initrd=$VM_TEST_INITRD"

# Refused at submit: a reference the registry lacks, a malformed one.
rc=0; out="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 --vm-image="docker://$SVM_REGISTRY/svm/nosuch:v1" $kopts job.sh 2>&1)" || rc=$?
[[ $rc -ne 0 ]] && grep -q "slurm-vm: --vm-image=docker://$SVM_REGISTRY/svm/nosuch:v1 cannot be found in its registry" <<<"$out" ||
    fail "a missing registry image was not refused at submit: $out"
log "refused: $(grep -m1 slurm-vm <<<"$out")"
rc=0; out="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 --vm-image="docker://$SVM_REGISTRY/a;b" $kopts job.sh 2>&1)" || rc=$?
[[ $rc -ne 0 ]] && grep -q "is not a registry image reference" <<<"$out" || fail "a malformed reference was accepted: $out"
no_node_drained
pass "sbatch refuses a registry image its registry lacks, and a malformed reference"

# Two jobs at once on node1 (one pull, shared), one on node2 (oci://).
# shellcheck disable=SC2086
j1="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -n1 -w node1 --mem=1500 --vm-image="docker://$ref" $kopts job.sh)"
# shellcheck disable=SC2086
j3="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -n1 -w node1 --mem=1500 --vm-image="docker://$ref" $kopts job.sh)"
# shellcheck disable=SC2086
j2="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -n1 -w node2 --mem=1500 --vm-image="oci://$ref" $kopts job.sh)"
log "jobs $j1 and $j3 on node1, $j2 on node2"
for j in "$j1" "$j2" "$j3"; do
    st="$(wait_job "$j" 900)"
    [[ "$st" == COMPLETED ]] || fail "job $j is $st: $(cat "$wd/slurm-$j.out")"
done
grep -qx "HOSTNAME=node1-vm" "$wd/slurm-$j1.out" || fail "job $j1 did not run in the guest: $(cat "$wd/slurm-$j1.out")"
grep -qx "HOSTNAME=node2-vm" "$wd/slurm-$j2.out" || fail "job $j2 did not run in the guest: $(cat "$wd/slurm-$j2.out")"
comment="$(sacct -n -X -P -j "$j1" -o AdminComment)"
python3 - "$comment" "$digest" "$ref" <<'PY' || fail "job $j1's record does not carry the OCI digest $digest: $comment"
import json, sys
n = json.loads(sys.argv[1])["slurm_vm"]["nodes"]["node1"]
assert n["digest"] == sys.argv[2], n
assert n["source"] == "docker://" + sys.argv[3], n
PY
hex="${digest#sha256:}"
entry="/var/lib/slurm-vm/node1/oci/$hex"
[[ -f "$entry/disk.img" ]] || fail "node1's cache has no $entry/disk.img: $(ls -la /var/lib/slurm-vm/node1/oci 2>&1)"
[[ "$(stat -c '%U %a' "$entry/disk.img")" == "root 644" ]] || fail "$entry/disk.img is $(stat -c '%U %a' "$entry/disk.img")"
cmp -s "$entry/disk.img" "$VM_TEST_IMAGE" || fail "the cached disk is not the pushed one"
[[ "$(ls /var/lib/slurm-vm/node1/oci | wc -l)" == 1 ]] || fail "node1's cache holds more than one entry: $(ls -a /var/lib/slurm-vm/node1/oci)"
pulls="$(cat "/var/log/slurm-vm/node1/job_$j1.log" "/var/log/slurm-vm/node1/job_$j3.log" | grep -c "pulled docker://$ref" || true)"
[[ "$pulls" == 1 ]] || fail "node1 pulled $pulls times for jobs $j1 and $j3 (expected once)"
pass "jobs $j1, $j3 (node1, one pull) and $j2 (node2, oci://) booted docker://$ref; the record's digest is $digest"

# Sweep prunes the cache to its bound (0: only what jobs use).
for j in "$j1" "$j2" "$j3"; do wait_clean "$j" 120; done
oci_settings '{"cache_max_gib": 0}'
out="$("$SVM_BUILD_DIR/admin/slurm-vm" sweep --config "$cfg" --node node1 2>&1)" || fail "sweep failed: $out"
grep -q "registry cache: removed $entry" <<<"$out" || fail "sweep did not prune node1's cache: $out"
[[ ! -e "$entry" ]] || fail "$entry is still there after sweep"
out="$("$SVM_BUILD_DIR/admin/slurm-vm" sweep --config "$cfg" --node node2 2>&1)" || fail "sweep failed on node2: $out"
[[ ! -e "/var/lib/slurm-vm/node2/oci/$hex" ]] || fail "node2's cache still holds $hex after sweep: $out"
no_node_drained
pass "slurm-vm sweep pruned node1's and node2's registry caches to their bound"
