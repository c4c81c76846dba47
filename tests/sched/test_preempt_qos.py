"""preempt/qos as a table: a pending job's QOS names the QOS whose running jobs it may preempt.

Every case: node[1-4], 4 CPUs each, one partition ``debug`` (tier 1,
PreemptMode REQUEUE: the fallback for QOS whose mode is ``cluster``) on
every node; QOS ``high`` with Preempt=low, ``low`` with mode ``""``
(cluster), ``normal`` listing nothing. Running jobs hold whole nodes.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from lingjun.slurm import REASON_RESOURCES
from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import QOS_PREEMPT_PROFILE
from lingjund.sched.snapshot import QosView
from tests.sched.builders import job, partition
from tests.sched.test_preempt import NOW, running, snapshot, victims

QOS = {"high": QosView("high", frozenset({"low"})), "low": QosView("low")}


def run(job_id: int, nodes: str, qos: str, **kw):
    return replace(running(job_id, nodes, part="debug", **kw), qos=qos)


def want(job_id: int, qos: str, nodes: int = 2, **kw):
    return job(job_id, part="debug", nodes=nodes, cpus=4, qos=qos, **kw)


def debug(mode: str = "REQUEUE", tier: int = 1):
    return (partition("debug", "node[1-4]", priority_tier=tier, preempt_mode=mode, default=True),)


CASES = [
    pytest.param([run(10, "node[1-4]", "low")], [want(20, "high")], {}, {20: (10,)},
                 id="a high job preempts the low job that fills the cluster"),
    pytest.param([run(10, "node[1-2]", "normal"), run(11, "node[3-4]", "low")],
                 [want(20, "high")], {}, {20: (11,)},
                 id="only jobs of a QOS it lists are victims, whatever their priority"),
    pytest.param([run(10, "node[1-4]", "normal")], [want(20, "high")], {}, {},
                 id="a QOS it does not list is never preempted"),
    pytest.param([run(10, "node[1-4]", "low")], [want(20, "low")], {}, {},
                 id="a QOS that lists nothing preempts nothing, not even its own"),
    pytest.param([run(10, "node[1-4]", "low")], [want(20, "high")],
                 {"qos": {**QOS, "low": QosView("low", preempt_mode="OFF")}}, {},
                 id="the victim QOS's PreemptMode=OFF protects it"),
    pytest.param([run(10, "node[1-4]", "low")], [want(20, "high")],
                 {"partitions": debug(mode="OFF")}, {},
                 id="QOS mode cluster falls back to the partition's mode: OFF protects"),
    pytest.param([run(10, "node[1-4]", "low")], [want(20, "high")],
                 {"partitions": debug(mode="OFF"),
                  "qos": {**QOS, "low": QosView("low", preempt_mode="CANCEL")}}, {20: (10,)},
                 id="the QOS's own mode overrides the partition's OFF"),
    pytest.param([run(10, "node[1-4]", "low", start=NOW - 30)], [want(20, "high")],
                 {"exempt": 60}, {},
                 id="a job younger than PreemptExemptTime is exempt"),
    pytest.param([run(10, "node[1-4]", "low", start=NOW - 90)], [want(20, "high")],
                 {"exempt": 60}, {20: (10,)},
                 id="past PreemptExemptTime it may go"),
    pytest.param([run(10, "node[1-4]", "low", start=NOW - 90)], [want(20, "high")],
                 {"exempt": 0, "qos": {**QOS, "low": QosView("low", exempt_s=120)}}, {},
                 id="the victim QOS's own PreemptExemptTime holds over the cluster's"),
    pytest.param([run(10, "node[1-4]", "low", start=NOW - 90)], [want(20, "high")],
                 {"exempt": 600, "qos": {**QOS, "low": QosView("low", exempt_s=60)}},
                 {20: (10,)},
                 id="a shorter QOS PreemptExemptTime frees it before the cluster's would"),
    pytest.param([run(10, "node[1-4]", "low", stopping=True)], [want(20, "high")], {}, {},
                 id="a low job already stopping is waited for, not preempted twice"),
]


@pytest.mark.parametrize("running_jobs,pending,opts,expected", CASES)
def test_qos_victims(running_jobs, pending, opts, expected):
    snap = snapshot(running_jobs, pending, opts.get("partitions") or debug(),
                    opts.get("exempt", 0.0))
    snap = replace(snap, qos=opts.get("qos", QOS))
    plan = schedule(snap, NOW, QOS_PREEMPT_PROFILE)
    assert victims(plan) == expected, f"want {expected}, got {victims(plan)}"
    for p in pending:
        if p.job_id in expected:
            assert plan.reasons[p.job_id] == REASON_RESOURCES
            assert not any(s.job_id == p.job_id for s in plan.starts)


def test_partition_tiers_do_not_protect_under_preempt_qos():
    """A low-QOS job in a higher-tier partition is still a victim of a high-QOS
    job in a lower tier: preempt/qos weighs QOS, not tiers."""
    parts = (partition("lowtier", "node[1-4]", priority_tier=1, preempt_mode="REQUEUE",
                       default=True),
             partition("hightier", "node[1-4]", priority_tier=5, preempt_mode="REQUEUE"))
    snap = snapshot([replace(running(10, "node[1-4]", part="hightier"), qos="low")],
                    [job(20, part="lowtier", nodes=2, cpus=4, qos="high")], parts)
    plan = schedule(replace(snap, qos=QOS), NOW, QOS_PREEMPT_PROFILE)
    assert victims(plan) == {20: (10,)}
