"""Jobs held to what they were given on the node, on a local cluster with real cgroups.

Two nodes of 2 CPUs, 2000 MB and two GPUs each; the GPUs' device files are
character devices made with ``mknod`` in a temp dir (``lingjun up
--device-root``), the only fake: the devices cgroup judges them as it would
judge /dev/nvidiaN. Needs root and the v1 memory, cpuset, devices and freezer
hierarchies (this test host has them).
"""
from __future__ import annotations

import os
import random
import time

import psutil
import pytest

from lingjun_agent.launcher import cgroups
from tests.e2e.conftest import Cluster, wait_for

pytestmark = pytest.mark.skipif(
    not (cgroups.available() and all(cgroups.mounted(h) for h in ("memory", "cpuset", "devices"))),
    reason="needs root and the v1 memory, cpuset, devices and freezer hierarchies")


@pytest.fixture(scope="module")
def cc(tmp_path_factory):
    root = tmp_path_factory.mktemp("confine")
    dev = root / "dev"
    dev.mkdir()
    for i in range(2):
        os.mknod(dev / f"nvidia{i}", 0o666 | 0o020000, os.makedev(195, i))
    c = Cluster(root, nodes=2, cpus=2,
                up_args=("--gpus", "2", "--device-root", str(dev)))
    c.dev = dev
    yield from c.serving()


def sacct(c: Cluster, jid: int, fields: str = "State,ExitCode") -> list[str]:
    out = c.run(["sacct", "-j", str(jid), "-n", "-P", "-o", fields], check=True).stdout
    return [line for line in out.splitlines() if line.strip()]


HOG = """#!/bin/bash
python3 -c 'b = bytearray(1 << 30); print("allocated", flush=True)'
echo "script went on: $?"
"""

NEIGHBOUR = """#!/bin/bash
sleep 4
echo neighbour done
"""


def test_a_job_over_its_memory_ends_out_of_memory_and_its_neighbour_completes(cc):
    c = cc
    out = c.work / "neighbour.out"
    neighbour = c.sbatch("-w", "node1", "--mem=100M", "-o", str(out), input=NEIGHBOUR)
    c.wait_state(neighbour, "RUNNING")
    hog_out = c.work / "hog.out"
    t0 = time.time()
    hog = c.sbatch("-w", "node1", "--mem=100M", "-o", str(hog_out), input=HOG)
    c.wait_state(hog, "OUT_OF_MEMORY", timeout=30)
    took = time.time() - t0
    assert took < 15, f"want OUT_OF_MEMORY within seconds, took {took:.1f} s"
    print(f"\nsubmitted to OUT_OF_MEMORY in {took:.2f} s")
    assert c.wait_state(neighbour, ("COMPLETED", "FAILED", "CANCELLED")) == "COMPLETED"
    assert "neighbour done" in out.read_text()
    text = hog_out.read_text()
    assert "allocated" not in text.splitlines(), "1 GB never fit in 100 MB"
    assert "Detected 1 oom-kill event(s) in StepId=" in text, text
    rows = sacct(c, hog)
    assert rows[0] == "OUT_OF_MEMORY|0:125", rows            # the job, as Slurm shows it
    assert "OUT_OF_MEMORY|0:125" in rows[1:], rows           # its batch step
    assert c.squeue(hog, "%r") == "OutOfMemory"
    assert sacct(c, neighbour)[0] == "COMPLETED|0:0"


def _sleepers(*names: str) -> list[int]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.cmdline()[:1] == ["sleep"] and p.cmdline()[1:] and p.cmdline()[1] in names \
                    and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def test_scancel_leaves_nothing_of_a_job_whose_children_left_its_session(cc):
    c = cc
    n = random.randrange(100000, 999999)
    names = (str(n), str(n + 1), str(n + 2))
    script = (f"#!/bin/bash\nsetsid sleep {n} &\n( ( env -i setsid sleep {n + 1} & ) & )\n"
              f"sleep {n + 2}\n")
    jid = c.sbatch("-o", "/dev/null", input=script)
    wait_for("all three sleeps running", lambda: len(_sleepers(*names)) == 3, 20)
    c.run(["scancel", str(jid)], check=True)
    c.wait_state(jid, "CANCELLED", timeout=30)
    wait_for("every process of the job gone", lambda: not _sleepers(*names), 10)
    assert not c.job_processes(jid)


AFFINITY = """#!/bin/bash
python3 -c 'import os; print("batch", sorted(os.sched_getaffinity(0)))'
echo "bind=$SLURM_CPU_BIND"
srun python3 -c 'import os; print("step", sorted(os.sched_getaffinity(0)))'
while [ ! -e {gate} ]; do sleep 0.1; done
"""


def _affinity(text: str, who: str) -> list[int]:
    line = next(l for l in text.splitlines() if l.startswith(who + " "))
    return eval(line.split(" ", 1)[1])           # a printed list of ints


def test_tasks_are_pinned_to_the_cpus_they_were_given(cc):
    c = cc
    gate = c.work / "affinity-gate"
    outs = {name: c.work / f"{name}.out" for name in ("one-a", "one-b", "two")}
    a = c.sbatch("-w", "node2", "-c", "1", "-o", str(outs["one-a"]),
                 input=AFFINITY.format(gate=gate))
    b = c.sbatch("-w", "node2", "-c", "1", "-o", str(outs["one-b"]),
                 input=AFFINITY.format(gate=gate))
    ta = c.wait_file(outs["one-a"], contains="step ")
    tb = c.wait_file(outs["one-b"], contains="step ")
    gate.touch()
    for j in (a, b):
        assert c.wait_state(j, ("COMPLETED", "FAILED")) == "COMPLETED"
    for text in (ta, tb):
        assert len(_affinity(text, "batch")) == 1, text
        assert _affinity(text, "step") == _affinity(text, "batch"), text
        mask = 1 << _affinity(text, "batch")[0]
        assert f"bind=quiet,mask_cpu:0x{mask:X}\n" in text, text
    # the node's two CPUs are this host's two: two jobs of -c 1 side by side get one each
    if len(os.sched_getaffinity(0)) >= 2:
        assert _affinity(ta, "batch") != _affinity(tb, "batch"), (ta, tb)
    gate.unlink()
    two = c.sbatch("-w", "node2", "-c", "2", "-o", str(outs["two"]),
                   input=AFFINITY.format(gate=gate))
    t2 = c.wait_file(outs["two"], contains="step ")
    gate.touch()
    assert c.wait_state(two, ("COMPLETED", "FAILED")) == "COMPLETED"
    want = min(2, len(os.sched_getaffinity(0)))
    assert len(_affinity(t2, "batch")) == want and len(_affinity(t2, "step")) == want, t2


DEVICES = """#!/bin/bash
echo "cuda=$CUDA_VISIBLE_DEVICES"
for i in 0 1; do
  python3 -c '
import errno, os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
    print(sys.argv[2], "opened")
except OSError as e:
    print(sys.argv[2], errno.errorcode[e.errno])' {dev}/nvidia$i nvidia$i
done
while [ ! -e {gate} ]; do sleep 0.1; done
"""


def test_a_job_can_open_only_its_own_gpus_device_files(cc):
    c = cc
    gate = c.work / "devices-gate"
    first, second = c.work / "gpu-first.out", c.work / "gpu-second.out"
    j1 = c.sbatch("-w", "node1", "--gres=gpu:1", "-o", str(first),
                  input=DEVICES.format(dev=c.dev, gate=gate))
    t1 = c.wait_file(first, contains="nvidia1 ")
    j2 = c.sbatch("-w", "node1", "--gres=gpu:1", "-o", str(second),
                  input=DEVICES.format(dev=c.dev, gate=gate))
    t2 = c.wait_file(second, contains="nvidia1 ")
    gate.touch()
    for j in (j1, j2):
        assert c.wait_state(j, ("COMPLETED", "FAILED")) == "COMPLETED"
    # A device of its own passes the cgroup (ENXIO: no driver behind the fake
    # node); another job's is refused by it (EPERM).
    assert "cuda=0\n" in t1 and "nvidia0 ENXIO\n" in t1 and "nvidia1 EPERM\n" in t1, t1
    assert "cuda=1\n" in t2 and "nvidia1 ENXIO\n" in t2 and "nvidia0 EPERM\n" in t2, t2


STEP_HOG = """#!/bin/bash
srun python3 -c 'b = bytearray(1 << 30)'
echo "srun=$?"
srun --mem=40M python3 -c 'b = bytearray(80 << 20)'
echo "srun=$?"
srun true
echo "script went on"
"""


def test_a_step_over_its_memory_ends_out_of_memory_and_the_job_goes_on(cc):
    """Over the job's 100M (no --mem of its own), then over its own --mem=40M
    inside the job's: each step ends OUT_OF_MEMORY in its own cgroup, the
    batch script goes on, and the job ends COMPLETED with Slurm's derived
    exit code 0:125 (SIG_OOM of a step)."""
    c = cc
    out = c.work / "step-hog.out"
    jid = c.sbatch("-w", "node2", "--mem=100M", "-o", str(out), input=STEP_HOG)
    assert c.wait_state(jid, ("OUT_OF_MEMORY", "COMPLETED", "FAILED"), timeout=90) == "COMPLETED"
    text = out.read_text()
    assert text.count("srun=253\n") == 2, text                 # Slurm's srun code for OOM
    assert "script went on\n" in text, text
    assert "srun: error: node2: task 0: Out Of Memory\n" in text, text
    assert f"Detected 1 oom-kill event(s) in StepId={jid}.0" in text, text
    assert f"Detected 1 oom-kill event(s) in StepId={jid}.1" in text, text
    assert f"StepId={jid}.batch" not in text, text
    rows = sacct(c, jid, "JobID,State,ExitCode,DerivedExitCode")
    assert rows[0] == f"{jid}|COMPLETED|0:0|0:125", rows
    assert f"{jid}.batch|COMPLETED|0:0|" in rows, rows
    assert f"{jid}.0|OUT_OF_MEMORY|0:125|" in rows, rows
    assert f"{jid}.1|OUT_OF_MEMORY|0:125|" in rows, rows
    assert f"{jid}.2|COMPLETED|0:0|" in rows, rows
    tres = dict(r.split("|", 1) for r in sacct(c, jid, "JobID,AllocTRES%60"))
    assert tres[f"{jid}.1"] == "cpu=1,mem=40M,node=1", tres   # its own --mem
    assert tres[f"{jid}.0"] == "cpu=1,mem=100M,node=1", tres  # the job's


def test_srun_asking_more_memory_than_the_job_has_is_refused(cc):
    c = cc
    out = c.work / "step-too-big.out"
    jid = c.sbatch("-w", "node2", "--mem=100M", "-o", str(out),
                   input="#!/bin/bash\nsrun --mem=200M true\necho \"srun=$?\"\n")
    assert c.wait_state(jid, ("COMPLETED", "FAILED")) == "COMPLETED"
    text = out.read_text()
    assert "Memory required by task is not available" in text and "srun=1\n" in text, text


RSS = """#!/bin/bash
srun python3 -c '
import time
b = bytearray(150 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
time.sleep(1.5)'
"""


def test_sacct_shows_each_steps_own_max_rss(cc):
    c = cc
    jid = c.sbatch("-w", "node1", "--mem=400M", "-o", "/dev/null", input=RSS)
    assert c.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60) == "COMPLETED"
    rows = dict(r.split("|", 1) for r in sacct(c, jid, "JobID,MaxRSS"))

    def kb(text: str) -> int:
        return int(float(text[:-1]) * 1024 ** "KMG".index(text[-1])) if text[-1] in "KMG" \
            else int(text) // 1024
    step, batch = kb(rows[f"{jid}.0"]), kb(rows[f"{jid}.batch"])
    assert step >= 150 << 10, rows                     # the 150 MB it touched, in its cgroup
    assert batch < step - (100 << 10), rows            # the script and srun, not the step


def test_a_step_ends_with_every_process_in_its_cgroup(cc):
    """A task that leaves a setsid child behind: the child goes with the step,
    while the job (and its batch script) runs on."""
    c = cc
    n = random.randrange(100000, 999999)
    gate = c.work / f"step-gate-{n}"
    out = c.work / f"step-kill-{n}.out"
    script = (f"#!/bin/bash\nsrun bash -c '( setsid sleep {n} & ) ; sleep 0.5'\n"
              f"echo step done\nwhile [ ! -e {gate} ]; do sleep 0.1; done\n")
    jid = c.sbatch("-w", "node1", "-o", str(out), input=script)
    c.wait_file(out, contains="step done")
    assert c.squeue(jid, "%T") == "RUNNING"
    wait_for("the step's setsid child gone", lambda: not _sleepers(str(n)), 10)
    gate.touch()
    assert c.wait_state(jid, ("COMPLETED", "FAILED")) == "COMPLETED"


def test_sacct_alloc_tres_shows_the_jobs_gpus(cc):
    c = cc
    jid = c.sbatch("-w", "node1", "--gres=gpu:2", "--mem=100M", "-o", "/dev/null",
                   input="#!/bin/bash\nsrun --gpus=1 true\n")
    assert c.wait_state(jid, ("COMPLETED", "FAILED")) == "COMPLETED"
    out = c.run(["sacct", "-j", str(jid), "-o", "JobID,AllocTRES%60,ReqTRES%60"],
                check=True).stdout
    lines = out.splitlines()
    assert lines[0].split() == ["JobID", "AllocTRES", "ReqTRES"], out
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows[str(jid)] == ["billing=1,cpu=1,gres/gpu=2,mem=100M,node=1"] * 2, out
    assert rows[f"{jid}.batch"] == ["cpu=1,gres/gpu=2,mem=100M,node=1"], out
    assert rows[f"{jid}.0"] == ["cpu=1,gres/gpu=1,mem=100M,node=1"], out
