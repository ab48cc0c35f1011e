"""Items 1 and 2: host-side start overhead and teardown, at prolog level."""

import os

from ..plugin import plugin_start, plugin_stop
from ..raw import raw_run
from ..util import CapsProbed, log, med, ratio, stats
from ..waterfall import END_ROWS, START_ROWS, waterfall


def probe_retry(ctx, fn, tries=3):
    """fn() again (twice at most) when its guest creation probed QEMU's
    capabilities: the probe refreshed the cache for that CPU."""
    for attempt in range(1, tries + 1):
        try:
            return fn()
        except CapsProbed as e:
            log(f"  {e}; {'measuring again' if attempt < tries else 'giving up'}")
            ctx.errors.append(f"{e} ({'measured again' if attempt < tries else 'given up'})")
            if attempt == tries:
                raise


def plugin_once(ctx, i, repeat):
    """One prolog-level start (prolog, keeper, first command) and its epilog."""
    def start():
        jid = ctx.ids.take(0)
        log(f"rep {i + 1}/{repeat}: plugin start of bench job {jid} (prolog + keeper to ready)")
        return plugin_start(ctx, ctx.node, jid, cpu=0, keep_artifacts=os.path.join(ctx.tmp, f"art-{jid}"),
                            first_command=True)
    res = probe_retry(ctx, start)
    res["epilog_ms"] = plugin_stop(ctx, ctx.node, res)
    log(f"  prolog {res['prolog_ms']:.0f} ms, keeper to created {res['keeper_host_ms']:.0f} ms, "
        f"boot {res['boot_ms']:.0f} ms, first command {res.get('first_command_ms') or 0:.0f} ms, "
        f"epilog {res['epilog_ms'] or 0:.0f} ms")
    res.pop("keeper")
    res.pop("cgroups", None)
    return res


def raw_once(ctx, art, i, repeat):
    """One raw start of the artifacts art: boot to SSH, first command, destroy."""
    log(f"rep {i + 1}/{repeat}: raw start (qemu-img + virDomainCreateXML, boot to SSH, destroy)")
    r = probe_retry(ctx, lambda: raw_run(ctx, art, f"s{i}", cpu=0, first_command=True, strict=True))
    log(f"  start {r['start_ms']:.0f} ms, boot to ssh {r['wait_ms']:.0f} ms, "
        f"first command {r.get('exec_ms', 0):.0f} ms, teardown {r['teardown_ms']:.0f} ms")
    return r


def item_start_and_teardown(ctx, repeat):
    """Items 1 and 2 (and the raw boot-to-SSH baseline of item 3)."""
    plug, raw = [], []
    art = None
    for i in range(repeat):
        order = ["plugin", "raw"] if (i % 2 == 0 or art is None) else ["raw", "plugin"]
        for what in order:
            if what == "plugin":
                res = plugin_once(ctx, i, repeat)
                plug.append(res)
                art = os.path.join(ctx.tmp, f"art-{res['job']}")
            else:
                raw.append(raw_once(ctx, art, i, repeat))
    ctx.last_artifacts = art
    item1 = start_item(plug, raw)
    item2 = teardown_item(plug, raw)
    ctx.raw_boot_to_ssh = stats([x["start_ms"] + x["wait_ms"] for x in raw])
    ctx.waterfall["prolog_level"] = prolog_waterfall(plug, raw)
    for x in plug:
        x.pop("marks", None)
    return item1, item2


def start_item(plug, raw):
    p_start = stats([x["host_start_ms"] for x in plug])
    r_start = stats([x["start_ms"] for x in raw])
    return {
        "title": "Host-side start overhead",
        "what": "prolog wall time + keeper launch to domain created (= keeper to ready minus guest boot)",
        "baseline": "a program that loads libvirt, then qemu-img create of the same overlay + embedded libvirt root "
                    "(same qemu.conf, warm capabilities cache) + virConnectOpen + virDomainCreateXML of the same "
                    "domain XML; from its launch by bench/run, as the keeper's (before 2026-11-27 evening: from its "
                    "own clock, started once libvirt was loaded, which left out its start)",
        "plugin_ms": p_start, "raw_ms": r_start,
        "parts": {"prolog_ms": stats([x["prolog_ms"] for x in plug]),
                  "keeper_launch_to_created_ms": stats([x["keeper_host_ms"] for x in plug]),
                  "keeper_create_ms (guest.json)": stats([x["guest"]["create_ms"] for x in plug]),
                  "raw_launch_ms (program start, libvirt loaded)": stats(
                      [x["start_ms"] - x["in_process_start_ms"] for x in raw]),
                  "raw_in_process_start_ms": stats([x["in_process_start_ms"] for x in raw]),
                  "raw_overlay_ms": stats([x["overlay_ms"] for x in raw]),
                  "raw_connect_ms": stats([x["connect_ms"] for x in raw]),
                  "raw_create_ms": stats([x["define_create_ms"] for x in raw]),
                  "guest_boot_to_ready_ms (plugin)": stats([x["boot_ms"] for x in plug]),
                  "guest_boot_to_ssh_ms (raw)": stats([x["wait_ms"] for x in raw])},
        "ratio": ratio(med(p_start), med(r_start)), "target": "<= 1.05x", "target_ratio": 1.05,
    }


def teardown_item(plug, raw):
    p_down = stats([x["epilog_ms"] for x in plug])
    r_down = stats([x["teardown_ms"] for x in raw])
    return {
        "title": "Teardown",
        "what": "epilog wall time with the keeper and the booted guest still up (stops the keeper, which destroys "
                "the guest; releases the lease; deletes the job directory and the ledger)",
        "baseline": "virDomainDestroy of the same booted domain + deleting its directory",
        "plugin_ms": p_down, "raw_ms": r_down,
        "parts": {"raw_destroy_ms": stats([x["destroy_ms"] for x in raw]),
                  "raw_remove_ms": stats([x["remove_ms"] for x in raw])},
        "ratio": ratio(med(p_down), med(r_down)), "target": "<= 1.0x", "target_ratio": 1.0,
    }


def prolog_waterfall(plug, raw):
    runs = [x["marks"] for x in plug]
    return {
        "what": "bench/run runs the prolog, the keeper (in a 1-CPU cgroup), the first command over SSH (through "
                "the keeper's SSH socket, as slurm-vm-exec) and the epilog itself, one after the other; no Slurm",
        "start": waterfall(runs, START_ROWS, "harness", "prolog_start", raw,
                           "Start (prolog level)", "the prolog is launched"),
        "end": waterfall(runs, END_ROWS, "harness", "epilog_start", raw,
                         "End (prolog level)", "the epilog is launched (guest up)"),
        "first_command_ms": stats([x.get("first_command_ms") for x in plug]),
    }
