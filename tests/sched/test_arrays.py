"""Job arrays in the scheduling core: one request for up to K identical tasks.

The pending remainder of an array is a single ``JobRequest`` whose
``array_tasks`` lists the pending task indices and ``array_slots`` says how
many more may run (the %N throttle minus running tasks). The pass places as
many tasks as fit, each as its own all-or-nothing gang, and names each task
in its ``Start``.
"""
from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lingjun.slurm import (REASON_ARRAY_TASK_LIMIT, REASON_HELD_USER, REASON_PRIORITY,
                           REASON_RESOURCES, compress_hostlist)
from lingjund.sched.cycle import schedule
from lingjund.sched.snapshot import UNLIMITED, JobRequest, Snapshot
from tests.sched.builders import busy, cluster, job, node
from tests.sched.test_properties import snapshots

NOW = 1_000_000.0
FOUR = [node(f"node{i}", cpus=2) for i in range(1, 5)]   # 8 CPUs, like `lingjun up`


def array(job_id: int, tasks, slots: int = UNLIMITED, **kw) -> JobRequest:
    return job(job_id, array_tasks=tuple(tasks), array_slots=slots, **kw)


def tasks_started(plan, job_id: int) -> list[int]:
    return [s.array_task_id for s in plan.starts if s.job_id == job_id]


# (nodes, jobs, array job id, want task ids started, want reason for the rest or None,
#  want other jobs' outcome: job id -> hostlist or reason)
CASES = [
    pytest.param(FOUR, [array(1, range(1, 11))], 1, [1, 2, 3, 4, 5, 6, 7, 8], REASON_RESOURCES, {},
                 id="ten one-CPU tasks on eight free CPUs: eight start in task order, the rest wait"),
    pytest.param(FOUR, [array(1, [0, 4, 8, 12])], 1, [0, 4, 8, 12], None, {},
                 id="a stepped array that fits starts every task in one pass"),
    pytest.param(FOUR, [array(1, range(1, 7), slots=2)], 1, [1, 2], REASON_ARRAY_TASK_LIMIT, {},
                 id="a throttle of 2 with nothing running starts two tasks"),
    pytest.param(FOUR, [array(1, range(3, 7), slots=0), job(2)], 1, [], REASON_ARRAY_TASK_LIMIT,
                 {2: "node1"},
                 id="a throttle used up by running tasks starts none and blocks nobody"),
    pytest.param(FOUR, [array(1, range(1, 4), cpus=2, slots=1)], 1, [1], REASON_ARRAY_TASK_LIMIT, {},
                 id="throttle 1 starts exactly one task however much is free"),
    pytest.param([busy(f"node{i}", cpus=2) for i in range(1, 5)],
                 [array(1, range(1, 4)), job(2, prio=50)], 1, [], REASON_RESOURCES,
                 {2: REASON_PRIORITY},
                 id="an array that cannot start a task blocks lower jobs like any job"),
    pytest.param(FOUR, [array(1, range(1, 5), cpus=2), job(2, prio=50)], 1, [1, 2, 3, 4], None,
                 {2: REASON_RESOURCES},
                 id="tasks placed earlier in the pass use the CPUs a later job would need"),
    pytest.param(FOUR, [array(1, range(1, 9), nodes=2, cpus=2)], 1, [1, 2], REASON_RESOURCES, {},
                 id="each task of a two-node array is a whole gang of its own"),
    pytest.param(FOUR, [array(1, range(1, 4), held=True)], 1, [], REASON_HELD_USER, {},
                 id="a held array starts nothing"),
    pytest.param(FOUR, [job(2, prio=200, cpus=2), array(1, range(1, 11))], 1,
                 [1, 2, 3, 4, 5, 6], REASON_RESOURCES, {2: "node1"},
                 id="a higher job goes first and the array takes what is left"),
]


@pytest.mark.parametrize("nodes, jobs, array_id, want_tasks, want_reason, others", CASES)
def test_array_pass(nodes, jobs, array_id, want_tasks, want_reason, others):
    plan = schedule(cluster(nodes, jobs), NOW)
    got = tasks_started(plan, array_id)
    assert got == want_tasks, f"tasks started: want {want_tasks}, got {got}"
    assert plan.reasons.get(array_id) == want_reason, \
        f"reason for the rest: want {want_reason}, got {plan.reasons.get(array_id)}"
    got_others = {s.job_id: compress_hostlist(s.nodes) for s in plan.starts if s.job_id != array_id}
    got_others.update({k: v for k, v in plan.reasons.items() if k != array_id})
    assert got_others == others


def test_ten_thousand_tasks_cost_one_request_and_few_placements():
    big = array(1, range(1, 10_001))
    calls = Counter()

    class Counting:
        name = "select/counting"

        def place_gang(self, job, candidates, most):
            calls["place"] += 1
            from lingjund.sched.plugins.gang import GangPlacement
            return GangPlacement().place_gang(job, candidates, most)

    from lingjund.sched.plugins import DEFAULT_PROFILE, Profile
    profile = Profile(queue_sort=DEFAULT_PROFILE.queue_sort, filters=DEFAULT_PROFILE.filters,
                      select=Counting())
    plan = schedule(cluster(FOUR, [big]), NOW, profile)
    assert len(plan.starts) == 8
    # 8 placed, 1 that fails, 1 "would it ever fit" check: not 10,000
    assert calls["place"] == 10, f"want 10 placement attempts, got {calls['place']}"


@st.composite
def snapshots_with_arrays(draw) -> Snapshot:
    snap = draw(snapshots())
    pending = []
    for j in snap.pending:
        if draw(st.booleans()):
            tasks = draw(st.lists(st.integers(0, 50), min_size=1, max_size=12, unique=True))
            slots = draw(st.sampled_from([UNLIMITED, UNLIMITED, 0, 1, 2, 5]))
            j = JobRequest(**{**j.__dict__, "array_tasks": tuple(sorted(tasks)),
                              "array_slots": slots})
        pending.append(j)
    return Snapshot(nodes=snap.nodes, partitions=snap.partitions, pending=tuple(pending))


@settings(max_examples=200, deadline=None)
@given(snapshots_with_arrays())
def test_arrays_respect_throttle_and_nodes(snap):
    plan = schedule(snap, NOW)
    jobs = {j.job_id: j for j in snap.pending}
    per_job = defaultdict(list)
    for s in plan.starts:
        per_job[s.job_id].append(s.array_task_id)
    for job_id, tasks in per_job.items():
        j = jobs[job_id]
        if not j.array_tasks:
            assert tasks == [-1], f"plain job {job_id} started as {tasks}"
            continue
        assert len(tasks) == len(set(tasks)), f"array {job_id} started a task twice: {tasks}"
        assert tasks == list(j.array_tasks[:len(tasks)]), \
            f"array {job_id}: want the first pending tasks in order, got {tasks} of {j.array_tasks}"
        if j.array_slots != UNLIMITED:
            assert len(tasks) <= j.array_slots, \
                f"array {job_id}: throttle allows {j.array_slots}, started {len(tasks)}"
    used = defaultdict(lambda: [0, 0, 0])
    for s in plan.starts:
        for i, name in enumerate(s.nodes):
            used[name][0] += s.cpus_per_node[i]
            used[name][1] += s.mem_per_node_mb[i]
            used[name][2] += s.gpus_per_node[i]
    for n in snap.nodes:
        u = used[n.name]
        got = (n.alloc_cpus + u[0], n.alloc_memory_mb + u[1], n.alloc_gpus + u[2])
        assert all(g <= w for g, w in zip(got, (n.cpus, n.memory_mb, n.gpus))), \
            f"{n.name}: holds {got}, has {(n.cpus, n.memory_mb, n.gpus)}"
    for j in snap.pending:
        left = (len(j.array_tasks) if j.array_tasks else 1) - len(per_job.get(j.job_id, []))
        assert (left > 0) == (j.job_id in plan.reasons), \
            f"job {j.job_id}: {left} left to start, reason {plan.reasons.get(j.job_id)}"
