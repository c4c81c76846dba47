"""Gangs on a simulated cluster: never partly started, no node double-booked.

A real lingjund with simulated agents (bench/sim). Many gang jobs of 8 GPUs
per node (8, 32 and 64 nodes) and one-GPU jobs are submitted at once,
more than fit; while they run, each sample of the running jobs must show
every job on all its nodes and no node holding more GPUs than it has; at
the end the accounting records (sacct's) must say the same of every run.

Both sizes run in the suite: 200 nodes (gangs of 8 to 64) and 1,000 nodes
(scale 4: gangs of 32 to 256), the second in about 21 s on a quiet machine
now that registration and passes are cheap (bench/README.md, "Agents at
scale"); before, registering 1,000 agents alone took 1-3 minutes.
"""
from __future__ import annotations

import time

import pytest

from bench.sim import workload
from bench.sim.cluster import SimCluster
from bench.sim.controller import ClusterShape
from bench.sim.replay import Replay, accounting, job_ids, outcomes
from lingjun import slurm
from lingjun.v1 import api_pb2
from tests.sim import checks

def gang_trace(scale: int) -> list[workload.TraceJob]:
    jobs = []
    sizes = [s * scale for s in (64, 32, 8, 8, 64, 8, 32, 8, 8, 64, 32, 8, 8, 8, 64, 32, 8, 8)]
    for i, size in enumerate(sizes, 1):
        jobs.append(workload.TraceJob(name=f"gang{i}", nodes=size, gpus=8, run=2 + i % 3))
    for i in range(1, 31):
        jobs.append(workload.TraceJob(name=f"gpu{i}", nodes=1, gpus=1, run=1 + i % 4))
    return jobs


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nodes, scale", [
    pytest.param(200, 1, id="200 nodes, gangs of 8 to 64"),
    pytest.param(1000, 4, id="1,000 nodes, gangs of 32 to 256"),
])
def test_gangs_start_whole_and_no_node_is_double_booked(tmp_path, nodes, scale):
    trace = gang_trace(scale)
    want = {}
    shape = ClusterShape(nodes=nodes, heartbeat_interval_s=2.0 if nodes <= 200 else 5.0)
    with SimCluster(tmp_path, shape, per_channel=1 if nodes <= 200 else 100,
                    register_timeout=60 if nodes <= 200 else 400) as cl:
        api = cl.api()
        subs = Replay(cl.api, trace, clients=4, workdir=tmp_path, deadline_s=30 * scale).run()
        for job in trace:
            assert subs[job.name].job_id, f"{job.name} not submitted: {subs[job.name].error}"
            want[subs[job.name].job_id] = job.nodes
        ids = job_ids(subs)
        samples, seen_running = 0, set()
        deadline = time.monotonic() + 60 * scale
        while time.monotonic() < deadline:
            running = api.call("GetJobs", api_pb2.GetJobsRequest(states=[slurm.RUNNING])).jobs
            samples += 1
            seen_running |= {j.job_id for j in running}
            assert not checks.partial_gangs(running, want), checks.partial_gangs(running, want)
            assert not checks.overbooked_now(running), checks.overbooked_now(running)
            if all(j.state in slurm.FINISHED_STATES for j in accounting(api, ids)):
                break
            time.sleep(0.2)
        done = accounting(api, ids)
        ends = outcomes(api, subs)
    assert all(o == "COMPLETED" for o in ends.values()), ends
    assert not checks.partial_gangs(done, want), checks.partial_gangs(done, want)
    assert not checks.overbooked_history(done), checks.overbooked_history(done)
    # the samples were not empty: gangs were seen running (at 1,000 nodes one sample
    # takes seconds, so there are few)
    assert samples >= 3 and len(seen_running) >= 5, (samples, len(seen_running))
