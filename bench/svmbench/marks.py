"""Where the waterfall's marks come from: file birth times, the per-job admin
log, slurmd's and slurmctld's logs."""

import datetime
import json
import os
import re

from .util import births, read
from .waterfall import PROLOG_STEPS


# ----------------------------------------------------------------------------
# Where the waterfall's marks come from: the job directory's file birth times,
# the per-job admin log, slurmd's and slurmctld's logs, and the processes this
# run sees start and end in /proc (ProcWatch).

# Files of a job directory, in the order the prolog and then the keeper create
# them (lib/job/vm_job.cpp prepare_job, lib/job/keeper.cpp run_keeper). Every one is
# written once (atomically: its birth is when it was written) except state.
JOBDIR_FILES = [("jobdir", ""), ("user_key", "id_ed25519"), ("known_hosts", "known_hosts"),
                ("overlay", "overlay.qcow2"), ("seed", "seed.iso"),
                ("console", "console.log"),
                ("embed_root", "libvirt"), ("qemu_conf", "libvirt/etc/qemu.conf"), ("plan", "plan.json"),
                ("keeper_log", "keeper.log"), ("keeper_pid", "keeper.pid"), ("domain_xml", "domain.xml"),
                ("ssh_sock", "ssh.sock")]


def lease_dir_of(state_dir, net):
    """NodeConfig::lease_dir (lib/job/config.cpp): beside the per-node state
    directories when the guests share a bridge."""
    parent = os.path.dirname(state_dir.rstrip("/")) or "/run"
    if not net.get("netns") and not net.get("bridge"):
        return os.path.join(state_dir, "leases")
    return os.path.join(parent, "leases-" + (net.get("bridge") or "none"))


OPTIONAL_MARKS = ("lease",)  # no bridge


def fill_optional(m):
    """A step whose file a job does not have (no kernel, no lease) takes no
    time: its mark is the next step's."""
    order = [b for _, b, _ in PROLOG_STEPS]
    for i, k in enumerate(order):
        if k in OPTIONAL_MARKS and not m.get(k):
            nxt = next((m[j] for j in order[i + 1:] if m.get(j)), None)
            if nxt:
                m[k] = nxt
    return m


def jobdir_marks(jobdir, lease_dir=None):
    """Birth times of the job directory's files (and of the guest's address
    lease), as marks; plus the plan."""
    paths = {m: (os.path.join(jobdir, rel) if rel else jobdir) for m, rel in JOBDIR_FILES}
    capdir = os.path.join(jobdir, "libvirt/cache/qemu/capabilities")
    try:
        caps = [os.path.join(capdir, f) for f in os.listdir(capdir) if f.endswith(".xml")]
    except OSError:
        caps = []
    try:
        plan = json.loads(read(paths["plan"]) or "{}")
    except ValueError:
        plan = {}
    if lease_dir and plan.get("ip"):
        paths["lease"] = os.path.join(lease_dir, plan["ip"])
    if plan.get("overlay_dir"):
        paths["overlay"] = os.path.join(plan["overlay_dir"], "overlay.qcow2")
    b = births(list(paths.values()) + caps)
    marks = {m: b.get(p) for m, p in paths.items()}
    cb = [b[c] for c in caps if b.get(c)]
    marks["caps"] = min(cb) if cb else None
    if marks.get("plan"):
        fill_optional(marks)
    return marks, plan


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+[+-]\d\d:?\d\d) (\S+)\[(\d+)\] (\w+): (.*)$")


def job_log_marks(log_dir, node, jid, since=0.0):
    """Marks from the per-job admin log <log_dir>/<node>/job_<id>.log (lines
    of the prolog, the keeper and the epilog, millisecond timestamps)."""
    m = {"log_problems": []}
    for line in read(os.path.join(log_dir, node, f"job_{jid}.log")).splitlines():
        x = LOG_LINE.match(line)
        if not x:
            continue
        try:
            ts = datetime.datetime.fromisoformat(x.group(1)).timestamp()
        except ValueError:
            continue
        if ts < since:
            continue  # an earlier job with the same id (a re-created cluster)
        prog, level, msg = x.group(2), x.group(4), x.group(5)
        msg = re.sub(r"^job \d+( on \S+)?: ", "", msg)
        if level in ("warn", "warning", "error"):
            m["log_problems"].append(f"{prog}: {msg}")
        if prog.endswith("prolog") and msg.startswith("guest prepared"):
            m.setdefault("prepared", ts)
        elif prog.endswith("keeper"):
            c = re.match(r"guest \S+ created in (\d+) ms", msg)
            r = re.match(r"guest ready in (\d+) ms", msg)
            lg = re.match(r"the guest's agent takes the job's first command in (\d+) ms", msg)
            if c:
                m["created"], m["create_ms"] = ts, int(c.group(1))
                m["create_start"] = ts - int(c.group(1)) / 1000
            elif r:
                m["ready"], m["ready_ms"] = ts, int(r.group(1))
            elif lg:
                m.setdefault("login", ts)
            elif msg.startswith("the job's first command takes the guest agent's serial channels"):
                m.setdefault("agent_taken", ts)
            elif msg.startswith("guest memory"):
                m.setdefault("keeper_sized", ts)
            elif msg.startswith("VM record published"):
                m.setdefault("record", ts)
            elif msg.startswith("guest destroyed"):
                m.setdefault("destroyed", ts)
            elif msg.startswith("the job ended: ending the guest"):
                m.setdefault("keeper_stop", ts)
        elif prog.endswith("epilog") and msg.startswith("undone: domain"):
            m.setdefault("domain_undone", ts)
        elif prog.endswith("epilog") and msg.startswith("everything of the job") and "undone" in msg:
            m.setdefault("epilog_done", ts)
    return m


def slurm_conf_value(ctx, key, node=None):
    for line in read(ctx.env.get("SLURM_CONF", "")).splitlines():
        k, sep, v = line.split("#", 1)[0].strip().partition("=")
        if sep and k.strip().lower() == key.lower():
            v = v.strip()
            return v.replace("%n", node) if node else v
    return None


class LogTail:
    """What a log file gets from now on (Slurm's daemons' logs)."""

    def __init__(self, path):
        self.path = path
        try:
            self.offset = os.path.getsize(path) if path else 0
        except OSError:
            self.offset = 0

    def lines(self):
        if not self.path:
            return []
        try:
            with open(self.path, errors="replace") as f:
                f.seek(self.offset)
                return f.read().splitlines()
        except OSError:
            return []


SLURM_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$")


def slurm_lines(tail):
    for line in tail.lines():
        x = SLURM_LINE.match(line)
        if x:
            try:
                yield datetime.datetime.fromisoformat(x.group(1)).timestamp(), x.group(2)
            except ValueError:
                pass


def slurmd_marks(tail, jid):
    m = {}
    for ts, msg in slurm_lines(tail):
        if f"[{jid}.extern]" in msg:
            m.setdefault("extern_start", ts)
            if "keeper started" in msg:
                m.setdefault("keeper_line", ts)
            if "done with job" in msg:
                m["extern_done"] = ts
        elif f"[{jid}.batch]" in msg:
            m.setdefault("batch_start", ts)
            if "done with job" in msg:
                m["batch_done"] = ts
        elif re.search(rf"Launching batch job {jid}\b", msg):
            m.setdefault("batch_launch", ts)
    return m


def slurmctld_marks(tail, jid):
    m = {}
    for ts, msg in slurm_lines(tail):
        if re.search(rf"_slurm_rpc_submit_batch_job: JobId={jid}\b", msg):
            m.setdefault("submit_ctld", ts)
        elif re.search(rf"(Started|Allocate) JobId={jid}\b", msg):
            m.setdefault("allocated", ts)
        elif re.search(rf"_job_complete: JobId={jid} done", msg):
            m.setdefault("job_complete", ts)
    return m
