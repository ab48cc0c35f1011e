#!/bin/bash
# bench/run --quick runs on the local cluster and writes a well-formed report
# (Markdown and JSON, latest and dated), and leaves nothing behind. It checks
# the form only, never the figures: the benchmark is not a test of speed.
source "$(dirname "$0")/lib.sh"

repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp -d /tmp/svm-bench-quick.XXXXXX)"
on_exit 'rm -rf "$out"'

log "bench/run --quick (report into a scratch directory)"
rc=0
timeout -k 10 300 "$repo/bench/run" --quick --out "$out" >"$out/stdout" 2>"$out/stderr" || rc=$?
if [[ "$rc" == 3 ]]; then log "SKIP: another bench/run is in progress on this host"; exit 77; fi
[[ "$rc" == 0 ]] || fail "bench/run --quick exited $rc: $(tail -n 20 "$out/stderr")"

for f in latest.md latest.json; do
    [[ -s "$out/$f" ]] || fail "no $f in the report directory"
done
ls "$out"/20*-quick.json >/dev/null 2>&1 || fail "no dated JSON copy"
ls "$out"/20*-quick.md >/dev/null 2>&1 || fail "no dated Markdown copy"

python3 - "$out/latest.json" <<'PY' || fail "latest.json is not a well-formed report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "slurm-vm-bench/1", r.get("schema")
assert r["quick"] is True and r["repeat"] == 1
for k in ("cpu_model", "nproc", "accelerator", "versions"):
    assert k in r["machine"], k
items = r["items"]
for k in ("start_overhead", "teardown", "time_to_user_code", "concurrency", "devices", "guest_efficiency",
          "image_step"):
    assert k in items, "missing item " + k
    it = items[k]
    assert it.get("error") or it.get("skipped") or it.get("plugin_ms") or it.get("scenarios") \
        or it.get("status"), "item %s has neither figures nor a reason" % k
for k in ("start_overhead", "teardown"):
    it = items[k]
    if "plugin_ms" in it:
        for s in (it["plugin_ms"], it["raw_ms"]):
            assert s["min"] <= s["median"] <= s["max"], s
        assert it["ratio"] > 0 and it["met"] in (True, False)
assert items["devices"].get("restored") is True, "device layer: tree not restored"
it = items["image_step"]
if "rows" in it:
    for n in ("1", "3"):
        for k in ("warm_image_ms", "cold_image_ms", "warm_other_ms", "by_hand_qemu_img_ms"):
            s = it["rows"][n][k]
            assert s["min"] <= s["median"] <= s["max"], (n, k, s)
    assert it["digest"]["digest_ms"]["n"] == it["digest"]["sha256sum_ms"]["n"] >= 1, it["digest"]
    assert it["model"]["nodes"] == 1000 and it["model"]["bytes_read_from_the_image"]["digest"] > 0
assert "kvm_usable" in items["guest_efficiency"]
PY
grep -q '^| # | figure | slurm-vm | baseline (same run) | ratio | target | met |$' "$out/latest.md" \
    || fail "latest.md has no summary table"

# Nothing of the benchmark is left.
[[ ! -e /run/slurm-vm-bench ]] || fail "/run/slurm-vm-bench is left behind"
if pgrep -f "slurm-vm-keeper --config .*slurm-vm-bench.json" >/dev/null; then fail "a bench keeper is left"; fi
if pgrep -f "guest=svm-bench-raw-" >/dev/null; then fail "a raw bench guest is left"; fi
if pgrep -f "qemu-system.*/run/slurm-vm-bench/" >/dev/null; then fail "a bench guest is left"; fi
if pgrep -f "bench/svm-bench-raw-start" >/dev/null; then fail "svm-bench-raw-start is left"; fi
for d in /sys/fs/cgroup/cpuset/slurm-vm-bench /sys/fs/cgroup/memory/slurm-vm-bench; do
    [[ ! -e "$d" ]] || fail "cgroup $d is left"
done
no_node_drained
pass "bench/run --quick wrote a well-formed report in $(( $(date +%s) - T0 ))s; nothing left behind"
