"""The indexed placement decides as the plain scan does, and identical work is shared.

Properties: on generated clusters (heterogeneous nodes, weights, partly used,
exclusive holders, down nodes, overlapping partitions, features) and queues
(gangs, arrays, -w/-x/-C, exclusive, memory), a pass with the product's
``select/gang`` (free capacity indexed, failed shapes remembered) gives the
same starts, reasons and preemptions as a pass with the reference scan in
``tests/sched/reference.py``; and one gang placed over a plain node list
gets the very shares the reference gives.

Table: how many placement searches a pass makes when arrays and identical
jobs can share one.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lingjun.slurm import REASON_PRIORITY, REASON_RESOURCES
from lingjund.sched.cycle import schedule
from lingjund.sched.estimate import estimate_start
from lingjund.sched.plugins import DEFAULT_PROFILE, PARTITION_PRIO_PROFILE
from lingjund.sched.plugins.gang import GangPlacement
from lingjund.sched.pool import NodeFree
from lingjund.sched.snapshot import (UNLIMITED, JobRequest, NodeView, PartitionView, Plan,
                                     RunningJob, Snapshot)
from tests.sched.builders import busy, cluster, job, node, outcomes, partition
from tests.sched.reference import REFERENCE_PREEMPT_PROFILE, REFERENCE_PROFILE, ReferenceGang
from tests.sched.test_arrays import snapshots_with_arrays
from tests.sched.test_preempt_properties import worlds

NOW = 1_000_000.0
FEATURES = ("ib", "fast", "big")


@st.composite
def clusters(draw) -> Snapshot:
    """Up to 24 nodes of a few kinds, so buckets hold several nodes and ties are common."""
    count = draw(st.integers(1, 24))
    kinds = draw(st.lists(st.tuples(st.sampled_from([2, 4, 8]), st.sampled_from([0, 2, 4, 8]),
                                    st.sampled_from([4000, 16000])),
                          min_size=1, max_size=3))
    views = []
    for i in range(1, count + 1):
        cpus, gpus, mem = draw(st.sampled_from(kinds))
        a_cpus = a_gpus = a_mem = jobs = 0
        if draw(st.integers(0, 2)) == 0:
            a_cpus, a_gpus, a_mem = (draw(st.integers(0, cpus)), draw(st.integers(0, gpus)),
                                     draw(st.sampled_from([0, 0, mem // 2, mem])))
            jobs = draw(st.integers(1, 2))
        views.append(NodeView(
            name=draw(st.sampled_from(["node", "gpu"])) + str(i), cpus=cpus, memory_mb=mem,
            gpus=gpus, alloc_cpus=a_cpus, alloc_gpus=a_gpus, alloc_memory_mb=a_mem,
            running_jobs=jobs, exclusive=jobs > 0 and draw(st.integers(0, 5)) == 0,
            schedulable=draw(st.integers(0, 9)) > 0, weight=draw(st.sampled_from([1, 1, 1, 3])),
            features=tuple(draw(st.lists(st.sampled_from(FEATURES), unique=True, max_size=2)))))
    names = [v.name for v in views]
    parts = [PartitionView(name="all", nodes=tuple(names), max_nodes=draw(
        st.sampled_from([UNLIMITED, UNLIMITED, 4])))]
    if draw(st.booleans()):
        some = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        parts.append(PartitionView(name="some", nodes=tuple(some),
                                   priority_tier=draw(st.sampled_from([1, 1, 2]))))
    jobs = []
    for job_id in range(1, draw(st.integers(1, 25)) + 1):
        n = draw(st.sampled_from([1, 1, 1, 2, 3, 5]))
        kw = {}
        if draw(st.integers(0, 5)) == 0:
            kw["array_tasks"] = tuple(range(draw(st.integers(1, 12))))
            kw["array_slots"] = draw(st.sampled_from([UNLIMITED, UNLIMITED, 2]))
        if draw(st.integers(0, 7)) == 0:
            kw["req_nodes"] = tuple(draw(st.lists(st.sampled_from(names), min_size=1,
                                                  max_size=2, unique=True)))
        if draw(st.integers(0, 7)) == 0:
            kw["exc_nodes"] = tuple(draw(st.lists(st.sampled_from(names), min_size=1,
                                                  max_size=3, unique=True)))
        if draw(st.integers(0, 5)) == 0:
            kw["constraint"] = draw(st.sampled_from(["ib", "fast|big", "ib&fast"]))
        jobs.append(JobRequest(
            job_id=job_id, priority=draw(st.integers(0, 3)), submit_time=float(job_id),
            partition=draw(st.sampled_from([p.name for p in parts])),
            min_nodes=n, max_nodes=draw(st.sampled_from([0, 0, n + 2])),
            num_tasks=draw(st.sampled_from([0, 0, 0, 3, 7])),
            ntasks_per_node=draw(st.sampled_from([0, 0, 2])),
            cpus_per_task=draw(st.sampled_from([1, 1, 2, 4])),
            mem_per_node_mb=draw(st.sampled_from([None, None, 0, 2000])),
            mem_per_cpu_mb=None, gpus_per_node=draw(st.sampled_from([0, 0, 1, 2, 8])),
            exclusive=draw(st.integers(0, 6)) == 0, **kw))
    return Snapshot(nodes=tuple(views), partitions=tuple(parts), pending=tuple(jobs))


def decisions(plan: Plan):
    return plan.starts, dict(plan.reasons), plan.preemptions


# Fewer examples than the core's own properties: each runs two passes, one of them
# the slow reference, and the machine is shared.
SAME = settings(max_examples=120, deadline=None)


@SAME
@given(clusters())
def test_indexed_pass_decides_as_the_reference_pass(snap):
    want = decisions(schedule(snap, NOW, REFERENCE_PROFILE))
    got = decisions(schedule(snap, NOW))
    assert got == want, f"want {want}\n got {got}"


@SAME
@given(snapshots_with_arrays())
def test_indexed_pass_decides_as_the_reference_on_the_property_snapshots(snap):
    want = decisions(schedule(snap, NOW, REFERENCE_PROFILE))
    got = decisions(schedule(snap, NOW))
    assert got == want, f"want {want}\n got {got}"


@SAME
@given(worlds())
def test_indexed_preemption_chooses_as_the_reference(snap):
    want = decisions(schedule(snap, NOW, REFERENCE_PREEMPT_PROFILE))
    got = decisions(schedule(snap, NOW, PARTITION_PRIO_PROFILE))
    assert got == want, f"want {want}\n got {got}"


@settings(max_examples=60, deadline=None)
@given(clusters(), st.data())
def test_one_gang_on_a_node_list_gets_the_reference_shares(snap, data):
    nodes = [NodeFree.from_view(v) for v in snap.nodes]
    one = data.draw(st.sampled_from(snap.pending))
    most = data.draw(st.integers(1, len(nodes) + 1))
    want = ReferenceGang().place_gang(one, nodes, most)
    before = [repr(n) for n in nodes]
    got = GangPlacement().place_gang(one, nodes, most)
    assert got == want, f"want {want}\n got {got}"
    assert [repr(n) for n in nodes] == before, "placement changed the nodes it was given"


class Counting:
    """select/gang that counts its searches."""

    name = "select/counting"

    def __init__(self) -> None:
        self.calls = Counter()
        self.inner = GangPlacement()

    def shape(self, j):
        return self.inner.shape(j)

    def place_in(self, j, free, most):
        self.calls[j.job_id] += 1
        return self.inner.place_in(j, free, most)

    def place_gang(self, j, candidates, most):
        self.calls[j.job_id] += 1
        return self.inner.place_gang(j, candidates, most)


def array(job_id: int, tasks: int, **kw) -> JobRequest:
    return job(job_id, array_tasks=tuple(range(tasks)), **kw)


FOUR = [node(f"node{i}", cpus=2) for i in range(1, 5)]
FULL = [busy(f"node{i}", cpus=2) for i in range(1, 5)]

# (nodes, jobs, partitions, want searches per job id (live and as-if-idle together),
#  want outcome of some jobs)
SHARING = [
    pytest.param(FOUR[:3] + [busy("node4", cpus=2)],
                 [job(1, nodes=4, prio=300), array(2, 1000, prio=100)], None,
                 {1: 2}, {1: REASON_RESOURCES, 2: REASON_PRIORITY},
                 id="an array of 1,000 tasks behind a blocked job costs no search"),
    pytest.param(FULL, [array(1, 1000)], None,
                 {1: 2}, {1: REASON_RESOURCES},
                 id="an array of 1,000 tasks with no room costs one search and one idle check"),
    pytest.param(FOUR, [array(1, 1000)], None,
                 {1: 10}, {1: REASON_RESOURCES},
                 id="1,000 tasks on room for 8: 8 placements, one failure, one idle check"),
    pytest.param(FOUR, [job(i, cpus=4) for i in range(1, 1001)] + [job(2000, prio=50)], None,
                 {1: 2, 2000: 1}, {1: REASON_RESOURCES, 1000: REASON_RESOURCES, 2000: "node1"},
                 id="1,000 identical jobs that never fit cost one search and one idle check"),
    pytest.param(FOUR, [job(i, cpus=4, part="a" if i % 2 else "b") for i in range(1, 11)],
                 [partition("a", "node[1-2]"), partition("b", "node[3-4]")],
                 {1: 2, 2: 2}, {9: REASON_RESOURCES, 10: REASON_RESOURCES},
                 id="identical jobs in two partitions are searched once per partition"),
    pytest.param(FOUR, [job(1, cpus=4), job(2, cpus=4, exc_nodes=("node1",)),
                        job(3, cpus=4), job(4, cpus=4, exc_nodes=("node1",))], None,
                 {1: 2, 2: 2}, {3: REASON_RESOURCES, 4: REASON_RESOURCES},
                 id="jobs that differ only in -x are searched apart, each shape once"),
]


@pytest.mark.parametrize("nodes, jobs, partitions, want_calls, want", SHARING)
def test_identical_work_is_shared(nodes, jobs, partitions, want_calls, want):
    counting = Counting()
    plan = schedule(cluster(nodes, jobs, partitions), NOW,
                    replace(DEFAULT_PROFILE, select=counting))
    assert dict(counting.calls) == want_calls, \
        f"searches per job: want {want_calls}, got {dict(counting.calls)}"
    got = {s.job_id: s.nodes[0] for s in plan.starts}
    got.update(plan.reasons)
    assert {k: got.get(k) for k in want} == want
    assert decisions(plan) == decisions(schedule(cluster(nodes, jobs, partitions), NOW,
                                                 REFERENCE_PROFILE))


def test_a_gang_looks_at_few_nodes_of_a_large_cluster():
    """An 8-node gang on 2,000 idle nodes asks about 8 of them, not 2,000."""
    asked = Counter()

    class Watched(NodeFree):
        def share(self, ask):
            asked[self.name] += 1
            return super().share(ask)

    views = [node(f"gpu{i}", cpus=64, gpus=8) for i in range(1, 2001)]
    nodes = [Watched(**NodeFree.from_view(v).__dict__) for v in views]
    big = job(1, nodes=8, gpus=8, cpus=64)
    placement = GangPlacement().place_gang(big, nodes, 2000)
    assert [s.node for s in placement.shares] == [f"gpu{i}" for i in range(1, 9)]
    assert sum(asked.values()) == 8, f"asked {sum(asked.values())} nodes"


def test_running_jobs_are_only_read():
    snap = cluster(FOUR, [job(1, nodes=2)])
    snap = Snapshot(nodes=snap.nodes, partitions=snap.partitions, pending=snap.pending,
                    running=(RunningJob(job_id=9, nodes=("node1",)),))
    before = repr(snap)
    schedule(snap, NOW)
    assert repr(snap) == before


@settings(max_examples=50, deadline=None)
@given(clusters(), st.data())
def test_start_estimates_agree_with_the_reference(snap, data):
    """Running jobs end one by one in the index; the answer is the reference's."""
    running = tuple(
        RunningJob(job_id=1000 + k, nodes=(v.name,), exclusive=v.exclusive,
                   end_time=NOW + data.draw(st.sampled_from([0, 60, 60, 600])),
                   cpus_per_node=(v.alloc_cpus,), mem_per_node_mb=(v.alloc_memory_mb,),
                   gpus_per_node=(v.alloc_gpus,))
        for k, v in enumerate(snap.nodes) if v.running_jobs)
    snap = Snapshot(nodes=snap.nodes, partitions=snap.partitions, pending=snap.pending,
                    running=running)
    for one in snap.pending:
        want = estimate_start(snap, one, NOW, REFERENCE_PROFILE)
        got = estimate_start(snap, one, NOW)
        assert got == want, f"job {one.job_id}: want {want}\n got {got}"


EXAMPLE = [node("gpu1", cpus=64, gpus=8),
           node("gpu2", cpus=64, gpus=8, alloc_cpus=48, alloc_gpus=6),
           node("gpu3", cpus=64, gpus=8, alloc_cpus=8, alloc_gpus=1),
           node("gpu4", cpus=64, gpus=8)]


@pytest.mark.parametrize("one, want", [
    pytest.param(job(1, cpus=16, gpus=1), "gpu2", id="16 CPUs and a GPU: best fit is gpu2"),
    pytest.param(job(1, cpus=32, gpus=1), "gpu3", id="32 CPUs: gpu2 is skipped"),
    pytest.param(job(1, exclusive=True), "gpu1", id="exclusive: the first untouched node"),
    pytest.param(job(1, nodes=2, cpus=16, gpus=4), "gpu[1,3]",
                 id="2 nodes of 16 CPUs and 4 GPUs: gpu3 then gpu1, never gpu4"),
])
def test_the_worked_example_in_capacity(one, want):
    plan = schedule(cluster(EXAMPLE, [one]), NOW)
    assert outcomes(plan) == {1: want}
