"""Properties of preempt/partition_prio over generated clusters.

One pending job of the high tier, running jobs of both tiers holding what
they hold. Whatever the draw: victims are running, not stopping, of the
lower tier and never twice; the job they are taken for does not start in
the same pass; without them (and without the jobs already stopping) it
fits; and no smaller set would do, since the search tries every smaller set
first (the draws stay far under its budget).
"""
from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import PARTITION_PRIO_PROFILE
from lingjund.sched.plugins.gang import GangPlacement
from lingjund.sched.plugins.preempt import _freed
from lingjund.sched.pool import NodeFree
from lingjund.sched.snapshot import JobRequest, NodeView, PartitionView, RunningJob, Snapshot

NOW = 1_000_000.0
NAMES = ("node1", "node2", "node3", "node4")
PARTS = (PartitionView(name="low", nodes=NAMES, priority_tier=1, preempt_mode="REQUEUE"),
         PartitionView(name="high", nodes=NAMES, priority_tier=2, preempt_mode="OFF"))


@st.composite
def worlds(draw) -> Snapshot:
    cpus = {n: draw(st.integers(1, 4)) for n in NAMES}
    free = dict(cpus)
    running = []
    for job_id in range(10, 10 + draw(st.integers(0, 6))):
        where = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
        where = [n for n in where if free[n] > 0]
        if not where:
            continue
        take = [draw(st.integers(1, free[n])) for n in where]
        for n, c in zip(where, take):
            free[n] -= c
        running.append(RunningJob(
            job_id=job_id, nodes=tuple(where), cpus_per_node=tuple(take),
            mem_per_node_mb=(0,) * len(where), gpus_per_node=(0,) * len(where),
            partition=draw(st.sampled_from(["low", "low", "high"])),
            priority=draw(st.integers(0, 3)), start_time=NOW - draw(st.integers(0, 100)),
            stopping=draw(st.integers(0, 5)) == 0))
    nodes = tuple(NodeView(name=n, cpus=cpus[n], memory_mb=16000, alloc_cpus=cpus[n] - free[n],
                           running_jobs=sum(n in r.nodes for r in running),
                           partitions=("low", "high")) for n in NAMES)
    job = JobRequest(job_id=99, priority=1, submit_time=0.0, partition="high",
                     min_nodes=draw(st.integers(1, 3)), cpus_per_task=draw(st.integers(1, 4)))
    return Snapshot(nodes=nodes, partitions=PARTS, pending=(job,), running=tuple(running))


def _fits_without(snap: Snapshot, gone) -> bool:
    pool = _freed([NodeFree.from_view(v) for v in snap.nodes], gone)
    return GangPlacement().place_gang(snap.pending[0], pool, len(NAMES)) is not None


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_victims_are_lower_tier_sufficient_and_fewest(snap):
    plan = schedule(snap, NOW, PARTITION_PRIO_PROFILE)
    by_id = {r.job_id: r for r in snap.running}
    chosen = [p.victim for p in plan.preemptions]
    assert len(chosen) == len(set(chosen)), f"a victim twice: {chosen}"
    if not chosen:
        return
    assert {p.by for p in plan.preemptions} == {99}
    assert not plan.starts, "the job started although it preempted"
    for v in chosen:
        r = by_id[v]
        assert r.partition == "low" and not r.stopping, f"victim {r}"
    stopping = [r for r in snap.running if r.stopping]
    victims = [by_id[v] for v in chosen]
    assert _fits_without(snap, stopping + victims), "the victims do not make room"
    assert not _fits_without(snap, stopping), "preempted although waiting would do"
    lows = [r for r in snap.running if r.partition == "low" and not r.stopping]
    for k in range(1, len(victims)):
        for fewer in combinations(lows, k):
            assert not _fits_without(snap, stopping + list(fewer)), \
                f"{[r.job_id for r in fewer]} would do, took {chosen}"
