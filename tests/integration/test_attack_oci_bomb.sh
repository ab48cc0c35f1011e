#!/bin/bash
# Attack (issue: root never does unbounded work on a user's bytes): a user
# pushes to a registry a containerDisk whose layer is a gzip bomb (a few MiB
# that decompress to 1.5 GiB) and one whose layer floods tar with entries,
# and runs jobs with them; each node's root prolog pulls and reads them. Each
# job must fail with one sentence naming the bound (oci.max_layer_gib,
# oci.max_layer_entries), no node may drain and nothing of the pull may stay
# in the node's cache. Then another job's pull of an image that never ends
# (its per-image lock held) must not hold a prolog past oci.timeout_s: the
# job fails with "resubmit", the node stays up.
source "$(dirname "$0")/lib.sh"
need_registry

tmp="$(mktemp -d /var/tmp/svm-oci-bomb.XXXXXX)"
keep_cluster_config
holder=""
cleanup() {
    [[ -n "$holder" ]] && kill "$holder" 2>/dev/null
    rm -rf "$tmp"
}
on_exit cleanup
set_oci() { # timeout_s
    oci_settings '{"cache_max_gib": 20, "max_layer_gib": 1, "max_layer_entries": 200, "timeout_s": '"$1"'}'
}
set_oci 240

# push KIND TAG: an image whose one layer is a bomb of that kind.
push() {
    python3 - "$tmp/$1.layer.gz" "$1" <<'PY'
import gzip, io, sys, tarfile
out, kind = sys.argv[1], sys.argv[2]
if kind == "size":
    # disk/disk.img: a tar header, 1.5 GiB of zeros, the end: gzip members
    # of 64 MiB of zeros each, compressed once (a multi-member gzip stream).
    info = tarfile.TarInfo("disk/disk.img"); info.size = 1536 << 20
    head = info.tobuf(format=tarfile.GNU_FORMAT)
    chunk = gzip.compress(b"\0" * (64 << 20), compresslevel=9, mtime=0)
    layer = gzip.compress(head, mtime=0) + chunk * 24 + gzip.compress(b"\0" * 1024, mtime=0)
else:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for i in range(5000):
            t.addfile(tarfile.TarInfo("etc/f%d" % i))
        d = tarfile.TarInfo("disk/disk.img"); d.size = 4
        t.addfile(d, io.BytesIO(b"QFI\xfb"))
    layer = gzip.compress(buf.getvalue(), mtime=0)
open(out, "wb").write(layer)
PY
    oci_layout "$tmp/$1" "$tmp/$1.layer.gz"
    skopeo --insecure-policy copy --quiet --dest-tls-verify=false "oci:$tmp/$1:v1" "docker://$SVM_REGISTRY/svm/bomb-$1:v1" ||
        fail "skopeo could not push the $1 bomb to $SVM_REGISTRY"
    skopeo --insecure-policy inspect --tls-verify=false --no-tags --format '{{.Digest}}' "docker://$SVM_REGISTRY/svm/bomb-$1:v1"
}
size_digest="$(push size)"
entries_digest="$(push entries)"
log "pushed the bombs: size $size_digest ($(du -sh "$tmp/size" | cut -f1) in all), entries $entries_digest"

wd="$(workdir)"
printf '#!/bin/sh\necho RAN\n' >"$wd/job.sh"
chown -R "$SVM_USER:" "$wd"
cache=/var/lib/slurm-vm/node1/oci

# run_refused TAG PATTERN WHAT: a job of the bomb fails with PATTERN in its
# output, in one line; the node stays up; nothing of the pull stays.
run_refused() {
    local id st t0=$SECONDS
    id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node1 --mem=1500 \
        --vm-image="docker://$SVM_REGISTRY/svm/bomb-$1:v1" --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh)"
    st="$(wait_job "$id" 300)"
    [[ "$st" == FAILED ]] || fail "job $id ($3) is $st: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
    grep -q "$2" "$wd/slurm-$id.out" || fail "job $id ($3) does not say '$2': $(cat "$wd/slurm-$id.out")"
    [[ "$(grep -c "$2" "$wd/slurm-$id.out")" == 1 ]] || fail "job $id's reason is not one line"
    grep -qx RAN "$wd/slurm-$id.out" && fail "job $id ($3) ran"
    wait_clean "$id" 60
    no_node_drained
    compgen -G "$cache/.pull-*" >/dev/null && fail "a pull of job $id is left in $cache: $(ls -a "$cache")"
    [[ ! -e "$cache/${4#sha256:}" ]] || fail "job $id's image is in the cache"
    log "job $id ($3) failed in $((SECONDS - t0)) s: $(grep -m1 "$2" "$wd/slurm-$id.out")"
}
run_refused size "a layer of the image decompresses to more than 1024 MiB" "gzip bomb" "$size_digest"
pass "a gzip bomb's layer is refused past oci.max_layer_gib, no node drained, nothing left"
run_refused entries "a layer of the image holds more than 200 entries" "entry flood" "$entries_digest"
pass "a layer of 5,000 entries is refused past oci.max_layer_entries, no node drained, nothing left"

# Another job's pull of the same image that does not end: its per-image
# lock held (as a pull holds it) past oci.timeout_s (20 s).
set_oci 20
mkdir -p "$cache"
python3 -c 'import fcntl, sys, time; f = open(sys.argv[1], "w"); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(300)' \
    "$cache/.lock-$(cut -c8-23 <<<"$size_digest")" &
holder=$!
sleep 2
run_refused size "this node is still pulling the image for another job after 20 s; resubmit the job" "lock held" "$size_digest"
kill "$holder"
wait "$holder" 2>/dev/null || true
holder=""
pass "a prolog waits for another job's pull of its image at most oci.timeout_s, then the job fails, no drain"
