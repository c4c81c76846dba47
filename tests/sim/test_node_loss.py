"""A node of a running gang goes silent: the whole gang requeues and runs again elsewhere.

On a simulated cluster (real lingjund, simulated agents) a 4-node gang of
8 GPUs per node runs; one of its nodes stops heartbeating and answering
(its agent goes silent, as a hung host; it never reconnects). The
controller closes its stream after the heartbeat timeout, sets it DOWN
after another, stops the gang as a whole and requeues it; the gang then
runs again, whole, on four nodes without the lost one, and completes.
Checked from the controller's records: the job's attempts, its nodes, and
every sample of the running jobs while it happened.
"""
from __future__ import annotations

import time

import pytest

from bench.sim import workload
from bench.sim.cluster import SimCluster
from bench.sim.controller import ClusterShape
from bench.sim.replay import Replay, accounting
from lingjun import slurm
from lingjun.v1 import api_pb2
from tests.sim import checks

# A node is DOWN one heartbeat timeout after its last heartbeat: 4 s, not
# less, so that a loaded 2-core machine (the suite runs three files at once)
# does not make a healthy node miss it and be taken for the silent one.
SHAPE = ClusterShape(nodes=12, heartbeat_interval_s=0.5, heartbeat_timeout_s=4.0,
                     restart_backoff_s=1.0, scheduler_interval_s=0.5)


def wait_for(api, job_id: int, pred, timeout: float, want: str, samples: list):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        running = api.call("GetJobs", api_pb2.GetJobsRequest(states=[slurm.RUNNING])).jobs
        samples.append(running)
        last = accounting(api, [job_id])[0]
        if pred(last):
            return last
        time.sleep(0.2)
    raise AssertionError(f"job {job_id}: want {want} within {timeout:g} s; got {last}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("which", [1, 0], ids=["a member node goes silent",
                                               "the batch host goes silent"])
def test_silent_node_requeues_its_whole_gang(tmp_path, which):
    gang = workload.TraceJob(name="train", nodes=4, gpus=8, run=6, requeue=True)
    samples: list = []
    with SimCluster(tmp_path, SHAPE) as cl:
        api = cl.api()
        sub = Replay(cl.api, [gang], workdir=tmp_path, deadline_s=20).run()["train"]
        assert sub.job_id, sub.error
        jid = sub.job_id
        first = wait_for(api, jid, lambda j: j.state == slurm.RUNNING, 20, "RUNNING", samples)
        lost = first.node_names[which]
        cl.fleet.silence(lost)
        again = wait_for(api, jid, lambda j: j.state == slurm.RUNNING and j.restarts == 1,
                         40, "RUNNING again after a restart", samples)
        end = wait_for(api, jid, lambda j: j.state in slurm.FINISHED_STATES, 40, "finished",
                       samples)
        lost_state = api.call("GetNodes", api_pb2.GetNodesRequest(names=[lost])).nodes[0]
        events = api.call("GetJobEvents", api_pb2.GetJobEventsRequest(job_id=jid))
    want = {jid: 4}
    assert len(first.node_names) == 4
    assert lost not in again.node_names, f"rerun on {again.nodes}, which holds lost {lost}"
    assert len(set(again.node_names)) == 4, again.nodes
    assert end.state == slurm.COMPLETED and end.restarts == 1, (end.state, end.restarts)
    assert lost_state.state == slurm.NODE_DOWN, lost_state
    assert [a.state for a in events.attempts] == [slurm.NODE_FAIL], events.attempts
    assert events.attempts[0].nodes == first.nodes
    assert any(e.kind == "node_lost" and lost in e.text for e in events.events), events.events
    for running in samples:
        assert not checks.partial_gangs(running, want), checks.partial_gangs(running, want)
