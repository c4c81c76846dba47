"""GPU accounting on a local cluster: sacct's AllocTRES with gres/gpu, and
the GPU utilization and memory the agent sampled through NVML.

The only fake is the lowest layer: NVML itself ([sanity] nvml_module names
tests/agent/fake_nvml.py, whose GPUs a JSON file describes); the agents,
controller, store and sacct are real.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gc(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpuacct")
    gpus = root / "gpus.json"
    gpus.write_text(json.dumps([{"util": 40, "mem_used": 1 << 30},
                                {"util": 80, "mem_used": 3 << 30}]))
    c = Cluster(root, nodes=1, cpus=2,
                up_args=("--gpus", "2", "--sanity", "nvml_module=tests.agent.fake_nvml"))
    c.env["PYTHONPATH"] = str(REPO)
    c.env["LINGJUN_FAKE_NVML_GPUS"] = str(gpus)
    yield from c.serving()


def test_sacct_shows_the_gpus_a_job_held_and_what_nvml_saw_of_them(gc):
    c = gc
    jid = c.sbatch("--gres=gpu:2", "--mem=100M", "-o", "/dev/null",
                   input="#!/bin/bash\nsleep 5\n")
    assert c.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60) == "COMPLETED"
    out = c.run(["sacct", "-j", str(jid), "-o", "JobID,AllocTRES%60"], check=True).stdout
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[2:]}
    assert rows[str(jid)] == "billing=1,cpu=1,gres/gpu=2,mem=100M,node=1", out
    assert rows[f"{jid}.batch"] == "cpu=1,gres/gpu=2,mem=100M,node=1", out
    usage = c.run(["sacct", "-j", str(jid), "-n", "-P", "-o",
                   "JobID,TRESUsageInAve,TRESUsageInMax"], check=True).stdout
    _, ave, peak = next(r for r in usage.splitlines() if r.startswith(f"{jid}.batch|")).split("|")
    # the mean utilization of its two GPUs, and the memory used on both
    assert "gres/gpumem=4G,gres/gpuutil=60," in ave, usage
    assert "gres/gpumem=4G,gres/gpuutil=60," in peak, usage


def test_an_srun_step_gets_the_usage_of_its_own_gpu(gc):
    c = gc
    jid = c.sbatch("--gres=gpu:2", "--mem=100M", "-o", "/dev/null",
                   input="#!/bin/bash\nsrun --gpus=1 sleep 5\n")
    assert c.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60) == "COMPLETED"
    out = c.run(["sacct", "-j", str(jid), "-n", "-P", "-o",
                 "JobID,AllocTRES,TRESUsageInMax"], check=True).stdout
    row = next(r for r in out.splitlines() if r.startswith(f"{jid}.0|")).split("|")
    assert row[1] == "cpu=1,gres/gpu=1,mem=100M,node=1", out
    # the step's one GPU is the node's first (GPU 0: 40 %, 1 GiB used)
    assert "gres/gpumem=1G,gres/gpuutil=40," in row[2], out
