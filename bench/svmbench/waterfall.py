"""The waterfall: every phase of a job's start and end, with its start offset
and duration, from the marks (median over the runs)."""

import statistics

from .util import med, ratio, stats


# ----------------------------------------------------------------------------
# The waterfall: every phase of a job's start and end, with its start offset
# and duration, from the marks above (median over the runs).

# Where each mark comes from (the report's "source" column).
MARK_SOURCE = {
    "submit": "bench (sbatch)", "allocated": "slurmctld log", "job_complete": "slurmctld log",
    "prolog_start": "process start (/proc)", "prolog_end": "process end (/proc)",
    "jobdir": "file birth", "lease": "file birth", "user_key": "file birth", "known_hosts": "file birth",
    "overlay": "file birth", "seed": "file birth", "kernel": "file birth", "initrd": "file birth",
    "console": "file birth", "embed_root": "file birth",
    "caps": "file birth", "plan": "file birth", "keeper_pid": "file birth", "domain_xml": "file birth",
    "keeper_start": "file birth (keeper.log)", "prepared": "job log", "create_start": "job log",
    "created": "job log", "login": "job log", "agent_taken": "job log", "ready": "job log", "record": "job log",
    "destroyed": "job log", "keeper_stop": "job log", "domain_undone": "job log",
    "epilog_done": "job log", "extern_start": "slurmd log", "batch_done": "slurmd log",
    "qemu_start": "process start (/proc)", "ssh_start": "process start (/proc)",
    "epilog_start": "process start (/proc)", "epilog_end": "process end (/proc)",
    "exec_end": "process end (/proc)",
    "first_line": "bench (job output)", "last_line": "bench (job output)",
}
# Marks the bench itself sets in prolog-level runs (it runs prolog, keeper, epilog, ssh).
HARNESS_SOURCE = {"prolog_start": "bench", "prolog_end": "bench", "keeper_start": "bench",
                  "epilog_start": "bench", "epilog_end": "bench", "ssh_start": "bench",
                  "first_line": "bench (ssh exits)"}

# The prolog's steps, in its order (lib/job/vm_job.cpp prepare_job): each ends at
# the birth of the next file it writes.
PROLOG_STEPS = [
    ("prolog_start", "jobdir", "config, ledger → job directory"),
    ("jobdir", "lease", "network planned (made on a thread beside the steps below); image checked as the user "
               "(qemu-img once per image version; no digest: the head's keeper reads it as the user)"),
    ("lease", "user_key", "site secret → the job's keys"),
    ("user_key", "known_hosts", "host keys of all the job's nodes → known_hosts"),
    # The kernel and initrd are hard links to the node's copies of their
    # versions (a link has no birth time of its own): within the next step.
    ("known_hosts", "overlay", "/dev/kvm ACL for the job's group, devices, hugepages, kernel and initrd (links to "
                    "the node's copies, made on a version's first use) → overlay"),
    ("overlay", "seed", "overlay (a copy of the node's one for this image, made by qemu-img on first use); the seed's "
                "contents"),
    ("seed", "console", "the seed image written (ISO 9660, made in memory)"),
    ("console", "embed_root", "console log; ledger entry of the domain"),
    ("embed_root", "caps", "embedded libvirt root: qemu.conf"),
    ("caps", "plan", "capabilities cache copied; the network segment awaited → plan.json"),
    ("plan", "prepared", "state, \"guest prepared\" line"),
    ("prepared", "prolog_end", "→ prolog exits"),
]

# The raw baseline's figure for a phase (svm-bench-raw-start, same domain XML and seed).
RAW_METRICS = {
    "prolog": ("qemu-img create + embedded root", lambda r: r["overlay_ms"] + r["root_ms"]),
    "overlay": ("qemu-img create", lambda r: r["overlay_ms"]),
    "create": ("the same libvirt calls", lambda r: r["connect_ms"] + r["define_create_ms"]),
    "boot": ("created → TCP port 22 accepts", lambda r: r["wait_ms"]),
    "first_command": ("ssh … true once port 22 accepts",
                      lambda r: r["exec_ms"] if r.get("exec_rc") == 0 else None),
    "host_start": ("launch → qemu-img → domain created", lambda r: r["start_ms"]),
    "to_ready": ("launch → qemu-img → port 22 accepts", lambda r: r["start_ms"] + r["wait_ms"]),
    "to_first_command": ("launch → qemu-img → ssh … true done",
                         lambda r: r["start_ms"] + r["wait_ms"] + r["exec_ms"] if r.get("exec_rc") == 0 else None),
    "teardown": ("virDomainDestroy + rm -r", lambda r: r["teardown_ms"]),
    "destroy": ("virDomainDestroy", lambda r: r["destroy_ms"]),
    "remove": ("rm -r of the guest's directory", lambda r: r["remove_ms"]),
}

# (level, phase, from mark, to mark, raw metric, where: both / slurm / harness, kind: phase / total / parallel)
START_ROWS = [
    (0, "Slurm: sbatch → prolog running (scheduling, launch)", "submit", "prolog_start", None, "slurm", "phase"),
    (1, "sbatch → slurmctld's \"Allocate\"/\"Started\" line", "submit", "allocated", None, "slurm", "parallel"),
    (0, "prolog (whole)", "prolog_start", "prolog_end", "prolog", "both", "phase"),
] + [(1, label, a, b, "overlay" if a == "overlay" else None, "both", "phase") for a, b, label in PROLOG_STEPS] + [
    (0, "Slurm: prolog done → extern step running (slurmstepd)", "prolog_end", "extern_start", None, "slurm", "phase"),
    (0, "keeper start: the plugin forks it in the extern step", "extern_start", "keeper_start", None, "slurm",
     "phase"),
    (0, "keeper: configuration, plan → keeper.pid", "keeper_start", "keeper_pid", None, "both", "phase"),
    (0, "keeper: cgroups, seccomp, network namespace (libvirt connects on a thread from here), image reopened as "
        "the user, guest size → domain.xml", "keeper_pid", "domain_xml", None, "both", "phase"),
    (0, "keeper: state 'booting'", "domain_xml", "create_start", None, "both", "phase"),
    (0, "libvirt domain creation (shares' virtiofsd, the connection awaited, define, image descriptor, start)",
     "create_start", "created", "create", "both", "phase"),
    (1, "virtiofsd, embedded driver, domain set-up → QEMU forked", "create_start", "qemu_start", None, "both", "phase"),
    (1, "QEMU start-up, monitor, vCPUs → domain running", "qemu_start", "created", None, "both", "phase"),
    (0, "guest boot → readiness line (console marker + TCP 22)", "created", "ready", "boot", "both", "phase"),
    (1, "guest boot → agent offered (it waits on the serial channels; console marker)", "created",
     "login", None, "slurm", "phase"),
    (0, "readiness → first user command (Slurm job: through the guest's agent; prolog level: over SSH)", "ready",
     "first_line", "first_command", "both", "phase"),
    (1, "agent offered → slurm-vm-exec takes its channels (it polls the state every 20 ms)", "login",
     "agent_taken", None, "slurm", "phase"),
    (1, "the agent's command: runuser's PAM session, its wait for the guest's set-up → first output",
     "agent_taken", "first_line", None, "slurm", "phase"),
    (1, "ready → ssh starts (bench polls the state every 20 ms)", "ready", "ssh_start", None, "harness", "phase"),
    (1, "ssh: connection, key exchange, login, `true`", "ssh_start", "first_line", None, "harness", "phase"),
    (0, "(parallel) ready → VM record in AdminComment", "ready", "record", None, "slurm", "parallel"),
    (0, "the script itself (first line → last line)", "first_line", "last_line", None, "slurm", "phase"),
    (0, "total: prolog start → domain created (host-side start)", "prolog_start", "created", "host_start", "both",
     "total"),
    (0, "total: prolog start → guest ready", "prolog_start", "ready", "to_ready", "both", "total"),
    (0, "total: prolog start → first user command", "prolog_start", "first_line", "to_first_command", "both",
     "total"),
    (0, "total: sbatch → first user command", "submit", "first_line", None, "slurm", "total"),
]
END_ROWS = [
    (0, "script end → batch step done", "last_line", "batch_done", None, "slurm", "phase"),
    (1, "script end → slurm-vm-exec exits (the agent's end of the output, its status)", "last_line", "exec_end",
     None, "slurm", "phase"),
    (1, "slurm-vm-exec exits → slurmstepd's \"done with job\"", "exec_end", "batch_done", None, "slurm", "phase"),
    (0, "Slurm: batch step done → epilog running", "batch_done", "epilog_start", None, "slurm", "phase"),
    (0, "epilog (whole)", "epilog_start", "epilog_end", "teardown", "both", "phase"),
    (1, "stop the keeper (SIGTERM) → guest destroyed (keeper's line)", "epilog_start", "destroyed", "destroy",
     "both", "phase"),
    (1, "SIGTERM → the keeper leaves its loop (\"the job ended\")", "epilog_start", "keeper_stop", None, "both",
     "phase"),
    (1, "QEMU killed and reaped, libvirt tidies (\"guest destroyed\")", "keeper_stop", "destroyed", None, "both",
     "phase"),
    (1, "keeper exits → the ledger's domain entry undone", "destroyed", "domain_undone", None, "both", "phase"),
    (1, "keeper gone; ACL, lease, network filter, overlay, job directory → \"undone\"", "destroyed", "epilog_done",
     "remove", "both", "phase"),
    (1, "\"undone\" → epilog exits", "epilog_done", "epilog_end", None, "both", "phase"),
    (0, "(parallel) Slurm: job complete (slurmctld)", "last_line", "job_complete", None, "slurm", "parallel"),
    (0, "total: script end → node clean (epilog exits)", "last_line", "epilog_end", None, "slurm", "total"),
]

# Phases no product line shows: what is missing, and where it would go.
MISSING_LINES = [
    ("prolog steps in the waterfall", "the prolog logs its steps with their durations at debug level "
     "(\"prolog: ... (N ms)\") but the waterfall still reads them from the birth times of the files it writes; "
     "GPU/VF binding writes no file: on GPU nodes it hides in the \"/dev/kvm ACL, devices\" step (the log line "
     "\"prolog: /dev/kvm, devices, hugepages\" has it)."),
    ("keeper start", "the keeper logs \"keeper started\" (debug) once it has read its configuration and plan; "
     "the waterfall takes its start from the birth of keeper.log (opened by the plugin just before exec)."),
    ("QEMU fork inside virDomainCreateXML", "only the whole creation is logged (\"created in N ms\"); the split "
     "comes from /proc (the QEMU process's start)."),
    ("agent taken → first command", "the keeper logs when the batch step takes the guest agent's channels; "
     "runuser's PAM session in the guest, the command's wait there for the guest's set-up and its start cannot be "
     "told apart on the host."),
    ("the epilog's undo steps", "each undone ledger entry is logged with its duration (\"undone: KIND (N ms)\") "
     "but the waterfall shows only the domain's entry; the others are summed in one row."),
    ("Slurm's own steps", "slurmd at SlurmdDebug=info does not log when it starts the prolog or the epilog: those "
     "starts come from /proc."),
]


def waterfall(runs, rows, where, origin, raws=None, title="", what=""):
    """Aggregates runs (lists of marks, realtime s) into rows: median start
    offset from the origin mark and duration stats (ms), with the raw
    baseline's figure and the ratio where one exists."""
    out = []
    for level, label, a, b, rawkey, scope, kind in rows:
        if scope not in ("both", where):
            continue
        offs, durs = [], []
        for m in runs:
            o, x, y = m.get(origin), m.get(a), m.get(b)
            if o is None or x is None or y is None or y < x:
                continue
            offs.append((x - o) * 1000)
            durs.append((y - x) * 1000)
        row = {"level": level, "phase": label, "from": a, "to": b, "kind": kind,
               "start_ms": round(statistics.median(offs), 1) if offs else None,
               "duration_ms": stats(durs), "runs": len(runs)}
        src = HARNESS_SOURCE if where == "harness" else {}
        row["source"] = f"{src.get(a) or MARK_SOURCE.get(a, a)} → {src.get(b) or MARK_SOURCE.get(b, b)}"
        if rawkey and raws:
            what_raw, fn = RAW_METRICS[rawkey]
            vals = []
            for r in raws:
                try:
                    vals.append(fn(r))
                except (KeyError, TypeError):
                    pass
            rs = stats(vals)
            if rs:
                rs.pop("values", None)
                row["raw"] = {"what": what_raw, "ms": rs}
                row["ratio"] = ratio(med(row["duration_ms"]), med(rs))
        out.append(row)
    return {"title": title, "what": what, "origin": origin, "runs": len(runs), "rows": out,
            "marks": [{k: round((v - m[origin]) * 1000, 1) for k, v in sorted(m.items(), key=lambda kv: kv[1])
                       if isinstance(v, float) and m.get(origin)} for m in runs]}


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.1f} ms" if abs(v) < 10 else f"{v:.0f} ms"


def waterfall_md(w, width=40, zoom=None):
    """The waterfall as a Markdown table; zoom: only the phases that end
    before the median of that mark (their own scale, fewer columns)."""
    rows = w["rows"]
    if zoom:
        end = next((r["start_ms"] + r["duration_ms"]["median"] for r in rows
                    if r["to"] == zoom and r["from"] == w["origin"] and r["duration_ms"]), None)
        if end is None:
            return []
        rows = [r for r in rows if r["kind"] == "phase" and r["duration_ms"] and r["start_ms"] is not None
                and r["start_ms"] + r["duration_ms"]["median"] <= end * 1.001 and r["start_ms"] >= 0]
    spans = [(r["start_ms"], r["start_ms"] + r["duration_ms"]["median"]) for r in rows
             if r["duration_ms"] and r["start_ms"] is not None and r["kind"] != "total"]
    lo = min([0.0] + [a for a, _ in spans])
    hi = max([1.0] + [b for _, b in spans])
    scale = (hi - lo) / width
    if zoom:
        L = [f"*Zoom on the host side* (until the mark `{zoom}`, {fmt_ms(hi)}):", "",
             f"| phase | starts at | takes | {lo:.0f} … {hi:.0f} ms |", "|---|---:|---:|---|"]
    else:
        L = [f"**{w['title']}** — t = 0: {w['what']}; {w['runs']} run(s), medians.", "",
             f"| phase | starts at | takes (median, min–max) | raw libvirt baseline | ratio | source | "
             f"{lo / 1000:.1f} s … {hi / 1000:.1f} s |",
             "|---|---:|---:|---|---:|---|---|"]
    for r in rows:
        name = ("↳ " if r["level"] else "") + r["phase"]
        if r["kind"] == "total":
            name = f"**{name}**"
        d = r["duration_ms"]
        if not d:
            L.append(f"| {name} | — | not seen | | | {r['source']} | |")
            continue
        took = fmt_ms(d["median"]) + (f" ({d['min']:.0f}–{d['max']:.0f})" if d["n"] > 1 else "") + \
            (f", n={d['n']}" if d["n"] != w["runs"] else "")
        raw = f"{fmt_ms(r['raw']['ms']['median'])} ({r['raw']['what']})" if r.get("raw") else ""
        rat = f"{r['ratio']}×" if r.get("ratio") is not None else ""
        bar = ""
        if r["kind"] != "total":
            a = int(round((r["start_ms"] - lo) / scale))
            n = max(1, int(round(d["median"] / scale)))
            a = min(a, width - 1)
            n = min(n, width - a)
            bar = "`" + "·" * a + ("▒" if r["kind"] == "parallel" else "█") * n + "·" * (width - a - n) + "`"
        if zoom:
            L.append(f"| {name} | {fmt_ms(r['start_ms'])} | {fmt_ms(d['median'])} | {bar} |")
        else:
            L.append(f"| {name} | {fmt_ms(r['start_ms'])} | {took} | {raw} | {rat} | {r['source']} | {bar} |")
    return L


def slowest(w, n=3):
    """The slowest top-level phases of a waterfall (what dominates it), with
    their share of the sum of the top-level phases."""
    rows = [r for r in w["rows"] if r["level"] == 0 and r["kind"] == "phase" and r["duration_ms"]]
    total = sum(r["duration_ms"]["median"] for r in rows) or 1
    top = sorted(rows, key=lambda r: -r["duration_ms"]["median"])[:n]
    return [f"{r['phase']} {fmt_ms(r['duration_ms']['median'])} ({100 * r['duration_ms']['median'] / total:.0f}%)"
            for r in top]
