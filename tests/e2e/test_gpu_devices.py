"""Which GPUs a job gets, on a local cluster of one 4-GPU node.

Two ``sbatch --gres=gpu:2`` jobs see disjoint CUDA_VISIBLE_DEVICES (and the
same indices in SLURM_JOB_GPUS, GPU_DEVICE_ORDINAL, and in their srun
steps); ``scontrol -d show job`` shows each one's indices as Slurm does
(``GRES=gpu:2(IDX:0-1)``); a third waits with Resources. The indices survive
a controller restart, and the ones a finished job held go to the next job.
The node's GPUs come from the configuration (``lingjun up --gpus 4``): the
only fake is that no device stands behind them.
"""
from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import Cluster

SCRIPT = """#!/bin/bash
echo "job cuda=$CUDA_VISIBLE_DEVICES gpus=$SLURM_JOB_GPUS ordinal=$GPU_DEVICE_ORDINAL"
srun bash -c 'echo "step cuda=$CUDA_VISIBLE_DEVICES gpus=$SLURM_STEP_GPUS"'
while [ ! -e {gate} ]; do sleep 0.1; done
"""


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("gpus"), nodes=1, cpus=8,
                up_args=("--gpus", "4", "--gpu-type", "a100"))
    c.up()
    try:
        yield c
    finally:
        c.down()


def _submit(c: Cluster, name: str, gate) -> int:
    return c.sbatch("--gres=gpu:2", "-J", name, "-o", str(c.work / f"{name}.out"),
                    input=SCRIPT.format(gate=gate))


def _detail(c: Cluster, jid: int) -> str:
    return c.run(["scontrol", "-d", "show", "job", str(jid)], check=True).stdout


def _gres_line(c: Cluster, jid: int) -> str:
    lines = [l for l in _detail(c, jid).splitlines() if l.lstrip().startswith("Nodes=")]
    assert len(lines) == 1, _detail(c, jid)
    return lines[0]


def test_two_jobs_get_disjoint_gpus_and_a_third_waits(gpu_cluster):
    c = gpu_cluster
    gate_a, gate_b, gate_c = (c.work / g for g in ("gate-a", "gate-b", "gate-c"))
    a = _submit(c, "a", gate_a)
    b = _submit(c, "b", gate_b)
    for j in (a, b):
        c.wait_state(j, "RUNNING")
    want = {a: "0,1", b: "2,3"}
    for name, j in (("a", a), ("b", b)):
        out = c.wait_file(c.work / f"{name}.out", contains="step ")
        ids = want[j]
        assert f"job cuda={ids} gpus={ids} ordinal={ids}\n" in out, out
        assert f"step cuda={ids} gpus={ids}\n" in out, out
    third = _submit(c, "c", gate_c)
    try:
        c.wait_state(third, "PENDING")
        reason = ""
        for _ in range(50):
            reason = c.squeue(third, "%r")
            if reason == "Resources":
                break
            time.sleep(0.1)
        assert reason == "Resources"

        # scontrol -d: Slurm's per-node detail line, with the node's GPU type
        assert _gres_line(c, a) == "     Nodes=node1 CPU_IDs=N/A Mem=0 GRES=gpu:a100:2(IDX:0-1)"
        assert _gres_line(c, b) == "     Nodes=node1 CPU_IDs=N/A Mem=0 GRES=gpu:a100:2(IDX:2-3)"
        assert "   JOB_GRES=gpu:a100:2\n" in _detail(c, a)
        # without -d: unchanged
        plain = c.run(["scontrol", "show", "job", str(a)], check=True).stdout
        assert "IDX" not in plain and "JOB_GRES" not in plain
        assert "IDX" not in c.run(["scontrol", "-d", "show", "job", str(third)]).stdout

        # a controller restart keeps who holds which
        c.kill9("lingjund")
        c.restart("lingjund")
        c.wait_nodes_up(timeout=30)
        assert _gres_line(c, a).endswith("GRES=gpu:a100:2(IDX:0-1)")
        assert _gres_line(c, b).endswith("GRES=gpu:a100:2(IDX:2-3)")
        assert c.state_of(third) == "PENDING"

        # a's GPUs come free and go to the waiting job; b keeps its own
        gate_a.touch()
        c.wait_state(a, "COMPLETED")
        c.wait_state(third, "RUNNING", timeout=30)
        out = c.wait_file(c.work / "c.out", contains="step ")
        assert "job cuda=0,1 gpus=0,1 ordinal=0,1\n" in out, out
        assert _gres_line(c, third).endswith("GRES=gpu:a100:2(IDX:0-1)")
        assert _gres_line(c, b).endswith("GRES=gpu:a100:2(IDX:2-3)")
    finally:
        for g in (gate_a, gate_b, gate_c):
            g.touch()
    for j in (a, b, third):
        c.wait_state(j, "COMPLETED", timeout=60)


def test_a_requeued_job_gets_gpus_anew(gpu_cluster):
    c = gpu_cluster
    gate_x, gate_y = c.work / "gate-x", c.work / "gate-y"
    x = _submit(c, "x", gate_x)
    c.wait_state(x, "RUNNING")
    assert _gres_line(c, x).endswith("(IDX:0-1)")
    y = _submit(c, "y", gate_y)
    c.wait_state(y, "RUNNING")
    assert _gres_line(c, y).endswith("(IDX:2-3)")
    try:
        gate_x.touch()
        c.wait_state(x, "COMPLETED")
        # y goes back to the queue and starts again: the lowest free now are 0-1
        c.run(["scontrol", "requeue", str(y)], check=True)
        deadline = time.time() + 60
        while not ("JobState=RUNNING" in (show := _detail(c, y)) and "Restarts=1" in show):
            assert time.time() < deadline, show
            time.sleep(0.2)
        assert _gres_line(c, y).endswith("GRES=gpu:a100:2(IDX:0-1)")
    finally:
        gate_x.touch()
        gate_y.touch()
    c.wait_state(y, "COMPLETED", timeout=60)
