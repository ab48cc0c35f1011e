"""A job's start as it grows: prolog-level and Slurm-level node scaling."""

import os
import threading
import time

from ..cluster import RES, epilog, prolog_env
from .slurm import slurm_job_once
from ..marks import job_log_marks, jobdir_marks
from ..util import BENCH_STATE, Interrupted, USER, log, read, run, stats
from ..waterfall import PROLOG_STEPS


def prolog_once(ctx, node, jid, nodelist):
    """One node's prolog of a job on nodelist, with no keeper after it:
    its wall time and the marks of its steps."""
    env = prolog_env(ctx, node, jid, ctx.workdir)
    env["SLURM_NODELIST"] = nodelist
    RES.bench_jobs.append((ctx.cfg, node, jid))
    t0 = time.time()
    r = run([ctx.tools["prolog"], "--config", ctx.cfg], env=env)
    t1 = time.time()
    jobdir = os.path.join(BENCH_STATE, node, f"job_{jid}")
    if r.returncode != 0 or read(os.path.join(jobdir, "state")).strip() != "prepared":
        epilog(ctx, ctx.cfg, node, jid, quiet=True)
        raise RuntimeError(f"prolog of bench job {jid} on {node} ({nodelist}) failed (exit {r.returncode}): "
                           f"{r.stderr.strip()[-300:]}")
    jm, _ = jobdir_marks(jobdir, ctx.lease_dir)
    m = {"prolog_start": t0, "prolog_end": t1}
    m.update({k: v for k, v in jm.items() if v})
    lm = job_log_marks(ctx.log_dir, node, jid)
    if lm.get("prepared"):
        m["prepared"] = lm["prepared"]
    sizes = {}
    for f in ("known_hosts", "plan.json", "seed.iso"):
        try:
            sizes[f] = os.path.getsize(os.path.join(jobdir, f))
        except OSError:
            pass
    m["sizes"] = sizes
    return m


def step_stats(runs):
    """Per prolog step: duration stats (ms) over runs of marks."""
    out = {}
    for a, b, label in PROLOG_STEPS:
        v = [(m[b] - m[a]) * 1000 for m in runs if m.get(a) and m.get(b) and m[b] >= m[a]]
        st = stats(v)
        if st:
            st.pop("values")
        out[label] = st
    return out


def prologs_alone(ctx, n, nodes, nodelist, alone, epi, rep):
    """Each node's prolog of an n-node job, one at a time; then the epilogs."""
    jid = ctx.ids.take(0)
    log(f"node scaling: {n}-node job {jid}: each node's prolog alone (rep {rep})")
    for node in nodes:
        alone.setdefault(n, []).append(prolog_once(ctx, node, jid, nodelist))
    for node in nodes:
        dt, rc = epilog(ctx, ctx.cfg, node, jid)
        if rc == 0:
            epi.setdefault(n, []).append(dt)


def prologs_at_once(ctx, n, nodes, nodelist, at_once, wall):
    """The n prologs of an n-node job at once; then the epilogs."""
    jid = ctx.ids.take(0)
    log(f"node scaling: {n}-node job {jid}: the {n} prologs at once")
    res, errs = [None] * n, []

    def one(k):
        try:
            res[k] = prolog_once(ctx, nodes[k], jid, nodelist)
        except Exception as e:  # noqa: BLE001 - reported
            errs.append(str(e))
    t0 = time.time()
    th = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if errs:
        ctx.errors.append(f"node scaling, {n} prologs at once: {errs[0]}")
    else:
        at_once.setdefault(n, []).extend(res)
        wall.setdefault(n, []).append((max(m["prolog_end"] for m in res) - t0) * 1000)
    for node in nodes:
        epilog(ctx, ctx.cfg, node, jid)


def prologs_synthetic(ctx, synthetic, synthetic_reps, alone, epi):
    """node1's prolog of jobs whose node lists name more nodes, interleaved."""
    if synthetic:
        log(f"node scaling: node1's prolog of jobs of 1, {', '.join(map(str, synthetic))} nodes (synthetic node "
            f"lists), {synthetic_reps} times each, interleaved")
    for rep in range(synthetic_reps if synthetic else 0):
        for n in (1,) + tuple(synthetic):
            jid = ctx.ids.take(0)
            alone.setdefault(n, []).append(prolog_once(ctx, "node1", jid, "node1" if n == 1 else f"node[1-{n}]"))
            dt, rc = epilog(ctx, ctx.cfg, "node1", jid)
            if rc == 0:
                epi.setdefault(n, []).append(dt)


def per_node(runs):
    st = stats([(m["prolog_end"] - m["prolog_start"]) * 1000 for m in runs])
    if st:
        st.pop("values")
    return st


def scaling_growth(rows):
    """What grows: each step's median from the smallest to the largest job,
    and the files the prolog writes (exact, unlike the coarse clock)."""
    small, big = rows[str(min(int(k) for k in rows))], rows[str(max(int(k) for k in rows))]
    n0, n1 = min(int(k) for k in rows), max(int(k) for k in rows)
    growth = []
    for label in small["steps_alone_ms"]:
        a, b = small["steps_alone_ms"][label], big["steps_alone_ms"][label]
        if a and b:
            growth.append({"step": label, f"n{n0}_ms": a["median"], f"n{n1}_ms": b["median"],
                           "per_added_node_ms": round((b["median"] - a["median"]) / max(1, n1 - n0), 3)})
    growth.sort(key=lambda g: -g["per_added_node_ms"])
    files = []
    for f in small["file_bytes"]:
        a, b = small["file_bytes"].get(f), big["file_bytes"].get(f)
        if a and b:
            files.append({"file": f, f"n{n0}_bytes": a, f"n{n1}_bytes": b,
                          "per_added_node_bytes": round((b - a) / max(1, n1 - n0), 1)})
    return growth, files, n0, n1


def item_node_scaling_prolog(ctx, repeat, sizes=(1, 2, 3), synthetic=(), synthetic_reps=5):
    """The prolog's cost as the job grows: for N = 1, 2, 3 nodes (all on this
    host) the prolog of every node of an N-node job, first one at a time (the
    per-node work), then all N at once (as slurmd starts them at allocation;
    here they share 2 CPUs). Synthetic sizes: one node's prolog of a job whose
    node list names N nodes (only its own guest is prepared)."""
    alone, at_once, wall, epi = {}, {}, {}, {}
    for rep in range(repeat):
        for n in sizes:
            nodes = [f"node{k + 1}" for k in range(n)]
            nodelist = "node1" if n == 1 else f"node[1-{n}]"
            prologs_alone(ctx, n, nodes, nodelist, alone, epi, f"{rep + 1}/{repeat}")
            prologs_at_once(ctx, n, nodes, nodelist, at_once, wall)
    prologs_synthetic(ctx, synthetic, synthetic_reps, alone, epi)
    rows = {}
    for n in sorted(set(alone) | set(at_once)):
        first = (alone.get(n) or at_once.get(n) or [{}])[0]
        rows[str(n)] = {"synthetic": n not in sizes,
                        "file_bytes": first.get("sizes", {}),
                        "prolog_alone_ms": per_node(alone.get(n, [])),
                        "steps_alone_ms": step_stats(alone.get(n, [])),
                        "prolog_at_once_per_node_ms": per_node(at_once.get(n, [])),
                        "all_prologs_at_once_ms": stats(wall.get(n, [])),
                        "epilog_no_guest_ms": stats(epi.get(n, []))}
    growth, files, n0, n1 = scaling_growth(rows)
    return {"title": "The prolog's cost as the job grows (prolog level)",
            "what": "for N nodes (all on this host): each node's prolog of an N-node job alone, then all N at once "
                    "(as slurmd starts them); sizes above 3 are node1's prolog of a job whose node list names N "
                    "nodes (only node1's guest is prepared); no keeper, no guest",
            "sizes": list(sizes), "synthetic_sizes": list(synthetic), "repeat": repeat, "rows": rows,
            "growth": growth, "growth_between": [n0, n1], "file_growth": files,
            "alone_ms_by_size": {k: (v["prolog_alone_ms"] or {}).get("median") for k, v in rows.items()},
            "at_once_ms_by_size": {k: (v["all_prologs_at_once_ms"] or {}).get("median") for k, v in rows.items()
                                   if v["all_prologs_at_once_ms"]}}


def slurm_scaling_jobs(ctx, wd, n, repeat, jobs):
    """repeat clean -N n jobs. A job whose guest creation probed QEMU on some
    node still gives its prologs and epilogs (they come before and after the
    probe); its start figures are not used. Up to 3 extra jobs for clean starts."""
    clean, tries = 0, 0
    while clean < repeat and tries < repeat + 3:
        tries += 1
        try:
            o = slurm_job_once(ctx, wd, tries, n, allow_probe=True)
        except Interrupted:
            raise
        except Exception as e:  # noqa: BLE001 - reported; the other sizes still count
            ctx.errors.append(f"node scaling (Slurm), -N{n}: {e}")
            log(f"  -N{n}: {e}")
            continue
        jobs.setdefault(n, []).append(o)
        if o["probed"]:
            log(f"  Slurm job {o['job']}: QEMU probed on {', '.join(o['probed'])}: its prologs and epilogs "
                "count, its start does not")
        else:
            clean += 1


def slurm_scaling_row(n, js):
    """The figures of the -N n jobs js."""
    per_prolog, per_epilog, per_create, per_boot, phase, created, ready, first, end, keeper = \
        [], [], [], [], [], [], [], [], [], []
    probed_jobs = 0
    for o in js:
        ms = list(o["marks"].values())
        if len(ms) < n or not all(m.get("prolog_start") and m.get("prolog_end") for m in ms):
            continue
        t0 = min(m["prolog_start"] for m in ms)
        per_prolog += [(m["prolog_end"] - m["prolog_start"]) * 1000 for m in ms]
        per_epilog += [(m["epilog_end"] - m["epilog_start"]) * 1000 for m in ms
                       if m.get("epilog_end") and m.get("epilog_start")]
        keeper += [(m["keeper_start"] - m["prolog_end"]) * 1000 for m in ms if m.get("keeper_start")]
        phase.append((max(m["prolog_end"] for m in ms) - t0) * 1000)
        if o.get("last_line_seen") and all(m.get("epilog_end") for m in ms):
            end.append((max(m["epilog_end"] for m in ms) - o["last_line_seen"]) * 1000)
        if o.get("probed"):
            probed_jobs += 1
            continue
        per_create += [(m["created"] - m["create_start"]) * 1000 for m in ms if m.get("created")
                       and m.get("create_start")]
        per_boot += [(m["ready"] - m["created"]) * 1000 for m in ms if m.get("ready") and m.get("created")]
        if all(m.get("created") for m in ms):
            created.append((max(m["created"] for m in ms) - t0) * 1000)
        if all(m.get("ready") for m in ms):
            ready.append((max(m["ready"] for m in ms) - t0) * 1000)
        if o.get("first_line_seen"):
            first.append((o["first_line_seen"] - t0) * 1000)
    return {"jobs": [o["job"] for o in js], "jobs_with_a_probe": probed_jobs,
            "prolog_per_node_ms": stats(per_prolog),
            "all_prologs_done_ms": stats(phase), "prolog_end_to_keeper_start_ms": stats(keeper),
            "create_per_node_ms": stats(per_create), "boot_per_node_ms": stats(per_boot),
            "all_created_ms": stats(created), "all_ready_ms": stats(ready),
            "first_line_ms": stats(first), "epilog_per_node_ms": stats(per_epilog),
            "script_end_to_all_clean_ms": stats(end)}


def item_node_scaling_slurm(ctx, repeat, sizes=(2, 3)):
    """Real N-node VM jobs (one guest per node, all on this host), N = 1
    (item 3's jobs), 2, 3: per node, the prolog, the guest's creation and
    boot, the epilog; per job, from the first prolog's start until every
    prolog is done, every guest is ready, and the first line of the script."""
    jobs = {1: list(getattr(ctx, "slurm_jobs_n1", []))}
    wd = getattr(ctx, "slurm_wd", None)
    if not wd:
        wd = run(["runuser", "-u", USER, "--", "mktemp", "-d", f"/home/{USER}/svmbench.XXXXXX"]).stdout.strip()
        RES.dirs.append(wd)
        os.chmod(wd, 0o755)
    for n in sizes:
        slurm_scaling_jobs(ctx, wd, n, repeat, jobs)
    rows = {str(n): slurm_scaling_row(n, js) for n, js in sorted(jobs.items())}
    return {"title": "A job's start as it grows (Slurm jobs, -N1/-N2/-N3 on this host)",
            "what": "real VM jobs with one task and 1500 MiB per node; the three slurmd of this host share its 2 "
                    "CPUs, so guests boot side by side on 2 cores: per-node figures that grow with N here grow with "
                    "CPU contention, not with per-node work (see the prolog-level table for that); times from the "
                    "first prolog's start; a job in which QEMU was probed on some node counts for the prologs, "
                    "the keeper's start and the epilogs only", "rows": rows}
