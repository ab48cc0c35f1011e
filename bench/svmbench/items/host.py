"""Items 5, 5b and 6: the device layer, the prolog's network setup, KVM."""

import json
import os
import re
import subprocess
import time

from ..cluster import RES
from ..raw import raw_cmd
from ..util import read, run, stats, write


def item_network(ctx, rounds):
    b = ctx.bins.get("svm-bench-network")
    if not b:
        raise RuntimeError("svm-bench-network was not built")
    r = run([b, "--rounds", str(rounds)])
    if r.returncode != 0:
        raise RuntimeError("svm-bench-network failed: " + r.stderr.strip()[-400:])
    d = json.loads(r.stdout)
    sizes = {}
    for n, s in d["sizes"].items():
        sizes[n] = {"entries_per_node": s["entries_per_node"]}
        for k in ("plan_ms", "setup_ms", "remove_ms"):
            sizes[n][k] = stats(s[k], 3)
            sizes[n][k].pop("values")
    return {"title": "Prolog network setup per node (the job's segment)",
            "what": "one node's part of a job: plan (every guest's address, MAC and underlay peer), setup (the job's "
                    "namespace, VXLAN made from the underlay directly in it, bridge, one forwarding and one neighbour "
                    "entry per other node, the tap's guard) and the epilog's removal, on the real kernel; every node "
                    "does its part at once and alone (no node waits for another, no call to a central service), so "
                    "a job's network setup takes one node's time whatever its size",
            "rounds": d["rounds"], "sizes": sizes, "target": "none (figure recorded)"}


def item_devices(ctx, rounds):
    b = ctx.bins.get("svm-bench-devices")
    if not b:
        raise RuntimeError("svm-bench-devices was not built")
    r = run([b, "--rounds", str(rounds)])
    if r.returncode != 0 and not r.stdout.strip():
        raise RuntimeError("svm-bench-devices failed: " + r.stderr.strip()[-400:])
    d = json.loads(r.stdout)
    sc = {}
    for name, s in d["scenarios"].items():
        per_job = zip(s["plan_ms"], s["prepare_ms"], s["release_ms"])
        sc[name] = {"what": s["what"], "jobs_at_once": s["jobs_at_once"], "samples": s["samples"],
                    "sysfs_writes_per_job": s["sysfs_writes_per_job"],
                    "plan_ms": stats(s["plan_ms"], 3), "prepare_ms": stats(s["prepare_ms"], 3),
                    "release_ms": stats(s["release_ms"], 3),
                    "per_job_ms": stats([a + b_ + c for a, b_, c in per_job], 3)}
        for k in ("plan_ms", "prepare_ms", "release_ms", "per_job_ms"):
            if sc[name][k]:
                sc[name][k].pop("values")
    return {"title": "Device layer at scale (fake sysfs)",
            "what": "plan + bind/claim (prepare, every step recorded first in a real, fsync'd ledger file; ledgers "
                    "and VF pool state on /run as on a node) + release (undo "
                    "of that ledger) per job, on a fake node with 8 GPUs (2 NUMA nodes) and 2 InfiniBand PFs x 32 "
                    "VFs (FakeSysfs/FakeKernel of tests/unit)",
            "node": d["node"], "rounds": d["rounds"], "restored": d["restored"], "refusals": d["refusals"],
            "scenarios": sc, "target": "none (figure recorded)"}


def item_kvm(ctx, quick):
    info = {"title": "Guest efficiency (KVM)"}
    checks = {}
    # 1. /dev/kvm itself.
    import fcntl
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
        try:
            checks["dev_kvm_api_version"] = fcntl.ioctl(fd, 0xAE00)
            vm = fcntl.ioctl(fd, 0xAE01, 0)
            checks["dev_kvm_create_vm"] = True
            os.close(vm)
        finally:
            os.close(fd)
    except OSError as e:
        checks["dev_kvm_error"] = str(e)
    # 2. QEMU with accel=kvm: does the test kernel print its banner?
    secs = 5 if quick else 10
    serial = os.path.join(ctx.tmp, "kvm-probe-serial.log")
    p = RES.add_proc(subprocess.Popen(
        ["qemu-system-x86_64", "-machine", "q35,accel=kvm", "-m", "256", "-nodefaults", "-display", "none",
         "-no-reboot", "-serial", f"file:{serial}", "-kernel", ctx.env["VM_TEST_KERNEL"],
         "-append", "console=ttyS0 panic=-1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    t0 = time.time()
    while time.time() - t0 < secs and p.poll() is None and "Linux version" not in read(serial):
        time.sleep(0.2)
    banner = "Linux version" in read(serial)
    if p.poll() is None:
        p.terminate()
    _, err = p.communicate()
    checks["qemu_accel_kvm_guest_kernel_runs"] = banner
    checks["qemu_accel_kvm_stderr"] = " ".join(line for line in err.strip().split("\n")
                                               if "terminating on signal" not in line)[:300]
    # 3. A libvirt 'kvm' domain: the bench domain XML with type='kvm', embedded driver.
    art = getattr(ctx, "last_artifacts", None)
    if art and ctx.bins.get("svm-bench-raw-start"):
        cmd, d = raw_cmd(ctx, art, "kvm", wait_ssh=False, destroy=True, timeout=secs)
        xmlf = os.path.join(d, "domain.xml")
        write(xmlf, re.sub(r"<domain type=['\"]qemu['\"]", "<domain type='kvm'", read(xmlf), count=1))
        cmd += ["--wait-console", os.path.join(d, "console.log") + ":Linux version"]
        r = run(cmd, timeout=secs + 60)
        if r.returncode == 0:
            o = json.loads(r.stdout.strip().splitlines()[-1])
            checks["libvirt_kvm_domain_starts"] = True
            checks["libvirt_kvm_guest_kernel_runs"] = o.get("waited_for") == "console"
        else:
            checks["libvirt_kvm_domain_starts"] = False
            checks["libvirt_kvm_error"] = r.stderr.strip()[-300:]
    usable = bool(checks.get("qemu_accel_kvm_guest_kernel_runs")) and \
        checks.get("libvirt_kvm_guest_kernel_runs", True) is not False
    info["kvm_usable"] = usable
    info["checks"] = checks
    if usable:
        info["status"] = "KVM looks usable, but this harness does not implement the guest-vs-host CPU benchmark yet"
    else:
        info["status"] = ("not measured: KVM is not usable on this machine (guests run under TCG emulation, "
                          "whose speed says nothing about KVM guest efficiency)")
    info["target"] = "none here"
    return info
