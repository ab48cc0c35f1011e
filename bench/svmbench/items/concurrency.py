"""Item 4: concurrency at prolog/keeper level, with the machine's CPU time."""

import math
import os
import threading
import time

from ..plugin import plugin_start, plugin_stop
from ..raw import raw_run
from ..text import short
from ..util import JOB_MEM_MIB, log, med, ratio, stats
from ..watch import CpuMeter


def item_concurrency(ctx, repeat, ns=(1, 2, 4)):
    meter = CpuMeter()
    meter.start()
    try:
        return concurrency_runs(ctx, repeat, ns, meter)
    finally:
        meter.stop()


def floor_words(f, n):
    return (f"{f['floor_ratio']}× is the least {n} at once can take on {f['cpus']} CPU(s) "
            f"(one start's CPU time {f['one_start_cpu_ms']:.0f} ms in {f['one_start_wall_ms']:.0f} ms); "
            f"the target needs {f['cpus_for_target']} CPUs")


def cpu_floor(one, n, cpus, target):
    """What the machine allows: one start's CPU time (every process, from
    /proc/stat) over its wall time. n starts need n times that CPU time, which
    the machine's CPUs give in no less than n x cpu / cpus: no implementation
    (the raw baseline included) can make n at once faster than that ratio to
    one, and the target needs the CPUs that make it fit."""
    cpu, wall = med(one["plugin_cpu_ms"]), med(one["plugin_all_created_ms"])
    if not cpu or not wall:
        return None
    return {"one_start_cpu_ms": cpu, "one_start_wall_ms": wall, "cpus": cpus,
            "floor_ratio": round(max(1.0, n * cpu / (min(n, cpus) * wall)), 2),
            "cpus_for_target": min(n, math.ceil(n * cpu / (target * wall)))}


def in_threads(fn, n):
    """fn(k) for k in 0..n-1, all at once, each in a thread of its own."""
    th = [threading.Thread(target=fn, args=(k,)) for k in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()


def plugin_round(ctx, n, rep, meter):
    """n bench jobs at once, then their epilogs at once; returns the round's
    figures and the starts' errors."""
    results, errs = [None] * n, []
    t0 = time.time()

    def one(k):
        try:
            results[k] = plugin_start(ctx, ctx.node, ctx.ids.take(k), cpu=k % 2,
                                      keep_artifacts=os.path.join(ctx.tmp, f"cart-{n}-{rep}-{k}"))
        except Exception as e:  # noqa: BLE001 - reported
            errs.append(str(e))
    in_threads(one, n)
    t_td = time.time()
    downs = [None] * n

    def down(k):
        if results[k]:
            downs[k] = plugin_stop(ctx, ctx.node, results[k])
    in_threads(down, n)
    all_down = (time.time() - t_td) * 1000
    if errs:
        return None, errs
    created = max(r["created_at"] for r in results)
    return {"all_created_ms": (created - t0) * 1000, "cpu_ms": meter.busy_ms(t0, created),
            "all_ready_ms": (max(r["ready_at"] for r in results) - t0) * 1000,
            "host_start_ms": [r["host_start_ms"] for r in results],
            "prolog_ms": [r["prolog_ms"] for r in results],
            "all_down_ms": all_down}, errs


def raw_round(ctx, n, rep, meter):
    """The same n domains at once, raw."""
    rres, rerrs = [None] * n, []

    def rone(k):
        try:
            rres[k] = raw_run(ctx, os.path.join(ctx.tmp, f"cart-{n}-{rep}-{k}"), f"c{n}-{rep}-{k}", cpu=k % 2)
        except Exception as e:  # noqa: BLE001
            rerrs.append(str(e))
    t0 = time.time()
    in_threads(rone, n)
    if rerrs:
        raise RuntimeError("; ".join(rerrs))
    created = max(r["created_at"] for r in rres)
    return {"all_created_ms": (created - t0) * 1000, "cpu_ms": meter.busy_ms(t0, created),
            "all_ssh_ms": max((r["launch"] - t0) * 1000 + r["start_ms"] + r["wait_ms"] for r in rres)}


def concurrency_row(pl, rw):
    return {
        "plugin_all_created_ms": stats([x["all_created_ms"] for x in pl]),
        "plugin_cpu_ms": stats([x["cpu_ms"] for x in pl]),
        "raw_cpu_ms": stats([x["cpu_ms"] for x in rw]),
        "plugin_all_ready_ms": stats([x["all_ready_ms"] for x in pl]),
        "plugin_host_start_per_job_ms": stats([v for x in pl for v in x["host_start_ms"]]),
        "plugin_prolog_per_job_ms": stats([v for x in pl for v in x["prolog_ms"]]),
        "plugin_all_torn_down_ms": stats([x["all_down_ms"] for x in pl]),
        "raw_all_created_ms": stats([x["all_created_ms"] for x in rw]),
        "raw_all_ssh_ms": stats([x["all_ssh_ms"] for x in rw]),
    }


def concurrency_runs(ctx, repeat, ns, meter):
    rows = {}
    failures = {}
    for n in ns:
        pl, rw = [], []
        for rep in range(repeat):
            log(f"concurrency: {n} bench jobs at once (rep {rep + 1}/{repeat})")
            fig, errs = plugin_round(ctx, n, rep, meter)
            if errs:
                failures.setdefault(str(n), []).extend(errs)
                log(f"concurrency: {len(errs)} of {n} jobs at once failed: {short(errs[0], 300)}")
                continue
            pl.append(fig)
            log(f"concurrency: {n} raw starts at once (rep {rep + 1}/{repeat})")
            rw.append(raw_round(ctx, n, rep, meter))
        rows[str(n)] = concurrency_row(pl, rw)
    return concurrency_item(rows, failures, ns)


def concurrency_item(rows, failures, ns):
    one, most = rows[str(ns[0])], rows[str(ns[-1])]
    r_host = ratio(med(most["plugin_all_created_ms"]), med(one["plugin_all_created_ms"]))
    out = {
        "title": f"Concurrency ({', '.join(map(str, ns))} VM jobs at once on one node)",
        "what": "prolog/keeper level (item 1's harness run N at once, each job in its own 1-CPU cpuset and "
                f"{JOB_MEM_MIB} MiB memory cgroup; CPUs 0 and 1 alternate): wall time from the common start "
                "until every guest is created (host side) and until every guest is ready",
        "note": "a Slurm node here has 2 CPUs, so it holds at most 2 one-CPU jobs without oversubscription; "
                "4 at once is measured at prolog/keeper level with two guests per CPU",
        "rows": rows,
        "ratio": r_host,
        "ratio_ready": ratio(med(most["plugin_all_ready_ms"]), med(one["plugin_all_ready_ms"])),
        "raw_ratio": ratio(med(most["raw_all_created_ms"]), med(one["raw_all_created_ms"])),
        "raw_ratio_ssh": ratio(med(most["raw_all_ssh_ms"]), med(one["raw_all_ssh_ms"])),
        "target": f"{ns[-1]} at once <= 1.5x one (host-side start)", "target_ratio": 1.5,
        "failures": failures,
    }
    out["cpu_floor"] = cpu_floor(one, ns[-1], len(os.sched_getaffinity(0)), out["target_ratio"])
    if failures.get(str(ns[-1])):
        out["failed_at_most"] = (f"{len(failures[str(ns[-1])])} job start(s) failed with {ns[-1]} at once: "
                                 f"{short(failures[str(ns[-1])][0], 400)}")
    return out
