"""Constants, logging, statistics and small process and file helpers."""

import os
import re
import statistics
import subprocess
import sys
import time


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER_DIR = os.environ.get("SVM_CLUSTER_DIR", "/var/tmp/slurm-vm-cluster")
LIVE_STATE = "/run/slurm-vm"           # the live cluster's state (read only, never written)
BENCH_STATE = "/run/slurm-vm-bench"    # ours: state_dir /run/slurm-vm-bench/%n
BENCH_SCRATCH = "/var/lib/slurm-vm-bench"  # ours: overlay_dir (on disk, as the nodes' default)
CGROUP_ROOT = "/sys/fs/cgroup"
CG_NAME = "slurm-vm-bench"
USER, UID, GID = "svmuser", 2001, 2001
JOB_MEM_MIB = 1280                     # per bench job: guest 1024 MiB + 256 MiB for QEMU

T_START = time.time()


def log(msg):
    print(f"[bench +{time.time() - T_START:5.1f}s] {msg}", file=sys.stderr, flush=True)


class Interrupted(Exception):
    pass


class JobGone(RuntimeError):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


# ----------------------------------------------------------------------------
# Statistics and small helpers

def stats(values, digits=1):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"n": len(v), "min": round(min(v), digits), "median": round(statistics.median(v), digits),
            "max": round(max(v), digits), "values": [round(x, digits) for x in v]}


def med(s):
    return s["median"] if s else None


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 3)


class CapsProbed(RuntimeError):
    pass


def apic_cpus():
    """APIC id -> CPU number (/proc/cpuinfo)."""
    out, cpu = {}, None
    for line in read("/proc/cpuinfo").splitlines():
        k, _, v = line.partition(":")
        if k.strip() == "processor":
            cpu = int(v)
        elif k.strip() == "apicid" and cpu is not None:
            out[int(v)] = cpu
    return out


def caps_cpu(capdir):
    """The CPU on which the capabilities cached in capdir were probed: libvirt
    stores the host's CPUID data with them, and CPUID leaf 0x1f (else 0xb),
    subleaf 0, EDX is the x2APIC id of the CPU the probing process ran on
    (libvirt leaves out an all-zero leaf: id 0)."""
    try:
        files = [os.path.join(capdir, f) for f in os.listdir(capdir) if f.endswith(".xml")]
    except OSError:
        return None
    for f in files:
        text = read(f)
        if "<cpudata" not in text:
            continue
        for leaf in ("0x0000001f", "0x0000000b"):
            x = re.search(rf"<cpuid eax_in='{leaf}' ecx_in='0x00000000' [^>]*edx='0x([0-9a-f]{{8}})'", text)
            if x:
                apic = int(x.group(1), 16)
                return apic_cpus().get(apic, f"x2APIC id {apic}")
        return apic_cpus().get(0, 0)
    return None


def cpus_of(pid):
    for line in read(f"/proc/{pid}/status").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def require_no_probe(guest, jid, where=""):
    """A measured start must not include libvirt probing QEMU's capabilities
    (seconds each): the figures would measure the probe."""
    if guest.get("caps_probed"):
        raise CapsProbed(f"job {jid}: libvirt probed QEMU's capabilities while creating the guest{where}; "
                         "the start figures would include the probe (see the keeper's log and slurm-vm doctor)")


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def births(paths):
    """Creation (birth) times of files, realtime seconds with ns (tmpfs keeps
    them; statx via stat(1)). Missing files and file systems without birth
    times are left out."""
    paths = [p for p in paths if p]
    if not paths:
        return {}
    r = run(["stat", "-c", "%.9W\t%n", "--"] + paths)
    out = {}
    for line in r.stdout.splitlines():
        b, sep, n = line.partition("\t")
        try:
            v = float(b)
        except ValueError:
            continue
        if sep and v > 0:
            out[n] = v
    return out


def birth_time(path):
    """Creation time (tmpfs keeps it; statx via stat(1))."""
    return births([path]).get(path)
