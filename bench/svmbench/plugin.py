"""The plugin's path at prolog level: prolog, keeper, first command, epilog."""

import json
import os
import shutil
import signal
import subprocess
import time

from .cluster import RES, epilog, into_cgroups, make_cgroup, prolog_env
from .marks import job_log_marks, jobdir_marks
from .util import BENCH_STATE, GID, UID, USER, caps_cpu, read, require_no_probe, run, write


def ssh_argv(key, known_hosts, alias, user, target, proxy=None):
    """The SSH client's options of slurm-vm-exec (lib/guest/guest_exec.cpp ssh_argv)."""
    a = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", key,
         "-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
         "-o", "StrictHostKeyChecking=yes", "-o", f"HostKeyAlias={alias}",
         "-o", "KexAlgorithms=curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,"
               "ecdh-sha2-nistp384,diffie-hellman-group16-sha512,diffie-hellman-group14-sha256"]
    if proxy:
        a += ["-o", f"ProxyCommand={proxy}"]
    return a + ["-o", "ConnectTimeout=60", "-o", "LogLevel=ERROR", "-T", "-l", user, target]


def plugin_start(ctx, node, jid, cpu, keep_artifacts=None, first_command=False):
    """Prolog then keeper for one bench job; returns its timings (ms, realtime
    stamps in s) and its marks for the waterfall. The keeper (and the guest)
    stay up; the caller tears down. With first_command, the first command over
    SSH (`true`, through the keeper's SSH socket as slurm-vm-exec does, in the
    job's cgroup) is timed too."""
    try:
        return _plugin_start(ctx, node, jid, cpu, keep_artifacts, first_command)
    except Exception:
        # Nothing of a failed start may outlive it (its address would stay leased).
        p = ctx.watch.first("keeper", jid, node)
        epilog(ctx, ctx.cfg, node, jid, quiet=True)
        if p and p["end"] is None:
            try:
                os.kill(p["pid"], signal.SIGKILL)
            except OSError:
                pass
        raise


def run_prolog(ctx, node, jid, jobdir, out):
    """The real prolog of bench job jid; returns the marks of its steps."""
    RES.bench_jobs.append((ctx.cfg, node, jid))
    t0 = time.time()
    r = run([ctx.tools["prolog"], "--config", ctx.cfg], env=prolog_env(ctx, node, jid, ctx.workdir))
    t1 = time.time()
    out["prolog_start"] = t0
    out["prolog_ms"] = (t1 - t0) * 1000
    marks = {"prolog_start": t0, "prolog_end": t1}
    jm, _ = jobdir_marks(jobdir, ctx.lease_dir)  # now: before the keeper rewrites anything
    marks.update({k: v for k, v in jm.items() if v})
    b = marks.get("jobdir")
    out["prolog_launch_to_jobdir_ms"] = (b - t0) * 1000 if b else None
    state = read(os.path.join(jobdir, "state")).strip()
    if r.returncode != 0 or state != "prepared":
        raise RuntimeError(f"prolog of bench job {jid} failed (exit {r.returncode}, state {state!r}): "
                           f"{r.stderr.strip()[-400:]}")
    return marks


def wait_ready(jid, statef, k, logf, t2):
    """Until the keeper sets the job's state to ready (600 s at most)."""
    deadline = t2 + 600
    while True:
        s = read(statef).strip()
        if s == "ready":
            return
        if s.startswith("failed") or s.startswith("stopped") or k.poll() is not None:
            raise RuntimeError(f"keeper of bench job {jid}: state {s!r}, exit {k.poll()}: "
                               f"{read(logf.name)[-400:]}")
        if time.time() > deadline:
            raise RuntimeError(f"keeper of bench job {jid}: not ready after 600 s")
        time.sleep(0.02)


def keeper_figures(out, g, t2, ready_at):
    out["keeper_launch"] = t2
    out["keeper_to_ready_ms"] = (ready_at - t2) * 1000
    out["boot_ms"] = g["ready_ms"] - g["create_ms"]
    out["keeper_host_ms"] = out["keeper_to_ready_ms"] - out["boot_ms"]
    out["created_at"] = ready_at - out["boot_ms"] / 1000
    out["ready_at"] = ready_at
    out["host_start_ms"] = out["prolog_ms"] + out["keeper_host_ms"]
    out["guest"] = g


def time_first_command(ctx, jid, jobdir, plan, cg, marks, out, ready_seen):
    """The first command over SSH (`true`, through the keeper's SSH socket as
    slurm-vm-exec does, in the job's cgroup), as the job's user."""
    ssh = ssh_argv(os.path.join(jobdir, "id_ed25519"), os.path.join(jobdir, "known_hosts"),
                   plan.get("hostname", ""), plan["user"], plan.get("hostname", ""),
                   proxy=f"{ctx.tools['exec']} --proxy {os.path.join(jobdir, 'ssh.sock')}")
    join = into_cgroups(cg)

    def as_user():
        join()  # as root, then the job's user (the key and the socket are the user's to use)
        os.setgroups([])
        os.setgid(GID)
        os.setuid(UID)
    t3 = time.time()
    e = subprocess.run(ssh + ["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, preexec_fn=as_user, timeout=180,
                       env={"PATH": "/usr/bin:/bin", "HOME": f"/home/{USER}"}, cwd="/")
    t4 = time.time()
    if e.returncode == 0:
        marks["ready_seen"], marks["ssh_start"], marks["first_line"] = ready_seen, t3, t4
        out["first_command_ms"] = (t4 - t3) * 1000
    else:
        ctx.errors.append(f"bench job {jid}: the first command over SSH failed (exit {e.returncode}): "
                          f"{e.stderr.strip()[-300:]}")


def _plugin_start(ctx, node, jid, cpu, keep_artifacts, first_cmd):
    out = {"job": jid, "node": node}
    jobdir = os.path.join(BENCH_STATE, node, f"job_{jid}")
    marks = run_prolog(ctx, node, jid, jobdir, out)
    cache_cpu = caps_cpu(os.path.join(jobdir, "libvirt/cache/qemu/capabilities"))  # the job's copy
    cg = make_cgroup(f"job_{jid}", cpu)
    logf = open(os.path.join(ctx.tmp, f"keeper-{jid}.log"), "w")
    t2 = time.time()
    # No AdminComment: no Slurm job has this id, so each publication would be
    # retried against slurmctld, and the keeper's end would wait for those
    # retries (up to the epilog's 8 s before it is killed) in the teardown's
    # figure. The Slurm-level waterfall measures a real job's record.
    k = RES.add_proc(subprocess.Popen(
        [ctx.tools["keeper"], "--config", ctx.cfg, "--node", node, "--job", str(jid), "--no-accounting"],
        stdout=logf, stderr=subprocess.STDOUT, preexec_fn=into_cgroups(cg), close_fds=True))
    out["keeper"] = k
    out["cgroups"] = cg
    statef = os.path.join(jobdir, "state")
    wait_ready(jid, statef, k, logf, t2)
    ready_seen = time.time()
    ready_at = os.stat(statef).st_mtime
    g = json.loads(read(os.path.join(jobdir, "guest.json")))
    if g.get("caps_probed"):
        ctx.probes.append({"where": "prolog level", "job": jid, "node": node, "keeper_cpus": str(cpu),
                           "cache_probed_on_cpu": cache_cpu})
    require_no_probe(g, jid, f" (keeper on CPU {cpu}, its cached capabilities probed on CPU {cache_cpu})")
    keeper_figures(out, g, t2, ready_at)
    jm, plan = jobdir_marks(jobdir, ctx.lease_dir)
    for key in ("keeper_pid", "domain_xml", "ssh_sock"):
        if jm.get(key):
            marks[key] = jm[key]
    marks["keeper_start"] = t2
    marks.update({k_: v for k_, v in job_log_marks(ctx.log_dir, node, jid).items() if k_ != "log_problems"})
    marks.setdefault("ready", ready_at)
    q = ctx.watch.first("qemu", jid, node)
    if q:
        marks["qemu_start"] = q["start"]
    if first_cmd and plan.get("user"):
        time_first_command(ctx, jid, jobdir, plan, cg, marks, out, ready_seen)
    out["marks"] = marks
    if keep_artifacts:
        save_artifacts(jobdir, keep_artifacts)
    return out


def save_artifacts(jobdir, dest):
    os.makedirs(dest, exist_ok=True)
    for f in ("domain.xml", "seed.iso", "plan.json", "libvirt/etc/qemu.conf", "id_ed25519", "known_hosts"):
        src = os.path.join(jobdir, f)
        if os.path.exists(src):
            # Contents only (no ACL): root's own 0600 copy of the key for the raw baseline's ssh.
            shutil.copyfile(src, os.path.join(dest, os.path.basename(f)))
            os.chmod(os.path.join(dest, os.path.basename(f)), 0o600 if f == "id_ed25519" else 0o644)
    meta = {"jobdir": jobdir}
    write(os.path.join(dest, "meta.json"), json.dumps(meta))


def plugin_stop(ctx, node, res):
    """The epilog with the keeper and guest still up (what the plugin does at
    the end of a job); returns its wall time in ms, and adds the end's marks."""
    t0 = time.time()
    dt, rc = epilog(ctx, ctx.cfg, node, res["job"])
    t1 = time.time()
    try:
        res["keeper"].wait(timeout=30)
    except subprocess.TimeoutExpired:
        res["keeper"].kill()
        res["keeper"].wait()
    m = res.setdefault("marks", {})
    m["epilog_start"], m["epilog_end"] = t0, t1
    lm = job_log_marks(ctx.log_dir, node, res["job"])
    for key in ("keeper_stop", "destroyed", "domain_undone", "epilog_done"):
        if lm.get(key):
            m[key] = lm[key]
    return dt if rc == 0 else None
