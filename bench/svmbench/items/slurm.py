"""Real Slurm jobs: item 3 (time to user code) and item 8 (with a stock cloud image)."""

import datetime
import json
import os
import re
import time

from ..cluster import RES
from .start import probe_retry
from ..marks import LogTail, job_log_marks, jobdir_marks, lease_dir_of, slurm_conf_value, slurmctld_marks, slurmd_marks
from ..plugin import save_artifacts
from ..raw import raw_run
from ..text import short
from ..util import (
    CLUSTER_DIR, CapsProbed, GID, JobGone, LIVE_STATE, REPO, UID, USER, caps_cpu, cpus_of, log, med, ratio, read, run,
    stats, write)
from ..waterfall import END_ROWS, START_ROWS, waterfall


def live_node_config(node):
    """The live cluster's configuration of a node (a test may give a node its
    own: etc/slurm-vm.<node>.json, as the cluster's prolog wrapper picks)."""
    f = os.path.join(CLUSTER_DIR, "etc", f"slurm-vm.{node}.json")
    if not os.path.exists(f):
        f = os.path.join(CLUSTER_DIR, "etc/slurm-vm.json")
    try:
        cfg = json.loads(read(f) or "{}")
    except ValueError:
        cfg = {}
    state = cfg.get("state_dir", LIVE_STATE + "/%n")
    return {"state_dir": state.replace("%n", node), "log_dir": cfg.get("log_dir", "/var/log/slurm-vm"),
            "lease_dir": lease_dir_of(state.replace("%n", node), cfg.get("network", {}))}


SLURM_NODES = ("node1", "node2", "node3")

# The bench's batch script: its first line is the time to user code; before
# its last line it waits (bash's /dev/tcp, nothing else needed in the image)
# until every guest of the job accepts TCP on port 22, so that a multi-node
# job lasts until all its guests are up.
JOB_SCRIPT = """#!/bin/bash
date +%s.%N
echo "HOST=$(hostname)"
if [ -r "$OMPI_MCA_orte_default_hostfile" ]; then
    while read -r h _; do
        i=0
        until (exec 3<>"/dev/tcp/$h/22") 2>/dev/null || [ $i -ge 600 ]; do sleep 0.2; i=$((i + 1)); done
    done <"$OMPI_MCA_orte_default_hostfile"
fi
date +%s.%N
"""


class SlurmJob:
    """One real VM job being watched: its job directories on the nodes, each
    node's marks, the capability probes seen."""

    def __init__(self, ctx, wd, nodes):
        self.ctx, self.wd, self.nodes = ctx, wd, nodes
        self.ncfg = {n: live_node_config(n) for n in SLURM_NODES}
        self.tails = {n: LogTail(slurm_conf_value(ctx, "SlurmdLogFile", n)) for n in SLURM_NODES}
        self.ctld = LogTail(slurm_conf_value(ctx, "SlurmctldLogFile"))
        self.jobdirs = {}            # node -> job directory
        self.per = {}                # node -> marks
        self.probed = []             # nodes whose guest creation probed QEMU's capabilities
        self.cache_cpu = {n: caps_cpu(os.path.join(self.ncfg[n]["state_dir"], "libvirt-caps/cache/qemu/capabilities"))
                          for n in SLURM_NODES}
        self.ready_at = None
        self.jid = self.out = self.outf = self.art = None

    def submit(self, vm):
        env = self.ctx.env
        t_submit = time.time()
        r = run(["runuser", "-u", USER, "--", "env", f"SLURM_CONF={env['SLURM_CONF']}", "PATH=/usr/bin:/bin",
                 "sbatch", "--parsable", f"-N{self.nodes}", f"-n{self.nodes}", "--ntasks-per-node=1", "--mem=1500",
                 "-J", "svm-bench", *vm, "job.sh"], cwd=self.wd)
        if r.returncode != 0:
            raise RuntimeError("sbatch failed: " + r.stderr.strip())
        jid = self.jid = int(r.stdout.strip().split(";")[0])
        RES.slurm_jobs.append(jid)
        log(f"Slurm job {jid} submitted (-N{self.nodes})")
        self.out = {"job": jid, "submit": t_submit, "nodes": self.nodes}
        self.outf = os.path.join(self.wd, f"slurm-{jid}.out")
        self.art = os.path.join(self.ctx.tmp, f"slurm-art-{jid}")

    def poll_nodes(self):
        """Each node's job directory once its guest is ready: file births, guest.json, plan."""
        for n in SLURM_NODES:
            if n not in self.jobdirs:
                d = os.path.join(self.ncfg[n]["state_dir"], f"job_{self.jid}")
                if os.path.isdir(d):
                    self.jobdirs[n] = d
                    self.per[n] = {}
        for n, d in self.jobdirs.items():
            m = self.per[n]
            if "cache_cpu" not in m:
                # The capabilities the prolog gave the job (libvirt rewrites them only when it probes, seconds
                # into the guest's creation).
                c = caps_cpu(os.path.join(d, "libvirt/cache/qemu/capabilities"))
                if c is not None:
                    m["cache_cpu"] = c
            if "ready_seen" not in m and read(os.path.join(d, "state")).strip() == "ready":
                self._node_ready(n, d, m)

    def _node_ready(self, n, d, m):
        try:
            m["ready_state"] = os.stat(os.path.join(d, "state")).st_mtime
            m["guest"] = json.loads(read(os.path.join(d, "guest.json")))
        except (OSError, ValueError):
            return
        m["ready_seen"] = time.time()
        jm, plan = jobdir_marks(d, self.ncfg[n]["lease_dir"])
        m.update({k: v for k, v in jm.items() if v})
        m["node_index"] = plan.get("node_index")
        k = self.ctx.watch.first("keeper", self.jid, n)
        m["keeper_cpus"] = cpus_of(k["pid"]) if k else None
        if m["guest"].get("caps_probed"):
            self.probed.append({"where": "Slurm job", "job": self.jid, "node": n, "keeper_cpus": m["keeper_cpus"],
                                "cache_probed_on_cpu": m.get("cache_cpu", self.cache_cpu.get(n))})
        if plan.get("node_index") == 0:
            self.out["node"] = n
            self.ready_at = m["ready_state"]
            if not os.path.exists(os.path.join(self.art, "domain.xml")):
                try:
                    save_artifacts(d, self.art)
                except OSError:
                    pass

    def all_seen(self):
        return len(self.jobdirs) >= self.nodes and all("ready_seen" in self.per[n] or not os.path.isdir(d)
                                                       for n, d in self.jobdirs.items())

    def check_alive(self):
        """Raises JobGone when the job ended before its script printed anything."""
        st = run(["scontrol", "show", "job", "-o", str(self.jid)], env=self.ctx.env).stdout
        m = re.search(r"JobState=(\S+)", st)
        if m and m.group(1) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") \
                and "\n" not in read(self.outf):
            why = re.search(r"Reason=(\S+)", st)
            raise JobGone(f"Slurm job {self.jid} ended ({m.group(1)}, reason {why.group(1) if why else '?'}) "
                          f"before its script printed anything")

    def wait_first_line(self):
        deadline = self.out["submit"] + 420
        last_check = 0.0
        while time.time() < deadline:
            self.poll_nodes()
            if time.time() - last_check > 1.0:
                last_check = time.time()
                self.check_alive()
            txt = read(self.outf)
            if "\n" in txt:
                self.out["first_line_seen"] = time.time()
                try:
                    self.out["first_line_guest_clock"] = float(txt.split("\n")[0])
                except ValueError:
                    # Not the script's date: slurm-vm's message (the job failed). Its end, then why.
                    end = time.time() + 180
                    while time.time() < end and any(os.path.exists(d) for d in self.jobdirs.values()):
                        time.sleep(0.5)
                    raise RuntimeError(f"Slurm job {self.jid} (-N{self.nodes}) failed: {short(txt, 400)}")
                return
            time.sleep(0.02)
        run(["scancel", str(self.jid)], env=self.ctx.env)
        raise RuntimeError(f"Slurm job {self.jid}: no output within 420 s (pending? busy cluster)")

    def wait_last_line(self):
        """The script's last line (its third), and the other nodes' guests."""
        out = self.out
        end = time.time() + 60
        while time.time() < end:
            self.poll_nodes()
            lines = read(self.outf).split("\n")
            if len(lines) >= 4 and "last_line_seen" not in out:
                out["last_line_seen"] = time.time()
                try:
                    out["last_line_guest_clock"] = float(lines[2])
                except ValueError:
                    pass
            if "last_line_seen" in out and self.all_seen():
                break
            time.sleep(0.02)

    def wait_end(self):
        """The rest of the job, then until its nodes are clean."""
        out, jid = self.out, self.jid
        end = time.time() + 180
        state = ""
        while time.time() < end:
            s = run(["scontrol", "show", "job", "-o", str(jid)], env=self.ctx.env).stdout
            m = re.search(r"JobState=(\S+)", s)
            state = m.group(1) if m else "gone"
            if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                mt = re.search(r"StartTime=(\S+)", s)
                if mt:
                    try:
                        out["slurm_start_time"] = datetime.datetime.fromisoformat(mt.group(1)).timestamp()
                    except ValueError:
                        pass
                break
            time.sleep(0.5)
        out["state"] = state
        while time.time() < end and any(os.path.exists(d) for d in self.jobdirs.values()):
            time.sleep(0.2)
        # The epilogs' processes end a moment after their last line.
        while time.time() < end and any(r_["end"] is None for n in self.jobdirs
                                        for r_ in self.ctx.watch.find("epilog", jid, n)):
            time.sleep(0.1)
        time.sleep(0.1)
        out["artifacts"] = self.art if os.path.exists(os.path.join(self.art, "domain.xml")) else None

    def node_marks(self, n, job):
        """Node n's marks: the job's, slurmd's, the admin log's, the processes'."""
        out, jid, m = self.out, self.jid, self.per[n]
        m.update(job)
        m.update(slurmd_marks(self.tails[n], jid))
        lm = job_log_marks(self.ncfg[n]["log_dir"], n, jid, since=out["submit"] - 1)
        out["problems"] += [f"{n}: {p}" for p in lm.pop("log_problems")]
        m.update(lm)
        if m.get("keeper_log"):
            m["keeper_start"] = m["keeper_log"]
        p = self.ctx.watch.first("prolog", jid, n)
        if p:
            m["prolog_start"] = p["start"]
            if p["end"]:
                m["prolog_end"] = p["end"]
        elif m.get("jobdir"):
            m["prolog_start"] = m["jobdir"]
            out["problems"].append(f"{n}: the prolog's process was not seen; its start is the job directory's birth")
        if not m.get("prolog_end") and m.get("prepared"):
            m["prolog_end"] = m["prepared"]
        if not m.get("ready") and m.get("ready_state"):
            m["ready"] = m["ready_state"]
        self._process_marks(n, m)
        if m.get("node_index") != 0:
            for k in ("first_line", "last_line", "ssh_start"):
                m.pop(k, None)

    def _process_marks(self, n, m):
        for kind, key in (("qemu", "qemu_start"), ("ssh", "ssh_start"), ("exec", "exec_start")):
            w = self.ctx.watch.first(kind, self.jid, n)
            if w:
                m[key] = w["start"]
                if kind == "exec" and w["end"]:
                    m["exec_end"] = w["end"]
        e = self.ctx.watch.first("epilog", self.jid, n)
        if e:
            m["epilog_start"] = e["start"]
            if e["end"]:
                m["epilog_end"] = e["end"]

    def finish(self, allow_probe):
        """Marks: the job's, then each node's; the probes seen."""
        out, per, probed = self.out, self.per, self.probed
        job = {"submit": out["submit"]}
        job.update(slurmctld_marks(self.ctld, self.jid))
        if out.get("first_line_seen"):
            job["first_line"] = out["first_line_seen"]
        if out.get("last_line_seen"):
            job["last_line"] = out["last_line_seen"]
        out["problems"] = []
        for n in self.jobdirs:
            self.node_marks(n, job)
        out["marks"] = {n: {k: v for k, v in per[n].items() if isinstance(v, float)} for n in self.jobdirs}
        out["guests"] = {n: per[n].get("guest") for n in self.jobdirs}
        out["keeper_cpus"] = {n: per[n].get("keeper_cpus") for n in self.jobdirs}
        out["probed"] = [p["node"] for p in probed]
        if probed:
            self.ctx.probes.extend(probed)
        if probed and not allow_probe:
            raise CapsProbed(f"Slurm job {self.jid}: libvirt probed QEMU's capabilities while creating the guest on "
                             + ", ".join(f"{p['node']} (keeper on CPU {p['keeper_cpus']}, its cached capabilities "
                                         f"probed on CPU {p['cache_probed_on_cpu']})" for p in probed))
        return out


def slurm_job_once(ctx, wd, i, nodes=1, allow_probe=False, vm=None):
    """One real VM job (sbatch -N nodes, one task and 1500 MiB per node) as the
    test user; its script prints the time, the guest's name and the time
    again. Returns its figures and, per node, the marks of the waterfall."""
    env = ctx.env
    script = os.path.join(wd, "job.sh")
    write(script, JOB_SCRIPT, 0o755)
    os.chown(script, UID, GID)
    vm = vm or [f"--vm-image={env['VM_TEST_IMAGE']}", f"--vm-kernel={env['VM_TEST_KERNEL']}",
                f"--vm-initrd={env['VM_TEST_INITRD']}"]
    job = SlurmJob(ctx, wd, nodes)
    job.submit(vm)
    job.wait_first_line()
    job.out["ready_at"] = job.ready_at
    job.wait_last_line()
    job.wait_end()
    return job.finish(allow_probe)


def user_workdir(ctx):
    """The test user's working directory for Slurm jobs (removed at the end)."""
    wd = run(["runuser", "-u", USER, "--", "mktemp", "-d", f"/home/{USER}/svmbench.XXXXXX"]).stdout.strip()
    if not wd:
        raise RuntimeError("cannot make a working directory for the test user")
    RES.dirs.append(wd)
    os.chmod(wd, 0o755)
    ctx.slurm_wd = wd
    return wd


def ttuc_figures(o):
    """A -N1 job's figures, from its marks and output."""
    p0 = o["marks"].get(o.get("node"), {}).get("prolog_start")
    o["prolog_start_est"] = p0
    o["ttuc_ms"] = (o["first_line_seen"] - p0) * 1000 if p0 else None
    o["ttuc_from_slurm_start_ms"] = ((o["first_line_seen"] - o["slurm_start_time"]) * 1000
                                     if o.get("slurm_start_time") else None)
    o["prolog_to_ready_ms"] = (o["ready_at"] - p0) * 1000 if (p0 and o.get("ready_at")) else None
    o["ready_to_first_line_ms"] = ((o["first_line_seen"] - o["ready_at"]) * 1000 if o.get("ready_at") else None)
    o["guest_clock_minus_host_ms"] = ((o["first_line_guest_clock"] - o["first_line_seen"]) * 1000
                                      if o.get("first_line_guest_clock") else None)
    o["guest"] = o["guests"].get(o.get("node"))
    log(f"  job {o['job']} on {o.get('node')}: prolog start to first line {o['ttuc_ms'] or 0:.0f} ms "
        f"(to ready {o['prolog_to_ready_ms'] or 0:.0f} ms), state {o['state']}")


def ttuc_raw(ctx, o, i):
    """The raw baseline of job o: its domain XML and seed booted to SSH, then
    the first command; None when it failed."""
    log(f"  raw boot of job {o['job']}'s domain XML and seed to SSH, then the first command over SSH")
    try:
        r = probe_retry(ctx, lambda: raw_run(ctx, o["artifacts"], f"u{i}", cpu=0, first_command=True,
                                             strict=True))
    except RuntimeError as e:
        ctx.errors.append(f"time to user code: the raw baseline of job {o['job']}: {e}")
        return None
    r["boot_to_ssh_ms"] = r["start_ms"] + r["wait_ms"]
    log(f"  raw: {r['boot_to_ssh_ms']:.0f} ms to port 22, first command {r.get('exec_ms', 0):.0f} ms")
    return r


def item_time_to_user_code(ctx, repeat):
    wd = user_workdir(ctx)
    jobs, raws = [], []
    for i in range(repeat):
        try:
            o = slurm_job_retrying(ctx, wd, i, 1)
        except RuntimeError as e:
            ctx.errors.append(f"time to user code, job {i + 1}: {e}")
            log(f"  {e}")
            continue
        ttuc_figures(o)
        jobs.append(o)
        if o.get("artifacts"):
            r = ttuc_raw(ctx, o, i)
            if r is not None:
                raws.append(r)
    ctx.slurm_jobs_n1 = jobs
    if not jobs:
        raise RuntimeError("no Slurm job ran to its end (see the problems below)")
    p = stats([o["ttuc_ms"] for o in jobs])
    rb = stats([r["boot_to_ssh_ms"] for r in raws]) if raws else ctx.raw_boot_to_ssh
    ctx.waterfall["slurm"] = slurm_waterfall(jobs, raws)
    return ttuc_item(jobs, raws, p, rb)


def slurm_waterfall(jobs, raws):
    runs = [o["marks"][o["node"]] for o in jobs if o.get("node") in o["marks"]]
    return {
        "what": "a real `sbatch -N1 --vm-image=...` job as the test user (prolog and epilog run by slurmd, keeper "
                "started by the plugin in the extern step, the script through slurm-vm-exec and the guest's agent); "
                "the raw baseline boots the same domain XML and seed after the job",
        "start": waterfall(runs, START_ROWS, "slurm", "prolog_start", raws,
                           "Start (Slurm job, -N1)", "the prolog starts on the job's node"),
        "end": waterfall(runs, END_ROWS, "slurm", "last_line", raws,
                         "End (Slurm job, -N1)", "the script's last line reaches the job's output"),
        "script_guest_clock_ms": stats([(o["last_line_guest_clock"] - o["first_line_guest_clock"]) * 1000
                                        for o in jobs if o.get("last_line_guest_clock")
                                        and o.get("first_line_guest_clock")]),
        "problems": sorted({p_ for o in jobs for p_ in o.get("problems", [])}),
    }


def ttuc_item(jobs, raws, p, rb):
    return {
        "title": "Time to user code",
        "what": "Slurm-level: from the prolog's start (its process's start in /proc, else the birth time of the job "
                "directory it creates) to the first line of the batch script (`date +%s.%N`) appearing in "
                "slurm-<id>.out on the host (polled every 20 ms)",
        "baseline": "the same domain XML and seed (copied from the job's directory) booted directly: qemu-img "
                    "create + virDomainCreateXML until TCP port 22 of the guest accepts (from inside the netns)",
        "plugin_ms": p, "raw_ms": rb,
        "parts": {"slurm_start_time_to_first_line_ms (1 s resolution)":
                  stats([o["ttuc_from_slurm_start_ms"] for o in jobs]),
                  "submit_to_first_line_ms": stats([(o["first_line_seen"] - o["submit"]) * 1000 for o in jobs]),
                  "prolog_start_to_guest_ready_ms": stats([o["prolog_to_ready_ms"] for o in jobs]),
                  "guest_ready_to_first_line_ms": stats([o["ready_to_first_line_ms"] for o in jobs]),
                  "guest_boot_to_ready_ms (keeper)": stats([(o["guest"]["ready_ms"] - o["guest"]["create_ms"])
                                                            for o in jobs if o.get("guest")]),
                  "raw_first_command_over_ssh_ms": stats([r.get("exec_ms") for r in raws if r.get("exec_rc") == 0]),
                  "guest_clock_minus_host_clock_ms": stats([o["guest_clock_minus_host_ms"] for o in jobs])},
        "jobs": [{k: v for k, v in o.items() if k in ("job", "node", "state")} for o in jobs],
        "difference_ms": round(med(p) - med(rb), 1) if (p and rb) else None,
        "ratio": ratio(med(p), med(rb)), "target": "<= raw + 300 ms", "target_delta_ms": 300,
    }


def item_time_to_user_code_stock(ctx, repeat):
    """Time to user code with a stock cloud image (systemd, the real
    cloud-init; tests/image/cloud/build, generic kernel), booted by its own
    bootloader, against the test image's figure of the same run."""
    r = run([os.path.join(REPO, "tests/image/cloud/build"), "--flavour", "generic", "--print-env"])
    m = re.search(r"^VM_CLOUD_IMAGE='?([^'\n]+)'?$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError("no stock cloud image: " + short(r.stderr.strip(), 300))
    wd = ctx.slurm_wd if getattr(ctx, "slurm_wd", None) else ctx.workdir
    jobs = []
    for i in range(repeat):
        o = slurm_job_retrying(ctx, wd, i, 1, vm=[f"--vm-image={m.group(1)}"])
        p0 = o["marks"].get(o.get("node"), {}).get("prolog_start")
        o["ttuc_ms"] = (o["first_line_seen"] - p0) * 1000 if p0 else None
        log(f"  stock image, job {o['job']}: prolog start to first line {o['ttuc_ms'] or 0:.0f} ms")
        jobs.append(o)
    test_image = [o["ttuc_ms"] for o in getattr(ctx, "slurm_jobs_n1", []) or []]
    p, t = stats([o["ttuc_ms"] for o in jobs]), stats(test_image)
    return {
        "title": "Time to user code, stock cloud image",
        "what": "as time to user code, with a Debian cloud image made as the distribution makes it (systemd, "
                "cloud-init, initramfs-tools, its bootloader; tests/image/cloud), no --vm-kernel",
        "baseline": "the test image (busybox NoCloud runner, direct kernel boot) in the same run",
        "plugin_ms": p, "raw_ms": t, "ratio": ratio(med(p), med(t)), "target": "none (reported)",
    }


def slurm_job_retrying(ctx, wd, i, nodes, tries=5, vm=None):
    for attempt in range(1, tries + 1):
        try:
            return slurm_job_once(ctx, wd, i, nodes, vm=vm)
        except (JobGone, CapsProbed) as e:
            # The cluster is shared: another test may cancel our job. A guest creation that probed QEMU
            # refreshed its node's cache (for the CPU it ran on), until another job on the other CPU
            # refreshes it again. Try again (four times at most).
            log(f"  {e}; {'trying again' if attempt < tries else 'giving up'}")
            ctx.errors.append(str(e))
            if attempt == tries:
                raise
