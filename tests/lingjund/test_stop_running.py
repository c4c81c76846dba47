"""Stopping a running job, over a real SQLite store and a hand-moved clock:
every stopper goes through ``lifecycle.stop``, so a batch job and an
srun/salloc allocation end alike. A batch job is told to stop and ends when
its script reports; an allocation has no script, so it ends at once, in the
state and reason Slurm gives that stop, and its nodes are told to clean up.

node[1-2], 2 CPUs each; partitions ``low`` (PreemptMode CANCEL, no grace)
and ``high`` (tier 2). Agents are plain outboxes.
"""
from __future__ import annotations

import pytest

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund.service import jobs, scheduling
from lingjund.service.agents import Connection
from tests.lingjund import handclock

CONF = """
[preempt]
type = "partition_prio"
mode = "CANCEL"
[[nodes]]
names = "node[1-2]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "low"
nodes = "ALL"
[[partitions]]
name = "high"
nodes = "ALL"
priority_tier = 2
preempt_mode = "OFF"
"""
NODES = ("node1", "node2")


@pytest.fixture
def ctl(tmp_path):
    with handclock.controller(tmp_path, CONF, NODES) as c:
        for n in NODES:
            c.agents.attach(Connection(node=n))
        yield c


def terminations(ctl) -> list[str]:
    """The nodes told to end a job since the last call."""
    out = []
    for n in NODES:
        q = ctl.agents.get(n).outbox
        while not q.empty():
            if q.get_nowait().WhichOneof("msg") == "terminate_job":
                out.append(n)
    return out


def start(ctl, *, batch: bool, part: str = "low", **kw) -> int:
    spec = api_pb2.JobSpec(name="j", work_dir="/w", user="u", uid=1, batch=batch, partition=part,
                           min_nodes=2, cpus_per_task=2, **kw)
    if batch:
        spec.script = "#!/bin/sh\ntrue\n"
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id
    scheduling.run_pass(ctl)
    assert ctl.store.job(jid).state == slurm.RUNNING
    terminations(ctl)
    return jid


def by_time_limit(ctl, jid):
    ctl.clock.now += 61
    scheduling.run_pass(ctl)


def by_deadline(ctl, jid):
    ctl.clock.now = ctl.store.job(jid).deadline
    scheduling.run_pass(ctl)


def by_scancel(ctl, jid):
    jobs.cancel(ctl, api_pb2.CancelJobsRequest(job_ids=[jid], requester_uid=1))


def by_preemption(ctl, jid):
    spec = api_pb2.JobSpec(name="hi", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u", uid=1,
                           batch=True, partition="high", min_nodes=2, cpus_per_task=2)
    jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec))
    scheduling.run_pass(ctl)


# (how it is stopped, what it asked for, its end state and reason)
STOPS = [
    pytest.param(by_time_limit, dict(time_limit_min=1), slurm.TIMEOUT, slurm.REASON_TIME_LIMIT,
                 id="time limit"),
    pytest.param(by_deadline, dict(deadline=1030), slurm.DEADLINE, slurm.REASON_DEADLINE,
                 id="deadline"),
    pytest.param(by_scancel, {}, slurm.CANCELLED, slurm.REASON_NONE, id="scancel"),
    pytest.param(by_preemption, {}, slurm.PREEMPTED, slurm.REASON_NONE, id="preemption"),
]


@pytest.mark.parametrize("stop,asked,state,reason", STOPS)
def test_a_stopped_allocation_ends_at_once_and_its_nodes_clean_up(ctl, stop, asked, state, reason):
    jid = start(ctl, batch=False, **asked)
    stop(ctl, jid)
    job = ctl.store.job(jid)
    assert (job.state, job.reason, job.kill_reason) == (state, reason, state)
    assert sorted(job.completing) == list(NODES), "its nodes are held until they are clean"
    assert sorted(terminations(ctl)) == list(NODES)


@pytest.mark.parametrize("stop,asked,state,reason", STOPS)
def test_a_stopped_batch_job_is_told_to_stop_and_ends_when_its_script_reports(
        ctl, stop, asked, state, reason):
    jid = start(ctl, batch=True, **asked)
    stop(ctl, jid)
    job = ctl.store.job(jid)
    assert (job.state, job.kill_reason) == (slurm.RUNNING, state)
    assert sorted(terminations(ctl)) == list(NODES)
