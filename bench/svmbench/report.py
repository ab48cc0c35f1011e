"""The report: the machine's description and the Markdown document."""

import os
import platform

from .items.concurrency import floor_words
from .sections import image_step_section, probes_section, scaling_section, waterfall_section
from .text import fmt, fmt_rate, short, times, yesno
from .util import REPO, read, run


def machine(ctx):
    cpu = ""
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal"):
            mem = int(line.split()[1]) // 1024
    v = {}
    for k, cmd in (("qemu", ["qemu-system-x86_64", "--version"]), ("libvirt", ["virsh", "--version"]),
                   ("slurm", ["sinfo", "--version"])):
        try:
            v[k] = run(cmd, env=ctx.env).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            v[k] = None
    try:
        g = run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]).stdout.strip() or "unknown"
        dirty = run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    except OSError:  # no git (e.g. the Debian 13 matrix root)
        g, dirty = "unknown (no git)", ""
    return {"cpu_model": cpu, "nproc": os.cpu_count(), "memory_mib": mem, "kernel": platform.release(),
            "accelerator": "TCG (libvirt domain type 'qemu'): KVM is not usable here",
            "versions": v, "git_commit": g + ("+local changes" if dirty else "")}


def summary_head(rep):
    """The report's head and the summary table's header."""
    m = rep["machine"]
    L = [f"# slurm-vm benchmark — {rep['date']}", "",
         f"Command: `{rep['command']}` ({'quick' if rep['quick'] else 'full'}, {rep['repeat']} repetition(s)); "
         f"commit {m['git_commit']}.", "",
         f"Machine: {m['cpu_model']}, {m['nproc']} CPUs (`nproc`), {m['memory_mib']} MiB, Linux {m['kernel']}; "
         f"{m['accelerator']}. {m['versions'].get('qemu')}; libvirt {m['versions'].get('libvirt')}; "
         f"{m['versions'].get('slurm')}.", "",
         "Figures: median (min–max, n). Ratios are medians over medians.", "",
         "| # | figure | slurm-vm | baseline (same run) | ratio | target | met |",
         "|---|--------|----------|---------------------|-------|--------|-----|"]
    return L


def summary_start_rows(rep):
    """Summary rows 1-3: start, teardown, time to user code."""
    L = []
    for key, num in (("start_overhead", 1), ("teardown", 2), ("time_to_user_code", 3)):
        it = rep["items"].get(key)
        if not it or "error" in it or "skipped" in it:
            why = short((it or {}).get("error") or (it or {}).get("skipped") or "not run")
            L.append(f"| {num} | {key.replace('_', ' ')} | not measured: {why} | | | | |")
            continue
        extra = f"; +{it['difference_ms']:.0f} ms" if it.get("difference_ms") is not None else ""
        L.append(f"| {num} | {it['title']} | {fmt(it['plugin_ms'])} | {fmt(it['raw_ms'])} | "
                 f"{it['ratio']}×{extra} | {it['target']} | {yesno(it.get('met'))} |")
    return L


def summary_concurrency_row(rep):
    """Summary row 4: concurrency."""
    L = []
    it = rep["items"].get("concurrency")
    if it and "rows" in it:
        rows = it["rows"]
        last = list(rows)[-1]
        L.append(f"| 4 | host-side start, {last} at once vs 1 (all guests created) | "
                 f"{fmt(rows[last]['plugin_all_created_ms'])} vs {fmt(rows['1']['plugin_all_created_ms'])} | raw: "
                 f"{fmt(rows[last]['raw_all_created_ms'])} vs {fmt(rows['1']['raw_all_created_ms'])} "
                 f"({times(it['raw_ratio'])}) | {times(it['ratio'])} | {it['target']} | {yesno(it.get('met'))}"
                 + (f": {short(it['failed_at_most'], 200)}" if it.get("failed_at_most") else "")
                 + (f"; {floor_words(it['cpu_floor'], last)}" if it.get("cpu_floor") else "") + " |")
    else:
        why = short((it or {}).get("error") or (it or {}).get("skipped") or "not run")
        L.append(f"| 4 | concurrency | not measured: {why} | | | | |")
    return L


def summary_host_rows(rep):
    """Summary rows 5, 5b and 6: device layer, network setup, KVM."""
    L = []
    it = rep["items"].get("devices")
    if it and "scenarios" in it:
        s = it["scenarios"]["one_gpu_one_vf"]
        L.append(f"| 5 | device layer, 1 GPU + 1 VF per job (8 GPUs, 64 VFs) | plan+bind+release "
                 f"{s['per_job_ms']['median']:.2f} ms/job | — | — | recorded | — |")
    else:
        L.append(f"| 5 | device layer | not measured: {short((it or {}).get('error', 'not run'))} | | | | |")
    it = rep["items"].get("network")
    if it and "sizes" in it:
        z = it["sizes"]
        L.append(f"| 5b | prolog network setup per node, 2-node / 1,000-node job | "
                 f"{z['2']['setup_ms']['median']:.1f} ms / {z['1000']['setup_ms']['median']:.1f} ms | — | — | "
                 "recorded | — |")
    else:
        L.append(f"| 5b | prolog network setup | not measured: {short((it or {}).get('error', 'not run'))} | | | | |")
    it = rep["items"].get("guest_efficiency", {})
    L.append(f"| 6 | guest efficiency (KVM) | {it.get('status', 'not run')} | | | | |")
    return L


def summary_stock_rows(rep):
    """Summary row 3b (stock cloud image), then the network setup's table."""
    L = []
    it = rep["items"].get("time_to_user_code_stock")
    if it and "plugin_ms" in it:
        L.append(f"| 3b | {it['title']} | {fmt(it['plugin_ms'])} | test image {fmt(it['raw_ms'])} | "
                 f"{times(it['ratio'])} | reported | — |")
    else:
        why = short((it or {}).get("error") or (it or {}).get("skipped") or "not run")
        L.append(f"| 3b | time to user code, stock cloud image | not measured: {why} | | | | |")
    it = rep["items"].get("network")
    if it and "sizes" in it:
        L += [f"### {it['title']}", "", it["what"] + f"; {it['rounds']} round(s).", "",
              "| job size | entries per node | plan | setup | removal |", "|---|---|---|---|---|"]
        for n, z in it["sizes"].items():
            def f3(x):
                return f"{x['median']:.3f} ms ({x['min']:.3f}–{x['max']:.3f})" if x else "—"
            L.append(f"| {n} nodes | {z['entries_per_node']} | {f3(z['plan_ms'])} | {f3(z['setup_ms'])} | "
                     f"{f3(z['remove_ms'])} |")
        L.append("")
    return L


def summary_share_rows(rep):
    """Summary rows 7-9: shares and the image step."""
    L = []
    it = rep["items"].get("shares")
    if it and "figures" in it:
        f, rt = it["figures"], it["ratios_to_host"]
        L.append(f"| 7 | share read / write from the guest, virtio-fs | {fmt_rate(f['virtiofs']['read_mib_s'])} / "
                 f"{fmt_rate(f['virtiofs']['write_mib_s'])} | host {fmt_rate(f['host']['read_mib_s'])} / "
                 f"{fmt_rate(f['host']['write_mib_s'])} | {rt['virtiofs_read']}× / {rt['virtiofs_write']}× | "
                 "reported | — |")
        L.append(f"| 8 | same over 9p | {fmt_rate(f['9p']['read_mib_s'])} / {fmt_rate(f['9p']['write_mib_s'])} | "
                 f"host (as above) | {rt['9p_read']}× / {rt['9p_write']}× | reported | — |")
    else:
        why = short((it or {}).get("error") or (it or {}).get("skipped") or "not run")
        L.append(f"| 7 | share throughput | not measured: {why} | | | | |")
    it = rep["items"].get("image_step")
    if it and "rows" in it:
        r1, r3, md = it["rows"].get("1", {}), it["rows"].get("3", {}), it["model"]
        L.append(f"| 9 | the prolog's image step per node, 1- / 3-node job (warm); 1,000 nodes computed | "
                 f"{fmt(r1.get('warm_image_ms'))} / {fmt(r3.get('warm_image_ms'))}; 1,000 nodes: "
                 f"{md['job_prolog_wall_ms']['warm']:.0f} ms per node + the head's digest once, beside its guest | "
                 f"the rest of the same prolog {fmt(it['raw_ms'])} | {it['ratio']}× | reported | — |")
    elif it:
        L.append(f"| 9 | the prolog's image step | not measured: {short(it.get('error') or it.get('skipped'))} "
                 "| | | | |")
    it = rep["items"].get("mpi_launch")
    if it and "srun_ms" in it:
        L.append(f"| 10 | an MPI step of 4 ranks in 2 guests, `srun --mpi=pmix` | {fmt(it['srun_ms'])} | "
                 f"`mpirun` in the same guests {fmt(it['mpirun_ms'])} | {it['ratio']}× | reported | — |")
    elif it:
        L.append(f"| 10 | an MPI step's launch | not measured: {short(it.get('error') or it.get('skipped'))} "
                 "| | | | |")
    it = rep["items"].get("checkpoint")
    if it and "save_ms_per_gib" in it:
        L.append(f"| 11 | a resumable job's guest: save / restore per GiB of guest memory | "
                 f"{fmt(it['save_ms_per_gib'])} / {fmt(it['restore_ms_per_gib'])} | its boot to ready "
                 f"{fmt(it['boot_ms'])} | restore {it['ratio']}× boot | reported | — |")
    elif it:
        L.append(f"| 11 | a resumable job's save and restore | not measured: "
                 f"{short(it.get('error') or it.get('skipped'))} | | | | |")
    return L


def details_start(rep):
    """Details of items 1-3."""
    L = []
    for key in ("start_overhead", "teardown", "time_to_user_code"):
        it = rep["items"].get(key)
        if not it or "plugin_ms" not in it:
            continue
        L += [f"### {it['title']}", "", f"- slurm-vm: {it['what']}: {fmt(it['plugin_ms'])}",
              f"- baseline: {it['baseline']}: {fmt(it['raw_ms'])}"]
        for k, v in it.get("parts", {}).items():
            L.append(f"- {k}: {fmt(v)}")
        if key == "start_overhead" and rep.get("caps_cache"):
            c = rep["caps_cache"]
            L.append(f"- QEMU capabilities cache files: raw baseline's cache {c['raw_baseline_cached_files']}, "
                     f"the prolog's cache (state_dir/libvirt-caps) {c['plugin_cache_files']} after a prolog has run"
                     + (" — the prolog's cache is empty, so every keeper's virDomainCreateXML probes QEMU first"
                        if c["plugin_cache_files"] == 0 and c["raw_baseline_cached_files"] > 0 else ""))
        L.append("")
    return L


def details_concurrency(rep):
    """Details of item 4."""
    L = []
    it = rep["items"].get("concurrency")
    if it and "rows" in it:
        L += [f"### {it['title']}", "", it["what"] + ".", "", "Note: " + it["note"] + ".", "",
              "| at once | slurm-vm: all created | slurm-vm: all ready | per-job prolog | all torn down | "
              "raw: all created | raw: all SSH |", "|---|---|---|---|---|---|---|"]
        for n, r in it["rows"].items():
            L.append(f"| {n} | {fmt(r['plugin_all_created_ms'])} | {fmt(r['plugin_all_ready_ms'])} | "
                     f"{fmt(r['plugin_prolog_per_job_ms'])} | {fmt(r['plugin_all_torn_down_ms'])} | "
                     f"{fmt(r['raw_all_created_ms'])} | {fmt(r['raw_all_ssh_ms'])} |")
        for n, errs in it.get("failures", {}).items():
            L.append(f"\n**{len(errs)} job start(s) failed with {n} at once**: {short(errs[0], 600)}")
        L += ["", f"Ratios {list(it['rows'])[-1]} vs 1: host-side start {times(it['ratio'])} (raw "
                  f"{times(it['raw_ratio'])}); until all ready {times(it['ratio_ready'])} (raw until all SSH "
                  f"{times(it['raw_ratio_ssh'])}).", ""]
        f = it.get("cpu_floor")
        if f:
            n = list(it["rows"])[-1]
            L += ["CPU time (the whole machine's, from /proc/stat, until every guest is created): "
                  + "; ".join(f"{k} at once {fmt(r['plugin_cpu_ms'])} (raw {fmt(r['raw_cpu_ms'])})"
                              for k, r in it["rows"].items()) + ". "
                  f"One start keeps {f['one_start_cpu_ms']:.0f} ms of CPU busy in {f['one_start_wall_ms']:.0f} ms. "
                  f"{n} starts need {n} times that CPU time, which {f['cpus']} CPU(s) give in no less than "
                  f"{f['floor_ratio']}× one start's time, whatever starts the guests (the raw baseline too); "
                  f"{it['target']} needs {f['cpus_for_target']} CPUs at least.", ""]
    return L


def details_rest(rep):
    """Details of the device layer, shares and KVM; the run's problems."""
    L = []
    it = rep["items"].get("devices")
    if it and "scenarios" in it:
        L += [f"### {it['title']}", "", it["what"] + f"; {it['rounds']} round(s); tree restored byte for byte: "
              f"{it['restored']}.", "",
              "| scenario | samples | plan | prepare | release | per job | sysfs writes/job |",
              "|---|---|---|---|---|---|---|"]
        for s in it["scenarios"].values():
            def f3(x):
                return f"{x['median']:.3f} ms ({x['min']:.3f}–{x['max']:.3f})" if x else "—"
            L.append(f"| {s['what']} | {s['samples']} | {f3(s['plan_ms'])} | {f3(s['prepare_ms'])} | "
                     f"{f3(s['release_ms'])} | {f3(s['per_job_ms'])} | {s['sysfs_writes_per_job']} |")
        L.append("")
    it = rep["items"].get("shares")
    if it and "figures" in it:
        v = it["virtiofs_over_9p"]
        L += [f"### {it['title']}", "", it["what"] + ".", "",
              f"virtio-fs over 9p: read {times(v['read'])}, write {times(v['write'])}.", ""]
    it = rep["items"].get("mpi_launch")
    if it and "srun_ms" in it:
        L += [f"### {it['title']}", "", it["what"] + ".", "",
              f"- srun --mpi=pmix: {fmt(it['srun_ms'])}", f"- mpirun: {fmt(it['mpirun_ms'])}", ""]
    it = rep["items"].get("checkpoint")
    if it and "runs" in it:
        L += [f"### {it['title']}", "", it["what"] + ".", "", "| guest MiB | boot to ready ms | save ms | "
              "restore ms | saved MiB |", "|---|---|---|---|---|"]
        L += [f"| {r['mib']:.0f} | {r['boot_ms']:.0f} | {r['save_ms']:.0f} | {r['restore_ms']:.0f} | "
              f"{r['save_mib']} |" for r in it["runs"]] + [""]
    it = rep["items"].get("guest_efficiency")
    if it:
        L += [f"### {it['title']}", "", it["status"] + ".", "", "Checks: " +
              ", ".join(f"{k}={v}" for k, v in it.get("checks", {}).items()), ""]
    if rep["errors"]:
        L += ["## Problems during the run", ""] + [f"- {e}" for e in rep["errors"]] + [""]
    return L


def markdown(rep):
    L = summary_head(rep)
    L += summary_start_rows(rep)
    L += summary_concurrency_row(rep)
    L += summary_host_rows(rep)
    L += summary_stock_rows(rep)
    L += summary_share_rows(rep)
    L += [""] + waterfall_section(rep) + scaling_section(rep) + probes_section(rep)
    L += ["", "## Details", ""]
    L += details_start(rep)
    L += image_step_section(rep)
    L += details_concurrency(rep)
    L += details_rest(rep)
    return "\n".join(L)
