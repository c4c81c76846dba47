"""Properties of backfill over generated clusters, running jobs and queues.

Whatever the cluster: a job started in front of a reservation never holds a
node of it past its start; each reserved gang still fits, whole, on its
reserved nodes at its reserved time once the running jobs due by then have
ended and with every start of the pass that still runs then; reservations
never share a node in time; no gang starts or is reserved in part; with
backfill capped at zero reservations the plan is the plan without backfill;
and the indexed pass agrees with the plain reference scan.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from lingjund.sched.backfill import NEVER, Backfill
from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import DEFAULT_PROFILE
from lingjund.sched.plugins.gang import GangPlacement
from lingjund.sched.plugins.priority import BasicPriority
from lingjund.sched.pool import NodeFree, Share
from lingjund.sched.snapshot import (UNLIMITED, JobRequest, NodeView, PartitionView, RunningJob,
                                     Snapshot)
from tests.sched.reference import REFERENCE_PROFILE

NOW = 1_000_000.0
RES = 60
BACKFILL = replace(DEFAULT_PROFILE, backfill=Backfill(resolution_s=RES))
EXAMPLES = settings(max_examples=150, deadline=None)


@st.composite
def snapshots(draw) -> Snapshot:
    """Nodes whose allocations are exactly what generated running jobs hold."""
    count = draw(st.integers(1, 6))
    specs = [(draw(st.integers(1, 4)), draw(st.integers(0, 2))) for _ in range(count)]
    names = [f"node{i}" for i in range(1, count + 1)]
    free = {n: [c, g] for n, (c, g) in zip(names, specs)}
    running = []
    for k in range(draw(st.integers(0, 5))):
        on = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        cpus = draw(st.integers(1, 2))
        if any(free[n][0] < cpus for n in on):
            continue
        for n in on:
            free[n][0] -= cpus
        end = draw(st.sampled_from([0.0, NOW - 5, NOW + 60, NOW + 600, NOW + 1800, NOW + 3600]))
        running.append(RunningJob(job_id=90_000 + k, nodes=tuple(on), end_time=end,
                                  cpus_per_node=(cpus,) * len(on), mem_per_node_mb=(0,) * len(on),
                                  gpus_per_node=(0,) * len(on), partition="debug"))
    jobs_on = {n: sum(1 for r in running if n in r.nodes) for n in names}
    views = tuple(NodeView(name=n, cpus=c, memory_mb=1000, gpus=g, alloc_cpus=c - free[n][0],
                           running_jobs=jobs_on[n], partitions=("debug",))
                  for n, (c, g) in zip(names, specs))
    part = PartitionView(name="debug", nodes=tuple(names), default=True)
    jobs = []
    for job_id in draw(st.lists(st.integers(1, 1000), min_size=1, max_size=8, unique=True)):
        n = draw(st.sampled_from([1, 1, 1, 2, 3]))
        jobs.append(JobRequest(
            job_id=job_id, priority=draw(st.integers(0, 3)), submit_time=float(job_id),
            partition="debug", min_nodes=n, cpus_per_task=draw(st.sampled_from([1, 1, 2, 4])),
            gpus_per_node=draw(st.sampled_from([0, 0, 1])),
            exclusive=draw(st.integers(0, 5)) == 0,
            time_limit_min=draw(st.sampled_from([UNLIMITED, 1, 5, 10, 30, 120])),
            array_tasks=tuple(range(draw(st.sampled_from([0, 0, 0, 3])))),
            held=draw(st.integers(0, 9)) == 0))
    return Snapshot(nodes=views, partitions=(part,), pending=tuple(jobs),
                    running=tuple(running))


def _end(job: JobRequest, start: float) -> float:
    return NEVER if job.time_limit_min == UNLIMITED else start + job.time_limit_min * 60


def _order(snap: Snapshot) -> dict[int, int]:
    return {j.job_id: k for k, j in enumerate(BasicPriority().order(snap.pending))}


@EXAMPLES
@given(snapshots())
def test_no_start_holds_a_reserved_node_past_a_higher_jobs_reserved_start(snap):
    plan = schedule(snap, NOW, BACKFILL)
    jobs, rank = {j.job_id: j for j in snap.pending}, _order(snap)
    for s in plan.starts:
        ends = _end(jobs[s.job_id], NOW)
        for job_id, (when, nodes) in plan.expected.items():
            if rank[job_id] < rank[s.job_id] and set(s.nodes) & set(nodes):
                assert ends <= when, (s, job_id, when, nodes)


@EXAMPLES
@given(snapshots())
def test_every_reserved_gang_fits_whole_on_its_nodes_at_its_time(snap):
    plan = schedule(snap, NOW, BACKFILL)
    jobs = {j.job_id: j for j in snap.pending}
    views = {v.name: v for v in snap.nodes}
    for job_id, (when, nodes) in plan.expected.items():
        job = jobs[job_id]
        assert when > NOW and when <= NOW + 1440 * 60
        assert len(set(nodes)) == len(nodes) >= max(1, job.min_nodes)
        # each reserved node at ``when``: its size, less the running jobs not yet
        # ended then (an end counts rounded up) and the starts of the pass still running
        state = {n: NodeFree.idle(views[n]) for n in nodes}
        held: list[tuple[str, int, int]] = []
        for r in snap.running:
            if r.end_time > 0 and (r.end_time <= NOW or r.end_time <= when):
                continue
            held += [(n, r.cpus_per_node[k], 0) for k, n in enumerate(r.nodes)]
        for s in plan.starts:
            if _end(jobs[s.job_id], NOW) > when:
                held += [(n, s.cpus_per_node[k], s.gpus_per_node[k])
                         for k, n in enumerate(s.nodes)]
        for n, cpus, gpus in held:
            if n in state:
                state[n].take(Share(node=n, cpus=cpus, mem_mb=0, gpus=0, tasks=1,
                                    exclusive=False, gpu_ids=tuple(range(gpus))))
        placed = GangPlacement().place_gang(job, list(state.values()), len(nodes))
        assert placed is not None, (job_id, when, nodes)


@EXAMPLES
@given(snapshots())
def test_reservations_never_share_a_node_in_time(snap):
    plan = schedule(snap, NOW, BACKFILL)
    jobs = {j.job_id: j for j in snap.pending}
    spans = [(when, _end(jobs[j], when), set(nodes)) for j, (when, nodes) in plan.expected.items()]
    for a in range(len(spans)):
        for b in range(a + 1, len(spans)):
            s1, e1, n1 = spans[a]
            s2, e2, n2 = spans[b]
            if n1 & n2:
                assert e1 <= s2 or e2 <= s1, (spans[a], spans[b])


@EXAMPLES
@given(snapshots())
def test_no_gang_starts_in_part_and_every_job_has_one_outcome(snap):
    plan = schedule(snap, NOW, BACKFILL)
    jobs = {j.job_id: j for j in snap.pending}
    for s in plan.starts:
        assert len(set(s.nodes)) == len(s.nodes) >= max(1, jobs[s.job_id].min_nodes)
    started = {s.job_id for s in plan.starts}
    for j in snap.pending:
        assert (j.job_id in started) or (j.job_id in plan.reasons)
        assert set(plan.expected) <= set(plan.reasons)


@EXAMPLES
@given(snapshots())
def test_with_no_reservation_allowed_the_plan_is_the_plan_without_backfill(snap):
    capped = replace(DEFAULT_PROFILE, backfill=Backfill(max_job_test=0, resolution_s=RES))
    assert schedule(snap, NOW, capped) == schedule(snap, NOW, DEFAULT_PROFILE)


@EXAMPLES
@given(snapshots())
def test_the_indexed_pass_agrees_with_the_reference_scan(snap):
    reference = replace(REFERENCE_PROFILE, backfill=Backfill(resolution_s=RES))
    assert schedule(snap, NOW, BACKFILL) == schedule(snap, NOW, reference)
