"""The run's resources and their cleanup, the context (cluster environment,
binaries, configuration), job ids, cgroups, and the prolog's and epilog's
environment."""

import itertools
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from .marks import lease_dir_of
from .util import (
    BENCH_SCRATCH, BENCH_STATE, CGROUP_ROOT, CG_NAME, CLUSTER_DIR, GID, JOB_MEM_MIB, REPO, UID, USER, log, read, run,
    write)


# ----------------------------------------------------------------------------
# The run's resources, all released by cleanup() (also on failure/signal)

class Resources:
    def __init__(self):
        self.procs = []          # Popen objects we started (keepers, raw starts, pollers)
        self.bench_jobs = []     # (config, node, job id) to epilog
        self.cgroups = []        # cgroup dirs we made
        self.dirs = []           # directories to delete
        self.slurm_jobs = []     # Slurm job ids to cancel
        self.lock = threading.Lock()

    def add_proc(self, p):
        with self.lock:
            self.procs.append(p)
        return p


RES = Resources()


def cleanup(ctx):
    for jid in RES.slurm_jobs:
        run(["scancel", str(jid)], env=ctx.env)
    for p in RES.procs:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
            except OSError:
                pass
    deadline = time.time() + 15
    for p in RES.procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for cfg, node, jid in RES.bench_jobs:
        epilog(ctx, cfg, node, jid, quiet=True)
    # Guests of ours that somehow survived (named after our job ids / raw names).
    mine = [f"guest=slurm-vm-{jid}-" for _, _, jid in RES.bench_jobs] + ["guest=svm-bench-raw-"]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        cmd = read(f"/proc/{pid}/cmdline").replace("\0", " ")
        if "qemu-system" in cmd and any(m in cmd for m in mine) and BENCH_STATE in cmd:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    for cg in reversed(RES.cgroups):
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
    for d in RES.dirs:
        shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(BENCH_STATE, ignore_errors=True)
    shutil.rmtree(BENCH_SCRATCH, ignore_errors=True)
    if getattr(ctx, "raw_netns", None):
        run(["ip", "netns", "delete", ctx.raw_netns])


# ----------------------------------------------------------------------------
# Context: environment, binaries, configuration

class Ctx:
    pass


def cluster_env():
    f = os.path.join(CLUSTER_DIR, "env.sh")
    if not os.path.exists(f):
        return None
    r = run(["bash", "-c", f'source "{f}" && env -0'])
    env = dict(os.environ)
    for item in r.stdout.split("\0"):
        k, sep, v = item.partition("=")
        if sep:
            env[k] = v
    return env


def bench_build_dir():
    for d in (os.environ.get("SVM_BENCH_BUILD_DIR"), os.environ.get("SVM_BINARY_DIR"),
              os.path.join(REPO, "build-bench")):
        if d:
            return d
    return None


def ensure_bench_binaries(ctx):
    d = ctx.bench_build
    targets = ["svm-bench-raw-start", "svm-bench-devices", "svm-bench-network"]
    paths = {t: os.path.join(d, "bench", t) for t in targets}
    log(f"building {', '.join(targets)} in {d}")
    if not os.path.exists(os.path.join(d, "CMakeCache.txt")):
        r = run(["cmake", "-S", REPO, "-B", d])
        if r.returncode != 0:
            ctx.errors.append("cmake configure of the bench build failed: " + r.stderr[-500:])
    r = run(["cmake", "--build", d, "--target"] + targets + ["-j1"])
    if r.returncode != 0:
        ctx.errors.append("building the bench executables failed: " + (r.stdout + r.stderr)[-800:])
    return {t: (p if os.access(p, os.X_OK) else None) for t, p in paths.items()}


def bench_config(ctx):
    cfg = json.loads(read(os.path.join(CLUSTER_DIR, "etc/slurm-vm.json")))
    cfg["state_dir"] = BENCH_STATE + "/%n"
    cfg["log_dir"] = BENCH_STATE + "/log"   # the bench jobs' admin logs: not among the live cluster's
    cfg["overlay_dir"] = BENCH_SCRATCH + "/%n/overlays"
    underlay = cfg.get("network", {}).get("underlay")
    if isinstance(underlay, dict):
        # The node scaling's synthetic node lists name nodes up to node241:
        # the prolog plans a VXLAN peer for each, so each needs an address.
        for k in range(1, 242):
            underlay.setdefault(f"node{k}", f"10.216.{k // 256}.{k % 256}")
    path = os.path.join(ctx.tmp, "slurm-vm-bench.json")
    write(path, json.dumps(cfg, indent=1) + "\n")
    ctx.net = cfg.get("network", {})
    ctx.log_dir = cfg["log_dir"]
    ctx.lease_dir = lease_dir_of(BENCH_STATE + "/node", ctx.net)
    return path


def live_max_job_id(ctx):
    best = 0
    r = run(["scontrol", "show", "config"], env=ctx.env)
    r = run(["squeue", "-h", "-o", "%i"], env=ctx.env)
    for line in r.stdout.split():
        if line.split("_")[0].isdigit():
            best = max(best, int(line.split("_")[0]))
    r = run(["sacct", "-a", "-X", "-n", "-P", "-o", "jobid", "-S", "now-7days"], env=ctx.env)
    for line in r.stdout.split():
        if line.split("_")[0].split(".")[0].isdigit():
            best = max(best, int(line.split("_")[0].split(".")[0]))
    return best


class JobIds:
    """Bench job ids 900000+, chosen so that their guest addresses
    (A.B.(id % 254 + 1).10) sit opposite the live cluster's recent job ids on
    the shared bridge: slot s always maps to residue r0 + s."""

    def __init__(self, live_max):
        self.r0 = (live_max + 120) % 254
        self.count = {}

    def take(self, slot=0):
        r = (self.r0 + slot) % 254
        k = self.count.get(slot, 0)
        self.count[slot] = k + 1
        base = 900000 + (r - 900000 % 254) % 254
        return base + 254 * (10 + k)


def guest_ip(ctx, jid, index=0):
    """lib/host/guest_net.hpp segment_address: every job has its own segment."""
    a, b = ctx.net.get("prefix", "10.213.0.0/16").split("/")[0].split(".")[:2]
    off = index + 10
    return f"{a}.{b}.{off >> 8}.{off & 255}"


RAW_NETNS = "svmbench-raw"
# Raw starts share that namespace: each gets a tap of its own (a job's is
# "svmtap" in the job's own namespace), so that several can run at once.
RAW_TAPS = itertools.count()


def raw_netns(ctx):
    """The raw baseline's network: a bridge named as the job's (svmbr) with the
    host side's address, in a namespace of the benchmark's own (the job's own
    namespace is gone with the job)."""
    if not getattr(ctx, "raw_netns", None):
        a, b = ctx.net.get("prefix", "10.213.0.0/16").split("/")[0].split(".")[:2]
        run(["ip", "netns", "delete", RAW_NETNS])
        for c in (["ip", "netns", "add", RAW_NETNS], ["ip", "-n", RAW_NETNS, "link", "set", "lo", "up"],
                  ["ip", "-n", RAW_NETNS, "link", "add", "svmbr", "type", "bridge"],
                  ["ip", "-n", RAW_NETNS, "addr", "add", f"{a}.{b}.255.254/16", "dev", "svmbr"],
                  ["ip", "-n", RAW_NETNS, "link", "set", "svmbr", "up"]):
            r = run(c)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(c)}: {r.stderr.strip()}")
        ctx.raw_netns = RAW_NETNS
    return ctx.raw_netns


# ----------------------------------------------------------------------------
# cgroups: each bench job's keeper and each raw start get the same cpuset and
# memory limit (1 CPU, JOB_MEM_MIB), as a 1-CPU Slurm job's extern step would.

def make_cgroup(name, cpu):
    paths = []
    cs = os.path.join(CGROUP_ROOT, "cpuset", CG_NAME)
    mem = os.path.join(CGROUP_ROOT, "memory", CG_NAME)
    for parent in (cs, mem):
        if not os.path.isdir(parent):
            os.mkdir(parent)
            RES.cgroups.append(parent)
    if read(os.path.join(cs, "cpuset.cpus")).strip() == "":
        write(os.path.join(cs, "cpuset.cpus"), read(os.path.join(CGROUP_ROOT, "cpuset/cpuset.cpus")).strip())
        write(os.path.join(cs, "cpuset.mems"), read(os.path.join(CGROUP_ROOT, "cpuset/cpuset.mems")).strip())
    c, m = os.path.join(cs, name), os.path.join(mem, name)
    for d in (c, m):
        if not os.path.isdir(d):
            os.mkdir(d)
            RES.cgroups.append(d)
        paths.append(d)
    write(os.path.join(c, "cpuset.cpus"), str(cpu))
    write(os.path.join(c, "cpuset.mems"), read(os.path.join(cs, "cpuset.mems")).strip())
    write(os.path.join(m, "memory.limit_in_bytes"), str(JOB_MEM_MIB << 20))
    return paths


def into_cgroups(paths):
    def fn():
        for p in paths:
            with open(os.path.join(p, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    return fn


# ----------------------------------------------------------------------------
# The plugin's path at prolog level: prolog, keeper, epilog


def prolog_env(ctx, node, jid, workdir):
    return {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "SLURM_JOB_ID": str(jid), "SLURM_JOB_UID": str(UID), "SLURM_JOB_GID": str(GID),
        "SLURM_JOB_USER": USER, "SLURMD_NODENAME": node, "SLURM_NODELIST": node,
        "SLURM_JOB_WORK_DIR": workdir,
        "SPANK_SLURM_VM_IMAGE": ctx.env["VM_TEST_IMAGE"],
        "SPANK_SLURM_VM_KERNEL": ctx.env["VM_TEST_KERNEL"],
        "SPANK_SLURM_VM_INITRD": ctx.env["VM_TEST_INITRD"],
    }


def epilog(ctx, cfg, node, jid, quiet=False):
    t0 = time.time()
    r = run([ctx.tools["epilog"], "--config", cfg],
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_JOB_ID": str(jid), "SLURMD_NODENAME": node})
    dt = (time.time() - t0) * 1000
    if r.returncode != 0 and not quiet:
        ctx.errors.append(f"epilog of bench job {jid} exited {r.returncode}: {r.stderr.strip()[-300:]}")
    return dt, r.returncode
