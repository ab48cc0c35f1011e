"""Item 10: an MPI step's launch with srun --mpi=pmix against mpirun, in the same guests."""

import os
import re
import shutil
import time

from ..cluster import RES
from ..util import GID, REPO, UID, USER, log, med, ratio, read, run, stats, write
from .slurm import user_workdir

# One VM job of 2 nodes and 2 tasks each; its script starts the allreduce
# program (tests/fixtures/allreduce.c: MPI_Init, one allreduce over the 4
# ranks, MPI_Finalize) alternately with mpirun and with srun --mpi=pmix and
# prints each start-to-end time.


def mpi_script(rounds):
    """The job script; pairs alternate which launcher goes first."""
    lines = ["#!/bin/bash"]
    for i in range(rounds):
        for how in (("mpirun", "srun") if i % 2 == 0 else ("srun", "mpirun")):
            cmd = "mpirun ./allreduce" if how == "mpirun" else "srun --mpi=pmix ./allreduce"
            lines += ["t0=$(date +%s%N)", f"{cmd} >/dev/null; rc=$?", "t1=$(date +%s%N)",
                      f'echo "LAUNCH {how} $(( (t1 - t0) / 1000000 )) $rc"']
    return "\n".join(lines) + "\n"


def build_program(wd):
    """allreduce for the guest image's MPI: SVM_GUEST_MPI_PROGRAM, or the host's mpicc (Debian 12)."""
    prog = os.path.join(wd, "allreduce")
    given = os.environ.get("SVM_GUEST_MPI_PROGRAM")
    if given:
        shutil.copy(given, prog)
    else:
        src = os.path.join(wd, "allreduce.c")
        shutil.copy(os.path.join(REPO, "tests/fixtures/allreduce.c"), src)
        os.chown(src, UID, GID)
        r = run(["runuser", "-u", USER, "--", "mpicc", "-O2", "-o", prog, src])
        if r.returncode != 0:
            raise RuntimeError("mpicc failed: " + r.stderr.strip()[-300:])
    os.chown(prog, UID, GID)
    os.chmod(prog, 0o755)
    write(os.path.join(wd, "input.txt"), "7\n")
    os.chown(os.path.join(wd, "input.txt"), UID, GID)


def run_mpi_job(ctx, wd, rounds):
    """Submits the job, waits for its end (bounded); returns its output."""
    env = ctx.env
    write(os.path.join(wd, "mpi.sh"), mpi_script(rounds), 0o755)
    os.chown(os.path.join(wd, "mpi.sh"), UID, GID)
    vm = [f"--vm-image={env['VM_TEST_IMAGE']}", f"--vm-kernel={env['VM_TEST_KERNEL']}",
          f"--vm-initrd={env['VM_TEST_INITRD']}"]
    r = run(["runuser", "-u", USER, "--", "env", f"SLURM_CONF={env['SLURM_CONF']}", "PATH=/usr/bin:/bin",
             "sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "--mem=1500", "-J", "svm-bench-mpi", *vm,
             "mpi.sh"], cwd=wd)
    if r.returncode != 0:
        raise RuntimeError("sbatch failed: " + r.stderr.strip())
    jid = int(r.stdout.strip().split(";")[0])
    RES.slurm_jobs.append(jid)
    log(f"MPI launch job {jid} submitted ({rounds} round(s))")
    end = time.time() + 600 + 120 * rounds
    while time.time() < end:
        q = run(["squeue", "-h", "-j", str(jid), "-o", "%T"], env=env).stdout.strip()
        if not q:
            break
        time.sleep(2)
    else:
        raise RuntimeError(f"MPI launch job {jid} did not end in time")
    return read(os.path.join(wd, f"slurm-{jid}.out"))


def item_mpi_launch(ctx, repeat):
    """Item 10: the time from a step's start to its end for a 4-rank allreduce in 2 guests."""
    wd = getattr(ctx, "slurm_wd", None) or user_workdir(ctx)
    build_program(wd)
    out = run_mpi_job(ctx, wd, max(2, repeat))
    got = {"mpirun": [], "srun": []}
    for how, ms, rc in re.findall(r"^LAUNCH (mpirun|srun) (\d+) (\d+)$", out, re.M):
        if rc != "0":
            raise RuntimeError(f"a {how} launch failed ({rc}): {out[-400:]}")
        got[how].append(float(ms))
    if not got["mpirun"] or not got["srun"]:
        raise RuntimeError("the job printed no launch times: " + out[-400:])
    s, m = stats(got["srun"]), stats(got["mpirun"])
    return {"title": "10. An MPI step's launch: srun --mpi=pmix against mpirun, in the same guests",
            "what": "a 4-rank allreduce (MPI_Init, one allreduce, MPI_Finalize) over 2 guests of one VM job, "
                    "from the batch script: `srun --mpi=pmix ./allreduce` (Slurm's PMIx server on the host, "
                    "reached through the step's forward) against `mpirun ./allreduce` (Open MPI's daemons over "
                    "the job's SSH), alternating, the first of each pair alternating",
            "srun_ms": s, "mpirun_ms": m, "ratio": ratio(med(s), med(m)), "target_ratio": None}
