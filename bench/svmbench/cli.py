"""The command line: bench/run's options, the items in order, the report's files."""

import argparse
import datetime
import fcntl
import grp
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time

from .cluster import (
    Ctx, JobIds, RES, bench_build_dir, bench_config, cleanup, cluster_env, ensure_bench_binaries, epilog,
    live_max_job_id, prolog_env)
from .items.concurrency import item_concurrency
from .items.host import item_devices, item_kvm, item_network
from .items.image_step import item_image_step
from .items.checkpoint import item_checkpoint
from .items.mpi_launch import item_mpi_launch
from .items.scaling import item_node_scaling_prolog, item_node_scaling_slurm
from .items.shares import item_shares
from .items.slurm import SLURM_NODES, item_time_to_user_code, item_time_to_user_code_stock
from .items.start import item_start_and_teardown
from .raw import raw_qemu_conf
from .report import machine, markdown
from .text import verdict
from .util import BENCH_STATE, CLUSTER_DIR, Interrupted, REPO, T_START, USER, log, on_signal, run, write
from .watch import ProcWatch
from .waterfall import MISSING_LINES


# ----------------------------------------------------------------------------

KNOWN_ITEMS = {"start_overhead", "teardown", "prolog_level", "time_to_user_code", "slurm", "concurrency", "shares",
               "time_to_user_code_stock", "devices", "network", "guest_efficiency", "image_step",
               "mpi_launch", "checkpoint"}


def parse_args():
    ap = argparse.ArgumentParser(prog="bench/run", description="slurm-vm benchmark (see bench/README.md)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of each measurement (default 3)")
    ap.add_argument("--quick", action="store_true",
                    help="one repetition of items 1, 2, 5, 6 only (about a minute); items 3 and 4 are skipped")
    ap.add_argument("--only", default="",
                    help="comma-separated items to measure, e.g. time_to_user_code (a partial report, never latest)")
    ap.add_argument("--node", default="node1", help="node name the prolog-level runs use (default node1)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"), help="report directory")
    ap.add_argument("--keep-logs", action="store_true", help="keep the run's scratch directory (logs)")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    return ap, a


def take_lock():
    """One run at a time on this host (they share /run/slurm-vm-bench and the
    cgroups): the lock's file, held while it stays open; None when taken."""
    lock = open(BENCH_STATE + ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("bench/run: another bench/run is in progress on this host", file=sys.stderr)
        return None
    return lock


def new_ctx(a):
    """The run's context, or None when the local cluster is not set up."""
    ctx = Ctx()
    ctx.errors = []
    ctx.env = cluster_env()
    if ctx.env is None or not ctx.env.get("VM_TEST_IMAGE"):
        print(f"bench/run: the local cluster is not set up ({CLUSTER_DIR}/env.sh with VM_TEST_IMAGE missing): "
              "run tests/cluster/up", file=sys.stderr)
        return None
    tools = ctx.tools_dir = ctx.env.get("SVM_BUILD_DIR") or os.path.join(REPO, "build")
    ctx.tools = {"prolog": os.path.join(tools, "prolog/slurm-vm-prolog"),
                 "keeper": os.path.join(tools, "libexec/slurm-vm-keeper"),
                 "epilog": os.path.join(tools, "epilog/slurm-vm-epilog"),
                 "exec": os.path.join(tools, "libexec/slurm-vm-exec")}
    ctx.waterfall = {}
    ctx.probes = []
    ctx.watch = ProcWatch()
    ctx.watch.start()
    ctx.node = a.node
    ctx.tmp = tempfile.mkdtemp(prefix="svm-bench.")
    os.chmod(ctx.tmp, 0o755)
    ctx.bench_build = bench_build_dir()
    return ctx


def new_report(ctx, a, repeat):
    argv = ["bench/run"] + sys.argv[1:]
    return {"schema": "slurm-vm-bench/1", "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(argv), "quick": a.quick, "repeat": repeat, "items": {}, "errors": ctx.errors,
            "waterfall": ctx.waterfall, "node_scaling": {}, "caps_probes": ctx.probes,
            "missing_log_lines": [{"phase": k, "what": v} for k, v in MISSING_LINES]}


def prepare(ctx, rep):
    """Leftovers of an earlier run removed, the bench binaries and
    configuration, job ids, the test user's directory; returns the missing
    helpers."""
    tools = ctx.tools_dir
    rep["machine"] = machine(ctx)
    rep["tools_build_dir"] = os.path.relpath(tools, REPO) if tools.startswith(REPO + "/") else tools
    if os.path.exists(BENCH_STATE):
        log(f"removing leftovers of an earlier run in {BENCH_STATE}")
        for n in os.listdir(BENCH_STATE):
            led = os.path.join(BENCH_STATE, n, "ledger")
            for f in (os.listdir(led) if os.path.isdir(led) else []):
                m = re.match(r"job_(\d+)\.json$", f)
                if m:
                    RES.bench_jobs.append((None, n, int(m.group(1))))
    ctx.bins = ensure_bench_binaries(ctx)
    ctx.cfg = bench_config(ctx)
    RES.bench_jobs[:] = [(ctx.cfg, n, j) for _, n, j in RES.bench_jobs]
    for _, n, j in list(RES.bench_jobs):
        epilog(ctx, ctx.cfg, n, j, quiet=True)
    RES.bench_jobs.clear()
    ctx.ids = JobIds(live_max_job_id(ctx))
    ctx.workdir = run(["runuser", "-u", USER, "--", "mktemp", "-d", f"/home/{USER}/svmbench.XXXXXX"]).stdout.strip()
    RES.dirs.append(ctx.workdir)
    os.chmod(ctx.workdir, 0o755)
    missing = [k for k, p in ctx.tools.items() if not os.access(p, os.X_OK)]
    if missing:
        ctx.errors.append(f"missing {', '.join(missing)} in {tools}")
    return missing


def warm_nodes(ctx):
    """Warm-up: the first prolog on a node probes QEMU's capabilities
    (seconds), runs qemu-img on the image (its verdict and the overlay are then
    kept per image version); a node that has run a VM job with the image
    before has those. Not timed. Returns the path of a copy of the job's
    qemu.conf."""
    conf = os.path.join(ctx.tmp, "warmup-qemu.conf")
    # The node-scaling runs use node1..node3: each node's state directory has its own cache.
    for wnode in [ctx.node] + [n for n in SLURM_NODES if n != ctx.node]:
        jid = ctx.ids.take(0)
        log(f"warm-up: prolog + epilog of bench job {jid} on {wnode} (fills the node's caches)")
        RES.bench_jobs.append((ctx.cfg, wnode, jid))
        # On CPU 0, where the measured keepers run: libvirt takes cached capabilities probed on
        # another CPU as stale (its CPUID data differ) and probes again.
        r = run([ctx.tools["prolog"], "--config", ctx.cfg], env=prolog_env(ctx, wnode, jid, ctx.workdir),
                preexec_fn=lambda: os.sched_setaffinity(0, {0}))
        src = os.path.join(BENCH_STATE, wnode, f"job_{jid}", "libvirt/etc/qemu.conf")
        if wnode == ctx.node and os.path.exists(src):
            shutil.copy(src, conf)
        epilog(ctx, ctx.cfg, wnode, jid)
        if r.returncode != 0:
            ctx.errors.append(f"warm-up prolog on {wnode} failed: " + r.stderr.strip()[-300:])
    return conf


def warm_raw_caps(ctx, rep, conf):
    """The raw baseline's own capabilities cache, filled once (libvirt probes
    lazily: only a query for capabilities, or a domain start, makes it probe
    QEMU and write the cache)."""
    ctx.raw_caps = os.path.join(BENCH_STATE, "raw-caps")
    if not (ctx.bins.get("svm-bench-raw-start") and os.path.exists(conf)):
        return
    log("warm-up: filling the raw baseline's QEMU capabilities cache")
    raw_qemu_conf(conf, conf + ".raw", grp.getgrnam("kvm").gr_gid)
    w = run([ctx.bins["svm-bench-raw-start"], "--warm-caps", ctx.raw_caps, "--qemu-conf", conf + ".raw"],
            preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    cached = os.listdir(os.path.join(ctx.raw_caps, "cache/qemu/capabilities")) \
        if os.path.isdir(os.path.join(ctx.raw_caps, "cache/qemu/capabilities")) else []
    if w.returncode != 0 or not cached:
        ctx.errors.append("could not fill the raw baseline's capabilities cache: " + w.stderr.strip()[-300:])
    rep["caps_cache"] = {
        "raw_baseline_cached_files": len(cached),
        "plugin_cache_files": len(os.listdir(os.path.join(BENCH_STATE, ctx.node,
                                                          "libvirt-caps/cache/qemu/capabilities")))
        if os.path.isdir(os.path.join(BENCH_STATE, ctx.node, "libvirt-caps/cache/qemu/capabilities"))
        else 0}


class Items:
    """Runs the items the command line asks for, each into the report; an
    item that fails is named in the report and the others still run."""

    def __init__(self, ctx, rep, a, only, missing):
        self.ctx, self.rep, self.a, self.only, self.missing = ctx, rep, a, only, missing
        self.repeat = 1 if a.quick else a.repeat
        self.measured = 0

    def want(self, *keys):
        return not self.only or any(k in self.only for k in keys)

    def attempt(self, key, fn, dest=None):
        dest = self.rep["items"] if dest is None else dest
        try:
            res = fn()
            if isinstance(res, tuple):
                for k, v in zip(key, res):
                    v["met"] = verdict(v)
                    dest[k] = v
            else:
                res["met"] = verdict(res)
                dest[key] = res
            self.measured += 1
        except Interrupted:
            raise
        except Exception as e:  # noqa: BLE001 - the report says what could not be measured
            msg = f"{e}"
            log(f"could not measure {key}: {msg}")
            for k in (key if isinstance(key, tuple) else (key,)):
                dest[k] = {"error": msg}
            self.ctx.errors.append(f"{key}: {msg}")

    def run_all(self):
        ctx, rep, a, repeat, missing = self.ctx, self.rep, self.a, self.repeat, self.missing
        have_raw = bool(ctx.bins.get("svm-bench-raw-start"))
        if self.want("start_overhead", "teardown"):
            if not missing and have_raw:
                self.attempt(("start_overhead", "teardown"), lambda: item_start_and_teardown(ctx, repeat))
            else:
                rep["items"]["start_overhead"] = rep["items"]["teardown"] = {"error": "binaries missing"}
        ns = rep["node_scaling"]
        if not missing and self.want("prolog_level"):
            self.attempt("prolog_level", lambda: item_node_scaling_prolog(
                ctx, repeat, synthetic=() if a.quick else (16, 64, 241)), ns)
        if not missing and self.want("image_step"):
            self.attempt("image_step", lambda: item_image_step(ctx, repeat))
        if a.quick:
            self.skip_slurm()
        elif not missing and have_raw:
            self.run_slurm()
        if self.want("devices"):
            self.attempt("devices", lambda: item_devices(ctx, 1 if a.quick else 5))
        if self.want("network"):
            self.attempt("network", lambda: item_network(ctx, 2 if a.quick else 5))
        if self.want("guest_efficiency"):
            self.attempt("guest_efficiency", lambda: item_kvm(ctx, a.quick))

    def skip_slurm(self):
        items = self.rep["items"]
        items["time_to_user_code"] = {"skipped": "--quick (needs Slurm jobs, about a minute each)"}
        items["concurrency"] = {"skipped": "--quick"}
        items["shares"] = {"skipped": "--quick (needs Slurm jobs)"}
        items["time_to_user_code_stock"] = {"skipped": "--quick (needs Slurm jobs)"}
        items["mpi_launch"] = {"skipped": "--quick (needs a Slurm job)"}
        items["checkpoint"] = {"skipped": "--quick (needs Slurm jobs)"}
        self.ctx.waterfall["slurm"] = {"skipped": "--quick (needs Slurm jobs)"}
        self.rep["node_scaling"]["slurm"] = {"skipped": "--quick (needs Slurm jobs)"}

    def run_slurm(self):
        ctx, repeat = self.ctx, self.repeat
        few = max(1, min(repeat, 2))
        if self.want("time_to_user_code"):
            self.attempt("time_to_user_code", lambda: item_time_to_user_code(ctx, repeat))
        if self.want("slurm"):
            self.attempt("slurm", lambda: item_node_scaling_slurm(ctx, repeat), self.rep["node_scaling"])
        if self.want("concurrency"):
            self.attempt("concurrency", lambda: item_concurrency(ctx, few))
        if self.want("shares"):
            self.attempt("shares", lambda: item_shares(ctx, few))
        if self.want("time_to_user_code_stock"):
            self.attempt("time_to_user_code_stock", lambda: item_time_to_user_code_stock(ctx, few))
        if self.want("mpi_launch"):
            self.attempt("mpi_launch", lambda: item_mpi_launch(ctx, repeat))
        if self.want("checkpoint"):
            self.attempt("checkpoint", lambda: item_checkpoint(ctx, few))


def finish(ctx, rep, a):
    """Everything of the run removed (also after a failure or a signal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    log("cleaning up")
    if a.keep_logs and os.path.isdir(os.path.join(BENCH_STATE, "log")):
        shutil.copytree(os.path.join(BENCH_STATE, "log"), os.path.join(ctx.tmp, "job-logs"), dirs_exist_ok=True)
    cleanup(ctx)
    ctx.watch.stop()
    rep["proc_watch"] = {"scans": ctx.watch.scans, "interval_ms": ctx.watch.interval * 1000,
                         "cpu_s": round(ctx.watch.busy_s, 2)}
    try:
        os.unlink(BENCH_STATE + ".lock")
    except OSError:
        pass
    if not a.keep_logs:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    else:
        log(f"logs kept in {ctx.tmp}")


def write_report(rep, a, only):
    """latest.{md,json} and a dated copy (only the dated copy for --only);
    returns the Markdown."""
    rep["elapsed_s"] = round(time.time() - T_START, 1)
    os.makedirs(a.out, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    text_json = json.dumps(rep, indent=1, default=str) + "\n"
    text_md = markdown(rep) + "\n"
    bases = [stamp + "-only"] if only else ["latest", stamp + ("-quick" if a.quick else "")]
    for base in bases:
        write(os.path.join(a.out, base + ".json"), text_json)
        write(os.path.join(a.out, base + ".md"), text_md)
    log(f"report: {os.path.join(a.out, bases[0] + '.md')} (and .json" + (")" if only else f", {stamp})"))
    return text_md


def main():
    ap, a = parse_args()
    if os.geteuid() != 0:
        print("bench/run: must run as root (prolog, keeper and epilog are root helpers)", file=sys.stderr)
        return 1
    lock = take_lock()
    if lock is None:
        return 3
    only = {x.strip() for x in a.only.split(",") if x.strip()}
    if only - KNOWN_ITEMS:
        ap.error(f"--only: unknown item(s) {', '.join(sorted(only - KNOWN_ITEMS))} "
                 f"(known: {', '.join(sorted(KNOWN_ITEMS))})")
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    ctx = new_ctx(a)
    if ctx is None:
        return 1
    rep = new_report(ctx, a, 1 if a.quick else a.repeat)
    items = None
    try:
        missing = prepare(ctx, rep)
        if not missing:
            warm_raw_caps(ctx, rep, warm_nodes(ctx))
        items = Items(ctx, rep, a, only, missing)
        items.run_all()
    except Interrupted as e:
        ctx.errors.append(f"interrupted ({e}); partial report")
        log(f"interrupted ({e}); cleaning up")
    finally:
        finish(ctx, rep, a)
    print(write_report(rep, a, only))
    return 0 if items and items.measured > 0 else 1
