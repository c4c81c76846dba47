"""Shared GPUs on a local cluster: --gres=shard:N and --gres=mps:P.

One node with one GPU, 4 shards and an MPS count of 100 (``lingjun up
--gpus 1 --shards 4 --mps 100``). Two ``--gres=shard:2`` jobs run at once on
GPU 0, each seeing it and SLURM_SHARDS_ON_NODE=2; a third waits with
Resources, and a ``--gres=gpu:1`` job waits as long as any shard is held
(behind the third with Priority, then with Resources); when the last shard
job ends the whole-GPU job runs. A ``--gres=mps:50`` job gets 50 % of
the GPU's threads, its GPU's MPS control daemon is started for it with the
GPU and pipe directories in its environment, and is told to quit after it.

The only fakes: no device stands behind GPU 0, and the MPS control program
is a stand-in script that records how it was called and, with -d, leaves a
process running until told ``quit``, as the real one does.
"""
from __future__ import annotations

import json
import os
import time

import psutil
import pytest

from tests.e2e.conftest import Cluster

SHARD_SCRIPT = """#!/bin/bash
echo "cuda=$CUDA_VISIBLE_DEVICES shards=$SLURM_SHARDS_ON_NODE"
while [ ! -e {gate} ]; do sleep 0.1; done
"""

# The stand-in for nvidia-cuda-mps-control. With -d it starts a daemon (a child
# that outlives it, its pid in the pipe directory) and returns; without, it
# reads commands from stdin and on "quit" ends that daemon. Every call appends
# one JSON line (argv, the CUDA_* environment, stdin) to $MPS_RECORD.
MPS_STUB = """#!/usr/bin/env python3
import json, os, signal, subprocess, sys, time
record = os.environ["MPS_RECORD"]
pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
entry = {"argv": sys.argv[1:],
         "env": {k: v for k, v in os.environ.items() if k.startswith("CUDA_")}}
if sys.argv[1:] == ["-d"]:
    d = subprocess.Popen(["sleep", "600"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(os.path.join(pipe, "daemon.pid"), "w").write(str(d.pid))
    entry["daemon"] = d.pid
else:
    entry["stdin"] = sys.stdin.read()
    if "quit" in entry["stdin"]:
        pid = int(open(os.path.join(pipe, "daemon.pid")).read())
        os.kill(pid, signal.SIGTERM)
with open(record, "a") as f:
    f.write(json.dumps(entry) + "\\n")
"""

MPS_SCRIPT = """#!/bin/bash
env | grep '^CUDA_' | sort > {out}
echo done >> {out}
while [ ! -e {gate} ]; do sleep 0.1; done
"""


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("shares")
    stub = root / "mps-control"
    stub.write_text(MPS_STUB)
    stub.chmod(0o755)
    record = root / "mps-record.jsonl"
    c = Cluster(root, nodes=1, cpus=8,
                up_args=("--gpus", "1", "--shards", "4", "--mps", "100",
                         "--mps-control", str(stub)))
    # the agents inherit `lingjun up`'s environment: the stand-in finds its record there
    c.env["MPS_RECORD"] = str(record)
    c.record = record
    c.up()
    try:
        yield c
    finally:
        c.down()


def _reason(c: Cluster, jid: int, want: str) -> str:
    seen = ""
    for _ in range(100):
        seen = c.squeue(jid, "%r")
        if seen == want:
            break
        time.sleep(0.1)
    return seen


def test_shard_jobs_share_a_gpu_up_to_its_shards_never_beyond(shared_cluster):
    c = shared_cluster
    gates = {n: c.work / f"gate-{n}" for n in ("a", "b", "c", "w")}

    def submit(name: str, gres: str) -> int:
        return c.sbatch(f"--gres={gres}", "-J", name, "-o", str(c.work / f"{name}.out"),
                        input=SHARD_SCRIPT.format(gate=gates[name]))

    a = submit("a", "shard:2")
    b = submit("b", "shard:2")
    try:
        for j in (a, b):
            c.wait_state(j, "RUNNING")
        for name in ("a", "b"):
            out = c.wait_file(c.work / f"{name}.out", contains="cuda=")
            assert out == "cuda=0 shards=2\n", out
        third = submit("c", "shard:2")
        whole = submit("w", "gpu:1")
        assert c.wait_state(third, "PENDING") == "PENDING"
        assert _reason(c, third, "Resources") == "Resources"
        # behind the third, as Slurm's main scheduler keeps it
        assert _reason(c, whole, "Priority") == "Priority"
        time.sleep(3)                     # a scheduling pass or more: still waiting
        assert c.state_of(third) == "PENDING" and c.state_of(whole) == "PENDING"

        # Slurm's words for what they hold and ask
        assert c.squeue(a, "%b") == "gres:shard:2"
        detail = c.run(["scontrol", "-d", "show", "job", str(a)], check=True).stdout
        assert "   JOB_GRES=shard:2\n" in detail, detail
        assert "     Nodes=node1 CPU_IDs=N/A Mem=0 GRES=shard:2(IDX:0)\n" in detail, detail
        node = c.run(["scontrol", "show", "node", "node1"], check=True).stdout
        assert "   Gres=gpu:1,mps:100,shard:4\n" in node, node
        assert "gres/shard=4" in node and "AllocTRES=cpu=2,gres/shard=4" in node, node

        # one shard job ends: the third takes its shards, the whole GPU still waits
        gates["a"].touch()
        c.wait_state(a, "COMPLETED")
        c.wait_state(third, "RUNNING", timeout=30)
        assert c.wait_file(c.work / "c.out", contains="cuda=") == "cuda=0 shards=2\n"
        assert c.state_of(whole) == "PENDING"
        assert _reason(c, whole, "Resources") == "Resources"    # the shards hold its GPU

        # the last shard is given back: the GPU is whole again
        gates["b"].touch()
        gates["c"].touch()
        c.wait_state(whole, "RUNNING", timeout=30)
        out = c.wait_file(c.work / "w.out", contains="cuda=")
        assert out.startswith("cuda=0 shards=\n"), out
    finally:
        for g in gates.values():
            g.touch()
    c.wait_state(whole, "COMPLETED", timeout=60)


@pytest.mark.parametrize("gres, words", [
    ("shard:5", "Requested node configuration is not available"),   # the GPU has 4
    ("mps:101", "Requested node configuration is not available"),   # its MPS count is 100
    ("shard:1,mps:10", "Invalid generic resource (gres) specification"),
    ("shard:1,gpu:1", "Invalid generic resource (gres) specification"),
    ("shard:0", "Invalid generic resource (gres) specification"),
    ("gpumem:1G", "Invalid generic resource (gres) specification"),  # a cap needs MPS
], ids=["more shards than a GPU has", "more MPS than a GPU has", "shards with MPS",
        "shards with whole GPUs", "no shards", "a memory cap without MPS"])
def test_impossible_shared_requests_are_refused_at_submit(shared_cluster, gres, words):
    c = shared_cluster
    before = c.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout
    p = c.run(["sbatch", f"--gres={gres}"], input="#!/bin/bash\ntrue\n")
    assert p.returncode != 0
    assert words in p.stderr, p.stderr
    assert c.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout == before


def _records(c: Cluster) -> list[dict]:
    if not c.record.exists():
        return []
    return [json.loads(line) for line in c.record.read_text().splitlines() if line]


def test_an_mps_job_runs_under_its_gpus_control_daemon(shared_cluster):
    c = shared_cluster
    gate, out = c.work / "gate-mps", c.work / "mps.env"
    start = len(_records(c))
    jid = c.sbatch("--gres=mps:50,gpumem:2G", "-J", "mps", "-o", "/dev/null",
                   input=MPS_SCRIPT.format(out=out, gate=gate))
    try:
        text = c.wait_file(out, contains="done")
        env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        calls = _records(c)[start:]
        assert [r["argv"] for r in calls] == [["-d"]], calls
        daemon = calls[0]
        pipe = daemon["env"]["CUDA_MPS_PIPE_DIRECTORY"]
        assert daemon["env"]["CUDA_VISIBLE_DEVICES"] == "0"
        assert pipe.endswith("/mps/gpu0/pipe") and os.path.isdir(pipe)
        assert daemon["env"]["CUDA_MPS_LOG_DIRECTORY"].endswith("/mps/gpu0/log")
        assert psutil.pid_exists(daemon["daemon"])
        # the job talks to that daemon, with half the GPU's threads and a 2 GB cap
        assert env["CUDA_VISIBLE_DEVICES"] == "0"
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == pipe
        assert env["CUDA_MPS_LOG_DIRECTORY"] == daemon["env"]["CUDA_MPS_LOG_DIRECTORY"]
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=2048M"
        assert c.squeue(jid, "%b") == "gres:mps:50"
    finally:
        gate.touch()
    c.wait_state(jid, "COMPLETED", timeout=60)
    deadline = time.time() + 20
    while time.time() < deadline and len(_records(c)) < start + 2:
        time.sleep(0.2)
    calls = _records(c)[start:]
    assert [r["argv"] for r in calls] == [["-d"], []], calls
    assert calls[1]["stdin"] == "quit\n"
    assert calls[1]["env"]["CUDA_MPS_PIPE_DIRECTORY"] == pipe
    assert _gone(calls[0]["daemon"], timeout=10), "the MPS daemon outlived its last job"


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_srun_makes_a_shard_allocation_and_its_steps_see_the_gpu(shared_cluster):
    c = shared_cluster
    p = c.run(["srun", "--gres=shard:1", "bash", "-c",
               'echo "cuda=$CUDA_VISIBLE_DEVICES shards=$SLURM_SHARDS_ON_NODE"'], timeout=60)
    assert (p.returncode, p.stdout) == (0, "cuda=0 shards=1\n"), p.stderr
    # a step inside a shard job sees the job's GPU without holding it: two at once
    out = c.work / "steps.out"
    jid = c.sbatch("--gres=shard:1", "-n", "2", "-o", str(out), input="""#!/bin/bash
srun -n1 --overlap bash -c 'echo "step cuda=$CUDA_VISIBLE_DEVICES"' &
srun -n1 --overlap bash -c 'echo "step cuda=$CUDA_VISIBLE_DEVICES"' &
wait
""")
    c.wait_state(jid, "COMPLETED", timeout=60)
    assert out.read_text() == "step cuda=0\nstep cuda=0\n"
