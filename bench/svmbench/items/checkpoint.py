"""Item 11: a resumable VM job's save at a requeue and its restore, per GiB of
guest memory, against the same guest's boot to ready."""

import json
import os
import re
import time

from ..cluster import RES
from ..util import CLUSTER_DIR, UID, GID, USER, log, med, ratio, read, run, stats, write
from .slurm import SLURM_NODES, live_node_config, user_workdir

# A counting script, as test_requeue's: it goes on where it was when the
# job runs again.
COUNT = "#!/bin/sh\ni=0\nwhile :; do i=$((i + 1)); echo \"count $i\"; sleep 1; done\n"
SIZES_MB = (1500, 2500)  # the job's memory: the guest gets it less memory_overhead_mib


def no_share_configs():
    """Each node a configuration without shares (QEMU cannot save a guest
    with one mounted); the paths made, for removal."""
    made = []
    main = json.loads(read(os.path.join(CLUSTER_DIR, "etc/slurm-vm.json")))
    if not main.get("checkpoint", {}).get("dir"):
        raise RuntimeError("the cluster's configuration has no checkpoint.dir")
    for n in SLURM_NODES:
        f = os.path.join(CLUSTER_DIR, "etc", f"slurm-vm.{n}.json")
        if os.path.exists(f):
            raise RuntimeError(f"{f} exists already (a test's?)")
        write(f, json.dumps(dict(main, shares=[])))
        made.append(f)
    return made, main["checkpoint"]["dir"]


def wait_for(what, pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not within {timeout} s")


def job_field(ctx, jid, fmt):
    return run(["squeue", "-h", "-j", str(jid), "-o", fmt], env=ctx.env).stdout.strip()


def log_ms(node, jid, pattern):
    """The first number `pattern` captures in the node's log of the job."""
    text = read(os.path.join(live_node_config(node)["log_dir"], node, f"job_{jid}.log")) or ""
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def requeued_once(ctx, wd, mem_mb, ckpt):
    """One resumable job of mem_mb: booted, requeued, restored on another node."""
    env = ctx.env
    vm = [f"--vm-image={env['VM_TEST_IMAGE']}", f"--vm-kernel={env['VM_TEST_KERNEL']}",
          f"--vm-initrd={env['VM_TEST_INITRD']}"]
    r = run(["runuser", "-u", USER, "--", "env", f"SLURM_CONF={env['SLURM_CONF']}", "PATH=/usr/bin:/bin", "sbatch",
             "--parsable", "-N1", "-n1", f"--mem={mem_mb}", "--vm-resume=auto",
             "-J", "svm-bench-checkpoint", *vm, "count.sh"], cwd=wd)
    if r.returncode != 0:
        raise RuntimeError("sbatch failed: " + r.stderr.strip())
    jid = int(r.stdout.strip().split(";")[0])
    RES.slurm_jobs.append(jid)
    out = os.path.join(wd, f"slurm-{jid}.out")
    wait_for(f"job {jid} counting", lambda: "count 3\n" in (read(out) or ""), 600)
    first = job_field(ctx, jid, "%N")
    run(["scontrol", "requeue", str(jid)], env=env)
    save = os.path.join(ckpt, f"job_{jid}", "node0.save")
    wait_for(f"job {jid} saved", lambda: os.path.exists(os.path.join(ckpt, f"job_{jid}", "node0.json")), 180)
    size = os.path.getsize(save)
    wait_for(f"job {jid} pending", lambda: job_field(ctx, jid, "%T") == "PENDING", 120)
    run(["scontrol", "update", f"jobid={jid}", "StartTime=now", f"ExcNodeList={first}"], env=env)
    wait_for(f"job {jid} reattached", lambda: "goes on where it was" in (read(out) or ""), 300)
    second = job_field(ctx, jid, "%N")
    run(["scancel", str(jid)], env=env)
    wait_for(f"job {jid} gone", lambda: not job_field(ctx, jid, "%T"), 120)
    got = {"mib": log_ms(first, jid, r"guest memory (\d+) MiB"),
           "boot_ms": log_ms(first, jid, r"guest ready in (\d+) ms"),
           "save_ms": log_ms(first, jid, r"guest saved for the job's next run in (\d+) ms"),
           "restore_ms": log_ms(second, jid, r"restored from its checkpoint in (\d+) ms"),
           "save_bytes": size}
    if None in got.values():
        raise RuntimeError(f"job {jid}: a figure is missing from its logs: {got}")
    log(f"checkpoint job {jid} ({got['mib']:.0f} MiB): boot {got['boot_ms']:.0f} ms, save {got['save_ms']:.0f} ms, "
        f"restore {got['restore_ms']:.0f} ms, {size >> 20} MiB saved")
    return got


def item_checkpoint(ctx, repeat):
    """Item 11: save and restore per GiB of guest memory, against boot to ready."""
    wd = getattr(ctx, "slurm_wd", None) or user_workdir(ctx)
    write(os.path.join(wd, "count.sh"), COUNT, 0o755)
    os.chown(os.path.join(wd, "count.sh"), UID, GID)
    made, ckpt = no_share_configs()
    try:
        runs = [requeued_once(ctx, wd, mb, ckpt) for _ in range(max(1, repeat)) for mb in SIZES_MB]
    finally:
        for f in made:
            os.unlink(f)
    per_gib = {k: stats([x[k] / (x["mib"] / 1024) for x in runs]) for k in ("save_ms", "restore_ms")}
    boot = stats([x["boot_ms"] for x in runs])
    rows = [{k: x[k] for k in ("mib", "boot_ms", "save_ms", "restore_ms")} | {"save_mib": x["save_bytes"] >> 20}
            for x in runs]
    return {"title": "11. A resumable job's guest: save at a requeue and restore, per GiB of guest memory",
            "what": "a counting script's VM job (--vm-resume=auto, no shares) of 1,500 and 2,500 MB, requeued "
                    "with scontrol requeue once it runs: the keeper's save in the epilog (libvirt's save image "
                    "of the paused guest) and, on another node, the keeper's restore, against the same guest's "
                    "boot to ready (direct kernel boot of the test image, TCG)",
            "save_ms_per_gib": per_gib["save_ms"], "restore_ms_per_gib": per_gib["restore_ms"],
            "boot_ms": boot, "runs": rows,
            "ratio": ratio(med(stats([x["restore_ms"] for x in runs])), med(boot)), "target_ratio": None}
