"""Item 9: the prolog's image step per node, and the head's digest."""

import os
import re
import shutil
import time

from ..cluster import epilog
from .scaling import prolog_once
from ..marks import LOG_LINE
from ..util import BENCH_STATE, GID, UID, USER, log, med, ratio, read, run, stats


IMAGE_STEP = "image opened and checked as the user"   # lib/job/vm_job.cpp check_request_as_user
IMAGE_HEAD_BYTES = 2 << 20                          # look_at_image: the first 2 MiB and the last 512 bytes


def prolog_step_ms(ctx, node, jid):
    """The prolog's own step times (log::Steps, ms) from the job's admin log."""
    out = {}
    for line in read(os.path.join(ctx.log_dir, node, f"job_{jid}.log")).splitlines():
        x = LOG_LINE.match(line)
        if not x or not x.group(2).endswith("prolog"):
            continue
        st = re.match(r"prolog: (.*) \((\d+) ms\)$", re.sub(r"^job \d+( on \S+)?: ", "", x.group(5)))
        if st:
            out[st.group(1)] = int(st.group(2))
    return out


def as_user_ms(argv, **kw):
    """Wall time (ms) of argv run as the job's user (setpriv: no PAM, no session), and its result."""
    t0 = time.time()
    r = run(["setpriv", f"--reuid={UID}", f"--regid={GID}", "--init-groups", "--"] + argv, **kw)
    return (time.time() - t0) * 1000, r


def image_step_prologs(ctx, n, cold, rec):
    """Each node's prolog of an n-node job, one at a time; cold: the node's kept qemu-img verdicts removed
    first (the first job with this image version on the node), after the same qemu-img run by hand."""
    image = ctx.env["VM_TEST_IMAGE"]
    nodes = [f"node{k + 1}" for k in range(n)]
    jid = ctx.ids.take(0)
    kind = "cold" if cold else "warm"
    for node in nodes:
        if cold:
            shutil.rmtree(os.path.join(BENCH_STATE, node, "image-checks"), ignore_errors=True)
            dt, r = as_user_ms(["qemu-img", "info", "--output=json", "-f", "qcow2", image])
            if r.returncode == 0:
                rec["by_hand_qemu_img_ms"].append(dt)
        m = prolog_once(ctx, node, jid, "node1" if n == 1 else f"node[1-{n}]")
        steps = prolog_step_ms(ctx, node, jid)
        if steps.get(IMAGE_STEP) is None:
            raise RuntimeError(f"the prolog of bench job {jid} logged no step \"{IMAGE_STEP}\" (an older build?)")
        total = (m["prolog_end"] - m["prolog_start"]) * 1000
        rec[f"{kind}_image_ms"].append(steps[IMAGE_STEP])
        rec[f"{kind}_prolog_ms"].append(total)
        rec[f"{kind}_other_ms"].append(total - steps[IMAGE_STEP])
    for node in nodes:
        epilog(ctx, ctx.cfg, node, jid)


def image_digest_pair(ctx, rep, out):
    """The head's digest as its keeper runs it (slurm-vm-keeper --image-digest FD SIZE, as the user, on a
    descriptor of the image), sha256sum and openssl's SHA-256 of the same file as the user, in rotating
    order (sha256sum is the digest's reference; openssl, like the keeper's nettle, uses the CPU's SHA
    instructions where it has them)."""
    image = ctx.env["VM_TEST_IMAGE"]
    size = os.path.getsize(image)
    fd = os.open(image, os.O_RDONLY | os.O_CLOEXEC)
    try:
        runs = [("digest_ms", [ctx.tools["keeper"], "--image-digest", str(fd), str(size)], {"pass_fds": (fd,)}),
                ("sha256sum_ms", ["sha256sum", image], {}),
                ("openssl_ms", ["openssl", "dgst", "-sha256", "-r", image], {})]
        got = {}
        for key, argv, kw in runs[rep % 3:] + runs[:rep % 3]:
            dt, r = as_user_ms(argv, **kw)
            if r.returncode != 0:
                raise RuntimeError(f"{argv[0]} as {USER} exited {r.returncode}: {r.stderr.strip()[-200:]}")
            out[key].append(dt)
            got[key] = r.stdout.split()[0].removeprefix("sha256:")
        if not got["digest_ms"] == got["sha256sum_ms"] == got["openssl_ms"]:
            raise RuntimeError(f"the keeper's digest {got['digest_ms']} is not sha256sum's {got['sha256sum_ms']} "
                               f"and openssl's {got['openssl_ms']}")
    finally:
        os.close(fd)


def image_model(rows, digest, size, nodes=1000):
    """A job of `nodes` nodes, from the measured figures: every node's prolog checks the image itself, at
    once and alone (per node); the head's keeper reads the digest once per job, beside its guest's start
    (per job); the image's file system serves each node's header reads and the one digest read."""
    per = rows.get("3") or rows.get("1")
    warm, cold, dig = med(per["warm_image_ms"]), med(per["cold_image_ms"]), med(digest)
    head = min(size, IMAGE_HEAD_BYTES) + 512
    return {"nodes": nodes, "from": "the 3-node job's per-node medians",
            "per_node_wall_ms": {"warm": warm, "first_use_of_the_version": cold},
            "job_prolog_wall_ms": {"warm": warm, "first_use_of_the_version": cold},
            "node_seconds": {"warm": round(nodes * warm / 1000, 1), "first_use_of_the_version":
                             round(nodes * cold / 1000, 1)},
            "digest_once_ms": dig, "digest_on_critical_path": False,
            "bytes_read_from_the_image": {"header_reads": nodes * head, "digest": size,
                                          "digest_if_every_node_read_it": nodes * size},
            "digest_node_seconds_if_every_node_read_it": round(nodes * dig / 1000, 1) if dig else None}


def item_image_step(ctx, repeat, sizes=(1, 3)):
    """The prolog's image step (open as the user, our header reading as the user, qemu-img on a version's
    first use on the node, identity) per node of 1- and 3-node jobs, warm and cold, interleaved; the head
    keeper's digest against sha256sum; and what a 1,000-node job would cost."""
    recs = {n: {k: [] for k in ("warm_image_ms", "warm_prolog_ms", "warm_other_ms", "cold_image_ms",
                                "cold_prolog_ms", "cold_other_ms", "by_hand_qemu_img_ms")} for n in sizes}
    digest = {"digest_ms": [], "sha256sum_ms": [], "openssl_ms": []}
    for rep in range(repeat):
        for n in sizes:
            log(f"image step: {n}-node job, warm then cold (rep {rep + 1}/{repeat})")
            image_step_prologs(ctx, n, False, recs[n])
            image_step_prologs(ctx, n, True, recs[n])
        log(f"image step: the head's digest, sha256sum and openssl of the image, as {USER} (rep {rep + 1}/{repeat})")
        image_digest_pair(ctx, rep, digest)
    rows = {}
    for n in sizes:
        rows[str(n)] = {}
        for k, v in recs[n].items():
            st = stats(v)
            if st:
                st.pop("values")
            rows[str(n)][k] = st
    dstats = {k: stats(v) for k, v in digest.items()}
    for v in dstats.values():
        if v:
            v.pop("values")
    size = os.path.getsize(ctx.env["VM_TEST_IMAGE"])
    three = rows[str(sizes[-1])]
    return {"title": "The prolog's image step per node, and the head's digest",
            "what": "each node's prolog of a 1- and a 3-node job, one at a time, the image step's time as the "
                    "prolog logs it (open as the user, our header reading as the user, qemu-img as the user unless "
                    "the node kept its verdict on this version, identity); warm: the node has checked this version "
                    "before; cold: its kept verdicts removed first, after the same qemu-img run by hand as the user; "
                    "the rest of the same prolog as the baseline; the head's digest (the keeper's helper as the "
                    "user on a descriptor of the image) against sha256sum and openssl of the same file as the user, "
                    "in rotating order, the file in the page cache for all three; warm, cold and the digest "
                    "interleaved in every repetition",
            "image_bytes": size, "repeat": repeat, "rows": rows, "digest": dstats,
            "plugin_ms": three["warm_image_ms"], "raw_ms": three["warm_other_ms"],
            "ratio": ratio(med(three["warm_image_ms"]), med(three["warm_other_ms"])),
            "model": image_model(rows, dstats["digest_ms"], size),
            "target": "none (figure recorded)"}
