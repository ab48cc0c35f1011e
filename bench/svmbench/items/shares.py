"""Item 7: share throughput (virtio-fs and 9p against the host)."""

import json
import os
import re
import time

from ..cluster import RES
from ..text import short
from ..util import CLUSTER_DIR, GID, UID, USER, log, med, ratio, read, run, stats, write


SHARE_MIB = 256
SHARE_SCRIPT = f"""#!/bin/sh
# slurm-vm benchmark: share throughput in the submit directory.
cd "$SLURM_SUBMIT_DIR" || exit 3
awk -v d="$PWD" -v p="$(dirname "$PWD")" '$2 == d || $2 == p {{print "fs", $3; exit}}' /proc/mounts
t0=$(date +%s.%N); cat in.bin >/dev/null; t1=$(date +%s.%N)
dd if=/dev/zero of=out.bin bs=1M count={SHARE_MIB} conv=fsync 2>/dev/null; t2=$(date +%s.%N)
echo "read $t0 $t1"
echo "write $t1 $t2"
rm -f out.bin
"""


def share_job(ctx, wd, node):
    """One job on `node` running SHARE_SCRIPT; its file system and MiB/s."""
    env = ctx.env
    vm = [f"--vm-image={env['VM_TEST_IMAGE']}", f"--vm-kernel={env['VM_TEST_KERNEL']}",
          f"--vm-initrd={env['VM_TEST_INITRD']}"]
    r = run(["runuser", "-u", USER, "--", "env", f"SLURM_CONF={env['SLURM_CONF']}", "PATH=/usr/bin:/bin",
             "sbatch", "--parsable", "-N1", "-w", node, "--mem=1500", "-J", "svm-bench-share", *vm, "share.sh"],
            cwd=wd)
    if r.returncode != 0:
        raise RuntimeError("sbatch failed: " + r.stderr.strip())
    jid = int(r.stdout.strip().split(";")[0])
    RES.slurm_jobs.append(jid)
    outf = os.path.join(wd, f"slurm-{jid}.out")
    deadline = time.time() + 420
    while time.time() < deadline:
        st = run(["scontrol", "show", "job", "-o", str(jid)], env=env).stdout
        m = re.search(r"JobState=(\S+)", st)
        if m and m.group(1) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            break
        time.sleep(1)
    return parse_share_output(read(outf), f"job {jid} on {node}")


def parse_share_output(txt, where):
    fs = re.search(r"^fs (\S+)$", txt, re.M)
    rd = re.search(r"^read (\S+) (\S+)$", txt, re.M)
    wr = re.search(r"^write (\S+) (\S+)$", txt, re.M)
    if not (rd and wr):
        raise RuntimeError(f"{where}: no figures in its output: {short(txt, 300)}")
    mibs = lambda m: SHARE_MIB / max(1e-6, float(m.group(2)) - float(m.group(1)))  # noqa: E731
    return {"fs": fs.group(1) if fs else "host", "read_mib_s": mibs(rd), "write_mib_s": mibs(wr)}


def item_shares(ctx, repeat):
    """Share throughput from the guest: virtio-fs (node1, the cluster's
    default), 9p (node2, given its own configuration for the run) and the
    host itself (the same commands as the test user), in one run."""
    wd = run(["runuser", "-u", USER, "--", "mktemp", "-d", f"/home/{USER}/svmbench.XXXXXX"]).stdout.strip()
    if not wd:
        raise RuntimeError("cannot make a working directory for the test user")
    RES.dirs.append(wd)
    os.chmod(wd, 0o755)
    write(os.path.join(wd, "share.sh"), SHARE_SCRIPT, 0o755)
    with open(os.path.join(wd, "in.bin"), "wb") as f:
        f.write(os.urandom(1 << 20) * SHARE_MIB)
    for n in ("share.sh", "in.bin"):
        os.chown(os.path.join(wd, n), UID, GID)
    node2_cfg = os.path.join(CLUSTER_DIR, "etc", "slurm-vm.node2.json")
    if os.path.exists(node2_cfg):
        raise RuntimeError(f"{node2_cfg} exists (a test is using node2): not measured")
    base = json.loads(read(os.path.join(CLUSTER_DIR, "etc/slurm-vm.json")))
    if base.get("shares_via", "virtiofs") != "virtiofs":
        raise RuntimeError("the cluster's shares_via is not virtiofs")
    base["shares_via"] = "9p"
    write(node2_cfg + ".tmp", json.dumps(base))
    os.rename(node2_cfg + ".tmp", node2_cfg)
    runs = {"virtiofs": [], "9p": [], "host": []}
    try:
        for i in range(repeat):
            for fs, node in (("virtiofs", "node1"), ("9p", "node2")):
                o = share_job(ctx, wd, node)
                if o["fs"] != fs:
                    raise RuntimeError(f"the job on {node} used {o['fs']}, not {fs}")
                log(f"  {fs}: read {o['read_mib_s']:.0f} MiB/s, write {o['write_mib_s']:.0f} MiB/s")
                runs[fs].append(o)
            h = run(["runuser", "-u", USER, "--", "env", f"SLURM_SUBMIT_DIR={wd}", "sh", os.path.join(wd, "share.sh")])
            o = parse_share_output(h.stdout, "the host run")
            log(f"  host: read {o['read_mib_s']:.0f} MiB/s, write {o['write_mib_s']:.0f} MiB/s")
            runs["host"].append(o)
    finally:
        os.unlink(node2_cfg)
    fig = {fs: {"read_mib_s": stats([o["read_mib_s"] for o in rs]),
                "write_mib_s": stats([o["write_mib_s"] for o in rs])}
           for fs, rs in runs.items()}
    r = lambda fs, k: ratio(med(fig[fs][k]), med(fig["host"][k]))  # noqa: E731
    return {
        "title": "Share throughput",
        "what": f"from the guest (TCG here), in the submit directory: `cat` of a {SHARE_MIB} MiB file the host wrote "
                f"(in the host's page cache), then `dd` of {SHARE_MIB} MiB with conv=fsync; virtio-fs on node1, 9p "
                "on node2 (its own configuration for the run), and the same script on the host as the user",
        "baseline": "the host itself (same commands, same directory)",
        "figures": fig,
        "ratios_to_host": {"virtiofs_read": r("virtiofs", "read_mib_s"), "virtiofs_write": r("virtiofs", "write_mib_s"),
                           "9p_read": r("9p", "read_mib_s"), "9p_write": r("9p", "write_mib_s")},
        "virtiofs_over_9p": {"read": ratio(med(fig["virtiofs"]["read_mib_s"]), med(fig["9p"]["read_mib_s"])),
                             "write": ratio(med(fig["virtiofs"]["write_mib_s"]), med(fig["9p"]["write_mib_s"]))},
        "target": "none (reported)",
    }
