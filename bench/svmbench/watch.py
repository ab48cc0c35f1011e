"""Threads that watch the machine: its busy CPU time and the helpers' processes."""

import os
import re
import threading
import time

from .util import read


CLK_TCK = os.sysconf("SC_CLK_TCK")


class CpuMeter(threading.Thread):
    """The machine's busy CPU time (every process, this one's too), from the
    first line of /proc/stat every 10 ms: busy_ms(a, b) is the CPU time spent
    between two moments of time.time(), interpolated between samples."""

    def __init__(self, interval=0.01):
        super().__init__(daemon=True)
        self.interval = interval
        self.samples = []     # (time, busy clock ticks)
        self.halt = threading.Event()

    @staticmethod
    def busy_ticks():
        f = [int(x) for x in read("/proc/stat").splitlines()[0].split()[1:8]]
        return f[0] + f[1] + f[2] + f[5] + f[6]     # user, nice, system, irq, softirq

    def run(self):
        while not self.halt.is_set():
            self.samples.append((time.time(), self.busy_ticks()))
            self.halt.wait(self.interval)

    def stop(self):
        self.halt.set()
        self.join()

    def _at(self, t):
        s = self.samples
        for (t0, b0), (t1, b1) in zip(s, s[1:]):
            if t0 <= t <= t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b0
        return None

    def busy_ms(self, a, b):
        x, y = self._at(a), self._at(b)
        return None if x is None or y is None else (y - x) * 1000 / CLK_TCK


class ProcWatch(threading.Thread):
    """Sees the helpers' processes start and end: every 20 ms, the new pids of
    /proc. A process's start is its fork time (/proc/PID/stat, clock ticks
    since boot, turned into real time); its end is the first scan that no
    longer finds it. Processes are told apart by their command name (re-read
    while they are young: a fork execs later) and matched to a job by their
    environment (SLURM_JOB_ID, SLURMD_NODENAME) or command line."""

    KINDS = {"prolog": "prolog", "slurm-vm-prolog": "prolog", "epilog": "epilog", "slurm-vm-epilog": "epilog",
             "slurm-vm-keeper": "keeper", "slurm-vm-exec": "exec", "ssh": "ssh", "qemu-system-x86": "qemu"}

    def __init__(self, interval=0.02):
        super().__init__(daemon=True)
        self.interval = interval
        self.boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        self.recs = {}        # (pid, start) -> record
        self.young = {}       # pid -> (start, comm) while younger than 3 s
        self.known = set()
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.scans, self.busy_s = 0, 0.0

    def _stat(self, pid):
        s = read(f"/proc/{pid}/stat")
        l, r = s.find("("), s.rfind(")")
        if l < 0 or r < 0:
            return None
        try:
            return s[l + 1:r], int(s[r + 2:].split()[19]) / CLK_TCK + self.boot
        except (IndexError, ValueError):
            return None

    def _classify(self, pid, comm, start, now):
        kind = self.KINDS.get(comm)
        if not kind:
            return
        cmd = read(f"/proc/{pid}/cmdline").split("\0")
        job = node = None
        if kind == "exec" and "--proxy" in cmd:
            kind = "proxy"
        if kind == "qemu":
            x = re.search(r"guest=slurm-vm-(\d+)-([^,\s]+)", " ".join(cmd))
            if x:
                job, node = int(x.group(1)), x.group(2)
        elif kind == "keeper":
            for i, a in enumerate(cmd[:-1]):
                if a == "--job" and cmd[i + 1].isdigit():
                    job = int(cmd[i + 1])
                elif a == "--node":
                    node = cmd[i + 1]
        else:
            env = dict(e.split("=", 1) for e in read(f"/proc/{pid}/environ").split("\0") if "=" in e)
            if env.get("SLURM_JOB_ID", "").isdigit():
                job = int(env["SLURM_JOB_ID"])
            node = env.get("SLURMD_NODENAME")
        if job is None:
            return
        with self.lock:
            self.recs[(pid, start)] = {"pid": pid, "kind": kind, "job": job, "node": node, "start": start,
                                       "last": now, "end": None}

    def run(self):
        while not self.halt.wait(self.interval):
            t0 = time.perf_counter()
            now = time.time()
            try:
                pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
            except OSError:
                continue
            for pid in pids - self.known:
                st = self._stat(pid)
                if st:
                    self.young[pid] = (st[1], st[0])
                    self._classify(pid, st[0], st[1], now)
            for pid, (start, comm) in list(self.young.items()):
                if pid not in pids or now - start > 3:
                    del self.young[pid]
                    continue
                c = read(f"/proc/{pid}/comm").strip()
                if c and c != comm:
                    self.young[pid] = (start, c)
                    with self.lock:
                        self.recs.pop((pid, start), None)
                    self._classify(pid, c, start, now)
                elif c in self.KINDS and (pid, start) not in self.recs:
                    self._classify(pid, c, start, now)  # its environment could not be read yet
            with self.lock:
                for r in self.recs.values():
                    if r["end"] is None:
                        if r["pid"] in pids:
                            r["last"] = now
                        else:
                            r["end"] = now
            self.known = pids
            self.scans += 1
            self.busy_s += time.perf_counter() - t0

    def find(self, kind, job, node=None):
        with self.lock:
            return sorted((dict(r) for r in self.recs.values()
                           if r["kind"] == kind and r["job"] == job and (node is None or r["node"] == node)),
                          key=lambda r: r["start"])

    def first(self, kind, job, node=None):
        f = self.find(kind, job, node)
        return f[0] if f else None

    def stop(self):
        self.halt.set()
