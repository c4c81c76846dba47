"""GPUs found by the agent, and jobs given NVLink-connected ones, on a local cluster.

The one fake is the lowest layer: the agents load a fake NVML module
(``tests/agent/fake_nvml.py``, by ``[sanity] nvml_module``) and read a fake
sysfs tree (``lingjun up --sysfs-root``) for NUMA nodes and NICs. Both nodes
are configured with 4 GPUs. node1's NVML shows 4 A100s, 0 and 2
NVLink-bridged, and 1 and 3: the lowest free pair (0, 1) is not linked, so a
2-GPU job must get (0, 2) and the next one (1, 3). node2's shows only 2: it is
drained as Slurm drains it. Everything else is real: agents, controller,
commands.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.agent.fake_sysfs import EIGHT_GPUS, eight_gpu_host
from tests.e2e.conftest import Cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]
# sysfs GPUs 0, 1 (NUMA 0, mlx5_0) and 4, 5 (NUMA 1, mlx5_2) as NVML indices 0-3
PLACES = (0, 1, 4, 5)
BRIDGED = {0: [2], 1: [3], 2: [0], 3: [1]}
SCRIPT = """#!/bin/bash
echo "cuda=$CUDA_VISIBLE_DEVICES"
while [ ! -e {gate} ]; do sleep 0.1; done
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("gputopo")
    sysfs = eight_gpu_host(root / "sys")
    gpus = [dict(EIGHT_GPUS[p], nvlink=BRIDGED[i]) for i, p in enumerate(PLACES)]
    (root / "gpus.json").write_text(json.dumps({"node1": gpus, "node2": gpus[:2]}))
    c = Cluster(root, nodes=2, cpus=8, up_args=(
        "--gpus", "4", "--gpu-type", "a100", "--sysfs-root", str(sysfs),
        "--sanity", 'nvml_module="tests.agent.fake_nvml"'))
    c.env["LINGJUN_FAKE_NVML_GPUS"] = str(root / "gpus.json")
    c.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), c.env.get("PYTHONPATH", "")) if p)
    c.up()
    try:
        yield c
    finally:
        c.down()


def _show(c: Cluster, *args: str) -> str:
    return c.run(["scontrol", *args], check=True).stdout


def test_the_agent_reports_its_gpus_and_a_2_gpu_job_gets_an_nvlink_pair(cluster):
    c = cluster
    log = (c.state / "logs" / "node1.log").read_text()
    assert "node=node1: 4 GPU devices through NVML: 0:a100 nvlink=2 numa=0 nic=mlx5_0" in log, log
    node = _show(c, "show", "node", "node1")
    assert "   Gres=gpu:a100:4(S:0-1)\n" in node, node
    assert "Reason=" not in node, node

    gates = [c.work / "gate-a", c.work / "gate-b"]
    jobs = [c.sbatch("--gres=gpu:2", "-J", name, "-o", str(c.work / f"{name}.out"),
                     input=SCRIPT.format(gate=gate)) for name, gate in zip("ab", gates)]
    try:
        for j in jobs:
            c.wait_state(j, "RUNNING")
        for name, ids in (("a", "0,2"), ("b", "1,3")):
            assert c.wait_file(c.work / f"{name}.out", contains="cuda=") == f"cuda={ids}\n"
        for j, ids in zip(jobs, ("0,2", "1,3")):
            detail = _show(c, "-d", "show", "job", str(j))
            assert f"     Nodes=node1 CPU_IDs=N/A Mem=0 GRES=gpu:a100:2(IDX:{ids})\n" in detail, detail
        used = _show(c, "-d", "show", "node", "node1")
        assert "   GresDrain=N/A\n   GresUsed=gpu:a100:4(IDX:0-3)\n" in used, used
    finally:
        for g in gates:
            g.touch()
    for j in jobs:
        c.wait_state(j, "COMPLETED")
    wait_for("GPUs free",
             lambda: "GresUsed=gpu:a100:0(IDX:N/A)" in _show(c, "-d", "show", "node", "node1"), 30)


def test_a_node_whose_nvml_shows_fewer_gpus_than_configured_is_drained(cluster):
    node = _show(cluster, "show", "node", "node2")
    assert "   State=IDLE+DRAIN " in node, node
    assert "   Reason=gres/gpu count reported lower than configured (2 < 4) [slurm@" in node, node
    sinfo = cluster.run(["sinfo", "-R", "-h", "-o", "%E|%u|%N"], check=True).stdout
    assert sinfo == "gres/gpu count reported lower than configured (2 < 4)|slurm|node2\n", sinfo


def test_a_gpu_job_is_told_the_rail_nics_beside_its_gpus(cluster):
    # GPUs 0 and 2 (an NVLink pair) sit beside mlx5_0 and mlx5_2 in the fake sysfs;
    # a job that names its own NCCL_IB_HCA keeps it.
    c = cluster
    script = "#!/bin/bash\necho \"cuda=$CUDA_VISIBLE_DEVICES hca=$NCCL_IB_HCA\"\n"
    mine = c.sbatch("--gres=gpu:2", "-w", "node1", "-o", str(c.work / "rail.out"), input=script)
    c.wait_state(mine, "COMPLETED")
    assert (c.work / "rail.out").read_text() == "cuda=0,2 hca==mlx5_0,mlx5_2\n"
    env = dict(c.env, NCCL_IB_HCA="mlx5_3")
    p = c.run(["sbatch", "--parsable", "--gres=gpu:2", "-w", "node1", "-o",
               str(c.work / "own.out")], input=script, env=env, check=True)
    c.wait_state(int(p.stdout.strip()), "COMPLETED")
    assert (c.work / "own.out").read_text() == "cuda=0,2 hca=mlx5_3\n"
