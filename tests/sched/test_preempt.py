"""preempt/partition_prio as a table: running jobs, a pending high-tier job, the victims.

Every case: node[1-4], 4 CPUs each; partition ``low`` (tier 1, REQUEUE) and
``high`` (tier 2, OFF) both on every node, unless the case says otherwise.
Running jobs hold whole nodes (4 CPUs each) unless given ``cpus``.
"""
from __future__ import annotations

import pytest

from lingjun.slurm import REASON_PRIORITY, REASON_RESOURCES, compress_hostlist
from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import DEFAULT_PROFILE, PARTITION_PRIO_PROFILE
from lingjund.sched.snapshot import Preemption, RunningJob, Snapshot
from tests.sched.builders import job, node, partition

NOW = 1_000_000.0
NODES = ("node1", "node2", "node3", "node4")


def running(job_id: int, nodes: str, *, prio: int = 100, part: str = "low", cpus: int = 4,
            start: float = NOW - 600, stopping: bool = False) -> RunningJob:
    from lingjun.slurm import expand_hostlist
    names = tuple(expand_hostlist(nodes))
    return RunningJob(job_id=job_id, nodes=names, cpus_per_node=(cpus,) * len(names),
                      mem_per_node_mb=(0,) * len(names), gpus_per_node=(0,) * len(names),
                      partition=part, priority=prio, start_time=start, stopping=stopping)


def parts(low_mode: str = "REQUEUE", high_tier: int = 2, low_nodes: str = "node[1-4]"):
    return (partition("low", low_nodes, priority_tier=1, preempt_mode=low_mode, default=True),
            partition("high", "node[1-4]", priority_tier=high_tier, preempt_mode="OFF"))


def snapshot(run, pending, partitions=None, exempt: float = 0.0) -> Snapshot:
    """node[1-4] holding what ``run`` holds."""
    partitions = partitions or parts()
    nodes = []
    for name in NODES:
        here = [r for r in run if name in r.nodes]
        used = sum(r.cpus_per_node[r.nodes.index(name)] for r in here)
        nodes.append(node(name, alloc_cpus=used, jobs=len(here),
                          partitions=tuple(p.name for p in partitions if name in p.nodes)))
    return Snapshot(nodes=tuple(nodes), partitions=partitions, pending=tuple(pending),
                    running=tuple(run), preempt_exempt_s=exempt)


def victims(plan) -> dict[int, tuple[int, ...]]:
    """pending job -> the jobs preempted for it."""
    out: dict[int, list[int]] = {}
    for p in plan.preemptions:
        out.setdefault(p.by, []).append(p.victim)
    return {k: tuple(sorted(v)) for k, v in out.items()}


CASES = [
    pytest.param([running(10, "node[1-4]")], [job(20, part="high", nodes=2, cpus=4)], {},
                 {20: (10,)},
                 id="a 2-node high job preempts the 4-node job that fills the cluster"),
    pytest.param([running(10, "node[1-2]"), running(11, "node3", prio=50),
                  running(12, "node4", prio=60)],
                 [job(20, part="high", nodes=2, cpus=4)], {},
                 {20: (10,)},
                 id="fewest victims: one 2-node job rather than two lower 1-node jobs"),
    pytest.param([running(10, "node[1-2]"), running(11, "node3", prio=50),
                  running(12, "node4", prio=60)],
                 [job(20, part="high", nodes=1, cpus=4)], {},
                 {20: (11,)},
                 id="among equally few, the lowest priority job goes"),
    pytest.param([running(11, "node1", prio=50, start=NOW - 100),
                  running(12, "node2", prio=50, start=NOW - 50),
                  running(13, "node[3-4]", prio=80)],
                 [job(20, part="high", nodes=1, cpus=4)], {},
                 {20: (12,)},
                 id="equal priority: the youngest job goes"),
    pytest.param([running(10, "node[1-4]", cpus=2)], [job(20, part="high", nodes=4, cpus=3)],
                 {}, {20: (10,)},
                 id="a gang is preempted whole even where the high job needs only part of a node"),
    pytest.param([running(10, "node[1-4]")], [job(20, part="low", nodes=2, cpus=4)], {},
                 {},
                 id="a job of the same tier preempts nothing"),
    pytest.param([running(10, "node[1-4]", part="high")],
                 [job(20, part="high", nodes=2, cpus=4)], {},
                 {},
                 id="jobs of the high tier itself are never victims"),
    pytest.param([running(10, "node[1-4]")], [job(20, part="high", nodes=2, cpus=4)],
                 {"partitions": parts(low_mode="OFF")}, {},
                 id="PreemptMode=OFF protects the low partition"),
    pytest.param([running(10, "node[1-4]", start=NOW - 30)],
                 [job(20, part="high", nodes=2, cpus=4)], {"exempt": 60}, {},
                 id="a job younger than PreemptExemptTime is exempt"),
    pytest.param([running(10, "node[1-4]", start=NOW - 90)],
                 [job(20, part="high", nodes=2, cpus=4)], {"exempt": 60}, {20: (10,)},
                 id="past PreemptExemptTime it may go"),
    pytest.param([running(10, "node[1-2]"), running(11, "node[3-4]", part="high")],
                 [job(20, part="high", nodes=3, cpus=4)], {}, {},
                 id="no victims when the job would still not fit"),
    pytest.param([running(10, "node[1-4]", stopping=True)],
                 [job(20, part="high", nodes=2, cpus=4)], {}, {},
                 id="a job already being preempted is not preempted twice"),
    pytest.param([running(10, "node[1-2]", stopping=True), running(11, "node[3-4]")],
                 [job(20, part="high", nodes=2, cpus=4)], {}, {},
                 id="waiting for a stopping job beats taking another victim"),
    pytest.param([running(10, "node[1-2]"), running(11, "node[3-4]", prio=50)],
                 [job(20, part="high", nodes=2, cpus=4, prio=10),
                  job(21, part="high", nodes=2, cpus=4, prio=5)], {},
                 {20: (11,)},
                 id="the second high job waits behind the first rather than take its own victim"),
    pytest.param([running(10, "node[1-2]", cpus=2)],
                 [job(20, part="high", nodes=4, cpus=4)], {}, {20: (10,)},
                 id="free nodes count: two idle plus the victim's two"),
]


@pytest.mark.parametrize("run,pending,opts,want", CASES)
def test_victims(run, pending, opts, want):
    snap = snapshot(run, pending, opts.get("partitions"), opts.get("exempt", 0.0))
    plan = schedule(snap, NOW, PARTITION_PRIO_PROFILE)
    assert victims(plan) == want, f"want {want}, got {victims(plan)}"
    for p in pending:
        if p.job_id in want:
            assert plan.reasons[p.job_id] == REASON_RESOURCES   # starts once the victims are gone
            assert not any(s.job_id == p.job_id for s in plan.starts)


def test_without_the_plugin_nothing_is_preempted():
    snap = snapshot([running(10, "node[1-4]")], [job(20, part="high", nodes=2, cpus=4)])
    plan = schedule(snap, NOW, DEFAULT_PROFILE)
    assert plan.preemptions == ()
    assert plan.reasons[20] == REASON_RESOURCES


def test_higher_tier_walks_first_and_keeps_the_freed_nodes():
    """The low job has the higher priority but the high tier goes first; once
    the high job is blocked waiting for its victim, the low job may not take
    the nodes."""
    snap = snapshot([running(10, "node[1-4]")],
                    [job(20, part="high", nodes=2, cpus=4, prio=1),
                     job(30, part="low", nodes=1, cpus=4, prio=1000)])
    plan = schedule(snap, NOW, PARTITION_PRIO_PROFILE)
    assert plan.preemptions == (Preemption(victim=10, by=20),)
    assert plan.reasons == {20: REASON_RESOURCES, 30: REASON_PRIORITY}


def test_the_high_job_starts_on_the_freed_nodes():
    """The next pass, the victim gone: the high job starts where it was."""
    snap = snapshot([], [job(20, part="high", nodes=2, cpus=4),
                         job(10, part="low", nodes=4, cpus=4, prio=1000)])
    plan = schedule(snap, NOW, PARTITION_PRIO_PROFILE)
    assert [(s.job_id, compress_hostlist(s.nodes)) for s in plan.starts] == [(20, "node[1-2]")]
    assert plan.preemptions == ()


def test_a_large_candidate_set_still_finds_a_small_answer():
    """Past the exact search's budget the greedy fallback still drops victims it does not need."""
    from lingjund.sched.plugins import preempt
    run = [running(100 + i, f"node{1 + i % 4}", cpus=1, prio=i) for i in range(16)]
    snap = snapshot(run, [job(20, part="high", nodes=1, cpus=2)])
    budget = preempt.SEARCH_BUDGET
    preempt.SEARCH_BUDGET = 3
    try:
        plan = schedule(snap, NOW, PARTITION_PRIO_PROFILE)
    finally:
        preempt.SEARCH_BUDGET = budget
    got = victims(plan)[20]
    assert len(got) == 2, got
    nodes = {r.nodes[0] for r in run if r.job_id in got}
    assert len(nodes) == 1, f"both victims must share a node, got {got} on {nodes}"

