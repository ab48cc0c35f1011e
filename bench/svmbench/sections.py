"""The report's longer sections: waterfalls, node scaling, image step, probes."""

from .text import fmt, short, times
from .util import med, ratio
from .waterfall import slowest, waterfall_md


def waterfall_section(rep):
    wf = rep.get("waterfall") or {}
    L = ["## Waterfall: a job's start and end", "",
         "Each phase with its start offset and duration (medians over the runs; min–max of the duration); `█` "
         "on the critical path, `▒` in parallel with it; ↳ marks the steps of the phase above. Raw baseline: "
         "`svm-bench-raw-start` (libvirt directly, same domain XML and seed, same run); ratio = slurm-vm ÷ raw. "
         "Sources: the per-job admin log (<log_dir>/<node>/job_<id>.log), file birth times in the job directory, "
         "slurmd's and slurmctld's logs, process starts and ends seen in /proc by bench/run (every 20 ms; "
         "process starts have 10 ms resolution), and bench/run's own clock. Resolution: log lines 1 ms; file "
         "birth times follow the kernel's coarse clock (a few ms: steps of 4 ms are common here), so steps under "
         "about 5 ms read as 0 or 4 ms.", ""]
    for key in ("slurm", "prolog_level"):
        w = wf.get(key)
        if not w:
            continue
        if "skipped" in w or "error" in w:
            L += [f"*{'Slurm job' if key == 'slurm' else 'Prolog level'}*: not measured: "
                  f"{w.get('skipped') or w.get('error')}.", ""]
            continue
        L += [f"### {'Slurm job' if key == 'slurm' else 'Prolog level'}", "", w["what"] + ".", ""]
        for part in ("start", "end"):
            if w.get(part):
                L += waterfall_md(w[part]) + [""]
                if part == "start":
                    z = waterfall_md(w[part], zoom="created")
                    L += z + ([""] if z else [])
                top = slowest(w[part])
                if top:
                    L += [f"Slowest phases of the {part}: " + "; ".join(top) + ".", ""]
        if w.get("script_guest_clock_ms"):
            L += [f"The script itself by the guest's clock (first to last `date`): "
                  f"{fmt(w['script_guest_clock_ms'])}.", ""]
        for p in w.get("problems", []):
            L.append(f"- log: {short(p, 300)}")
        if w.get("problems"):
            L.append("")
    if rep.get("missing_log_lines"):
        L += ["### What the product's logs do not show", ""]
        L += [f"- **{m['phase']}**: {m['what']}" for m in rep["missing_log_lines"]] + [""]
    return L


def fmt_tenths(x):
    """A duration's stats to the tenth of a millisecond."""
    return f"{x['median']:.1f} ms ({x['min']:.1f}–{x['max']:.1f}, n={x['n']})" if x else "—"


def prolog_scaling_notes(p):
    """The prolog-level scaling's lines below its table."""
    L = []
    fg = p.get("file_growth") or []
    if fg:
        n0, n1 = p["growth_between"]
        L += ["", f"Files the prolog writes, {n0} → {n1} nodes: " + "; ".join(
            f"{g['file']} {g[f'n{n0}_bytes']} → {g[f'n{n1}_bytes']} bytes ({g['per_added_node_bytes']:+.0f} per "
            "added node)" for g in fg) + "."]
    a = p.get("alone_ms_by_size") or {}
    if a:
        L += ["", "One node's prolog, alone, by job size (medians): " +
              ", ".join(f"{k} nodes {v:.0f} ms" for k, v in a.items() if v is not None) + "."]
    o = p.get("at_once_ms_by_size") or {}
    if o:
        L += ["", "All the job's prologs at once on this host, until the last is done: " +
              ", ".join(f"{k} nodes {v:.0f} ms" for k, v in o.items()) + " (they share 2 CPUs)."]
    if p.get("growth"):
        n0, n1 = p["growth_between"]
        L += ["", f"Per-node prolog steps from {n0} to {n1} nodes (medians, alone), the largest change "
                  "first (file birth times step by about 4 ms: smaller changes are noise):", ""]
        L += ["| step | " + f"{n0} node(s) | {n1} nodes | per added node |", "|---|---|---|---|"]
        for g in p["growth"]:
            L.append(f"| {g['step']} | {g[f'n{n0}_ms']:.1f} ms | {g[f'n{n1}_ms']:.1f} ms | "
                     f"{g['per_added_node_ms'] * 1000:+.0f} µs |")
    return L


def prolog_scaling_lines(p):
    L = []
    if p and "rows" in p:
        L += [f"### {p['title']}", "", p["what"] + f"; {p['repeat']} repetition(s).", "",
              "| nodes in the job | one node's prolog, alone | of it: host keys → known_hosts | of it: seed ISO | "
              "all N prologs at once: until all done | per node, at once | epilog (no guest) |",
              "|---|---|---|---|---|---|---|"]
        kh = "host keys of all the job's nodes → known_hosts"
        for n, r in p["rows"].items():
            st = r["steps_alone_ms"]
            seed = st.get('the seed image written (ISO 9660, made in memory)')
            L.append(f"| {n}{' (synthetic)' if r['synthetic'] else ''} | {fmt_tenths(r['prolog_alone_ms'])} | "
                     f"{fmt_tenths(st.get(kh))} | {fmt_tenths(seed)} | "
                     f"{fmt(r['all_prologs_at_once_ms'])} | {fmt_tenths(r['prolog_at_once_per_node_ms'])} | "
                     f"{fmt(r['epilog_no_guest_ms'])} |")
        L += prolog_scaling_notes(p)
        L.append("")
    elif p:
        L += [f"Prolog level: not measured: {p.get('error') or p.get('skipped')}.", ""]
    return L


def slurm_scaling_lines(sl):
    L = []
    if sl and "rows" in sl:
        L += [f"### {sl['title']}", "", sl["what"] + ".", "",
              "| nodes | jobs (with a QEMU probe) | prolog per node | all prologs done | prolog end → keeper start | "
              "create per node | boot per node | all created | all ready | first line of the script | "
              "epilog per node | script end → all nodes clean |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for n, r in sl["rows"].items():
            L.append(f"| {n} | {len(r['jobs'])} ({r.get('jobs_with_a_probe', 0)}) | "
                     f"{fmt(r['prolog_per_node_ms'])} | {fmt(r['all_prologs_done_ms'])} | "
                     f"{fmt(r['prolog_end_to_keeper_start_ms'])} | {fmt(r['create_per_node_ms'])} | "
                     f"{fmt(r['boot_per_node_ms'])} | {fmt(r['all_created_ms'])} | {fmt(r['all_ready_ms'])} | "
                     f"{fmt(r['first_line_ms'])} | {fmt(r['epilog_per_node_ms'])} | "
                     f"{fmt(r['script_end_to_all_clean_ms'])} |")
        L.append("")
    elif sl:
        L += [f"Slurm jobs: not measured: {sl.get('error') or sl.get('skipped')}.", ""]
    return L


def scaling_section(rep):
    ns = rep.get("node_scaling") or {}
    L = ["## A job's start as it grows (1, 2, 3 nodes on this host)", ""]
    L += prolog_scaling_lines(ns.get("prolog_level"))
    L += slurm_scaling_lines(ns.get("slurm"))
    return L


def image_step_section(rep):
    it = rep["items"].get("image_step")
    if not it or "rows" not in it:
        return []
    L = [f"### {it['title']}", "", it["what"] + f"; {it['repeat']} repetition(s); the image "
         f"{it['image_bytes'] / 2**20:.0f} MiB.", "",
         "| nodes in the job | image step, warm | image step, cold (qemu-img runs) | qemu-img info by hand, as "
         "the user | the rest of the prolog, warm | whole prolog, warm | whole prolog, cold |",
         "|---|---|---|---|---|---|---|"]
    for n, r in it["rows"].items():
        L.append(f"| {n} (per node) | {fmt(r['warm_image_ms'])} | {fmt(r['cold_image_ms'])} | "
                 f"{fmt(r['by_hand_qemu_img_ms'])} | {fmt(r['warm_other_ms'])} | {fmt(r['warm_prolog_ms'])} | "
                 f"{fmt(r['cold_prolog_ms'])} |")
    d, md = it["digest"], it["model"]
    b = md["bytes_read_from_the_image"]
    L += ["", f"The head's digest of the image (once per job, by its keeper, as the user): {fmt(d['digest_ms'])}; "
              f"by hand as the user, sha256sum {fmt(d['sha256sum_ms'])} "
              f"({times(ratio(med(d['digest_ms']), med(d['sha256sum_ms'])))}), openssl dgst -sha256 "
              f"{fmt(d.get('openssl_ms'))} ({times(ratio(med(d['digest_ms']), med(d.get('openssl_ms'))))}). "
              "A later job whose head kept the "
              "digest of this version reads one small file instead.", "",
          f"A {md['nodes']:,}-node job, computed ({md['from']}): every node's prolog checks the image itself, at "
          "once and alone, so the job's prologs spend "
          f"{md['job_prolog_wall_ms']['warm']:.0f} ms on it ({md['job_prolog_wall_ms']['first_use_of_the_version']:.0f}"
          f" ms on a version's first use on the nodes), {md['node_seconds']['warm']} node-seconds in all "
          f"({md['node_seconds']['first_use_of_the_version']}); the digest is read once, by the head's keeper beside "
          f"its guest's start, in no prolog: {fmt(d['digest_ms'])}. The image's file system serves "
          f"{b['header_reads'] / 2**30:.2f} GiB of header reads (2 MiB and 512 bytes per node) and "
          f"{b['digest'] / 2**20:.0f} MiB for the digest, instead of {b['digest_if_every_node_read_it'] / 2**30:.0f}"
          f" GiB and {md['digest_node_seconds_if_every_node_read_it']} node-seconds if every node read the digest. "
          "Not modelled: the file system's contention under 1,000 readers.", ""]
    return L


def probes_section(rep):
    pr = rep.get("caps_probes") or []
    if not pr:
        return []
    L = ["## QEMU capability probes during guest creation", "",
         f"{len(pr)} guest creation(s) in this run made libvirt probe QEMU's capabilities again (seconds each; "
         "such starts are not used for the figures above). libvirt keeps the host's CPUID data with the cached "
         "capabilities and takes the cache as stale when the CPUID it reads now differs; CPUID leaf 0x1f (and "
         "0xb) returns in EDX the x2APIC id of the CPU the reading process runs on, so a cache probed on one CPU "
         "is stale for a keeper on another. The node's cache (state_dir/libvirt-caps) holds one CPU's data; the "
         "keeper refreshes it after a probe, so jobs on different CPUs of a node probe in turn. A probe with the "
         "same CPU on both sides has another cause (QEMU's binary changed: its ctime; a test of the suite "
         "touches it on purpose).", "",
         "| where | job | node | keeper's CPUs | cache the job got: probed on CPU |", "|---|---|---|---|---|"]
    for p in pr:
        L.append(f"| {p['where']} | {p['job']} | {p.get('node') or '—'} | {p.get('keeper_cpus')} | "
                 f"{p.get('cache_probed_on_cpu')} |")
    return L + [""]
