"""The raw baseline: the same domain XML and seed, directly through libvirt."""

import grp
import json
import os
import re
import shlex
import shutil
import subprocess
import time

from .cluster import RAW_TAPS, RES, into_cgroups, make_cgroup, raw_netns
from .plugin import ssh_argv
from .util import BENCH_SCRATCH, BENCH_STATE, CapsProbed, caps_cpu, read, write


# ----------------------------------------------------------------------------
# The raw baseline: the same domain XML and seed, directly through libvirt

def raw_qemu_conf(src, dst, gid):
    """The job's qemu.conf for the raw baseline, with QEMU in /dev/kvm's group
    (the job's own group has no /dev/kvm ACL once its epilog ran, and libvirt
    takes cached capabilities as stale when the guest's identity cannot open
    /dev/kvm)."""
    write(dst, re.sub(r'(?m)^group = .*$', f'group = "+{gid}"', read(src)))


def raw_prepare(ctx, art, name):
    """A directory for a raw start from saved artifacts; returns (dir, xml, plan)."""
    meta = json.loads(read(os.path.join(art, "meta.json")))
    plan = json.loads(read(os.path.join(art, "plan.json")))
    d = os.path.join(BENCH_STATE, "raw", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    RES.dirs.append(d)
    os.chmod(d, 0o755)
    kvm_gid = grp.getgrnam("kvm").gr_gid  # QEMU's group in the raw baseline (plain libvirt: /dev/kvm's group)
    for f in ("seed.iso",):
        if os.path.exists(os.path.join(art, f)):
            shutil.copyfile(os.path.join(art, f), os.path.join(d, f))
            os.chown(os.path.join(d, f), 0, kvm_gid)
            os.chmod(os.path.join(d, f), 0o640)
    write(os.path.join(d, "console.log"), "", 0o660)
    os.chown(os.path.join(d, "console.log"), 0, kvm_gid)
    raw_qemu_conf(os.path.join(art, "qemu.conf"), os.path.join(d, "qemu.conf"), kvm_gid)
    xml = read(os.path.join(art, "domain.xml"))
    for k in ("kernel", "initrd"):
        # QEMU boots the job's own copies; a plain libvirt start boots the files themselves.
        if plan.get(k + "_copy") and plan.get(k):
            xml = xml.replace(f">{plan[k + '_copy']}<", f">{plan[k]}<")
    ov = os.path.join(BENCH_SCRATCH, "raw", name)
    shutil.rmtree(ov, ignore_errors=True)
    os.makedirs(ov)
    RES.dirs.append(ov)
    if plan.get("overlay_dir"):
        xml = xml.replace(f"'{plan['overlay_dir']}/", f"'{ov}/")
    else:
        xml = xml.replace(f"'{meta['jobdir']}/overlay.qcow2'", f"'{ov}/overlay.qcow2'")
    xml = xml.replace(meta["jobdir"], d)
    xml = re.sub(r"<name>[^<]*</name>", f"<name>svm-bench-raw-{name}</name>", xml, count=1)
    xml = re.sub(r"<uuid>[^<]*</uuid>", "", xml)
    xml = xml.replace("<target dev='svmtap'/>", f"<target dev='svmr{next(RAW_TAPS)}'/>")
    write(os.path.join(d, "domain.xml"), xml)
    return d, plan, kvm_gid


def raw_cmd(ctx, art, name, wait_ssh=True, destroy=True, timeout=600, first_command=False, cpu=None):
    d, plan, kvm_gid = raw_prepare(ctx, art, name)
    if cpu is not None:
        # The job's XML pins the guest to the job's CPUs; the raw start runs in its own 1-CPU cpuset.
        xf = os.path.join(d, "domain.xml")
        write(xf, re.sub(r"(<(?:vcpupin|emulatorpin)\b[^>]*\bcpuset=')[^']*'", rf"\g<1>{cpu}'", read(xf)))
    cmd = [ctx.bins["svm-bench-raw-start"], "--xml", os.path.join(d, "domain.xml"),
           "--root", os.path.join(d, "libvirt"), "--qemu-conf", os.path.join(d, "qemu.conf"),
           "--caps-from", ctx.raw_caps,
           "--overlay", os.path.join(BENCH_SCRATCH, "raw", name, "overlay.qcow2"), "--backing", plan["image"],
           "--backing-format", plan["image_format"], "--size", str(plan["image_virtual_size"]),
           "--group", str(kvm_gid), "--timeout", str(timeout)]
    if plan.get("netns"):
        cmd += ["--netns", raw_netns(ctx)]
    if plan.get("virtiofsd"):
        # The shares over virtio-fs: virtiofsd started by hand, as root, by the raw start (timed).
        for i, share in enumerate(plan.get("shares", [])):
            cmd += ["--virtiofs", f"{d}/share{i}.sock={share}"]
    if wait_ssh and plan.get("ip"):
        cmd += ["--wait-ssh", plan["ip"]]
        key = os.path.join(art, "id_ed25519")
        if first_command and os.path.exists(key) and plan.get("user"):
            # The first command over SSH, straight to the guest's address (no keeper, no proxy).
            ssh = ssh_argv(key, os.path.join(art, "known_hosts"), plan.get("hostname", ""), plan["user"], plan["ip"])
            cmd += ["--exec", " ".join(shlex.quote(x) for x in ssh + ["true"]) + " </dev/null >/dev/null"]
    if destroy:
        cmd += ["--destroy", "--remove", d, "--remove", os.path.join(BENCH_SCRATCH, "raw", name)]
    return cmd, d


def raw_run(ctx, art, name, cpu, timeout=600, first_command=False, strict=False):
    """One raw start; strict: a start during which libvirt probed QEMU raises CapsProbed."""
    cmd, d = raw_cmd(ctx, art, name, timeout=timeout, first_command=first_command, cpu=cpu)
    cache_cpu = caps_cpu(os.path.join(ctx.raw_caps, "cache/qemu/capabilities"))
    cg = make_cgroup(f"raw_{name}", cpu)
    logf = os.path.join(ctx.tmp, f"raw-{name}.log")
    with open(logf, "w") as lf:
        t0 = time.time()
        p = RES.add_proc(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=lf, text=True,
                                          preexec_fn=into_cgroups(cg), close_fds=True))
        outp, _ = p.communicate(timeout=timeout + 60)
    if p.returncode != 0:
        # libvirt's own lines (version, hostname) come first: its error and ours last.
        errors = [ln for ln in read(logf).splitlines() if " error : " in ln or "svm-bench-raw-start" in ln]
        raise RuntimeError(f"raw start {name} failed (exit {p.returncode}): "
                           f"{' | '.join(errors[-3:]) or read(logf)[-400:]}")
    r = json.loads(outp.strip().splitlines()[-1])
    r["launch"] = t0
    # From the launch, as the keeper's figure is (bench/run launches both the
    # same way): the program's start and libvirt's loading count, as they do
    # for an admin who runs virsh. Its own clock starts after them.
    r["in_process_start_ms"] = r["start_ms"]
    r["start_ms"] = (r["created_at"] - t0) * 1000
    if r.get("waited_for") not in ("ssh", "none"):
        raise RuntimeError(f"raw start {name}: the guest did not answer on port 22 ({r.get('waited_for')})")
    if r.get("caps_probed"):
        ctx.probes.append({"where": "raw baseline", "job": name, "node": None, "keeper_cpus": str(cpu),
                           "cache_probed_on_cpu": cache_cpu})
        if strict:
            raise CapsProbed(f"raw start {name} (CPU {cpu}, cached capabilities probed on CPU {cache_cpu}): "
                             "libvirt probed QEMU's capabilities while creating the domain")
        ctx.errors.append(f"raw start {name} (CPU {cpu}, cached capabilities probed on CPU {cache_cpu}): libvirt "
                          "probed QEMU's capabilities while creating the domain; its figures include the probe")
    if first_command and r.get("exec_rc") not in (None, 0):
        ctx.errors.append(f"raw start {name}: the first command over SSH failed (exit {r.get('exec_rc')}); "
                          "no raw baseline for it from this start")
    return r
