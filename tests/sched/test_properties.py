"""Properties of a pass over generated clusters and queues.

Whatever the cluster and queue: no node is given more than it has, an
exclusive start is alone on an untouched node, no GPU index goes to two
jobs on one node, a gang starts whole on
distinct nodes of its partition, every pending job either starts or has
exactly one reason, and the same snapshot gives the same plan whatever
order the queue arrives in.
"""
from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from lingjun import slurm
from lingjund.sched.cycle import schedule
from lingjund.sched.snapshot import UNLIMITED, JobRequest, NodeView, PartitionView, Snapshot

NOW = 1_000_000.0
REASON_WORDS = {v for k, v in vars(slurm).items() if k.startswith("REASON_")}


@st.composite
def nodes(draw) -> tuple[NodeView, ...]:
    out = []
    for i in range(1, draw(st.integers(1, 6)) + 1):
        cpus = draw(st.integers(1, 8))
        mem = draw(st.sampled_from([0, 1000, 4000, 8000]))
        gpus = draw(st.integers(0, 4))
        a_cpus, a_mem, a_gpus = 0, 0, 0
        if draw(st.integers(0, 2)) == 0:     # a third of the nodes already hold work
            a_cpus, a_mem, a_gpus = (draw(st.integers(0, cpus)), draw(st.integers(0, mem)),
                                     draw(st.integers(0, gpus)))
        held = bool(a_cpus or a_mem or a_gpus)
        exclusive = held and draw(st.integers(0, 3)) == 0
        # which GPUs the running work holds; sometimes not known (a count only)
        a_ids = ()
        if a_gpus and draw(st.integers(0, 3)) > 0:
            a_ids = tuple(sorted(draw(st.permutations(range(gpus)))[:a_gpus]))
        out.append(NodeView(
            name=f"node{i}", cpus=cpus, memory_mb=mem, gpus=gpus, alloc_gpu_ids=a_ids,
            alloc_cpus=a_cpus, alloc_memory_mb=a_mem, alloc_gpus=a_gpus,
            exclusive=exclusive, running_jobs=draw(st.integers(1, 3)) if held else 0,
            schedulable=draw(st.integers(0, 5)) > 0,
            weight=draw(st.sampled_from([1, 1, 5]))))
    return tuple(out)


@st.composite
def snapshots(draw) -> Snapshot:
    ns = draw(nodes())
    names = [n.name for n in ns]
    parts = []
    for p in ("debug", "gpu")[:draw(st.integers(1, 2))]:
        members = draw(st.lists(st.sampled_from(names), min_size=1, unique=True)
                       | st.just(names))
        parts.append(PartitionView(
            name=p, nodes=tuple(members),
            state=draw(st.sampled_from(["UP"] * 8 + ["DOWN", "DRAIN", "INACTIVE"])),
            max_nodes=draw(st.sampled_from([UNLIMITED] * 4 + [2])),
            max_time_min=draw(st.sampled_from([UNLIMITED] * 4 + [60]))))
    jobs = []
    for job_id in draw(st.lists(st.integers(1, 10_000), min_size=1, max_size=8, unique=True)):
        min_nodes = draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3, 4]))
        jobs.append(JobRequest(
            job_id=job_id, priority=draw(st.integers(0, 3)),
            submit_time=float(draw(st.integers(0, 3))),
            partition=draw(st.sampled_from([p.name for p in parts] * 8 + ["nosuch"])),
            min_nodes=min_nodes, max_nodes=draw(st.sampled_from([0, min_nodes, 4])),
            num_tasks=draw(st.sampled_from([0, 0, 1, 3, 5, 9])),
            ntasks_per_node=draw(st.sampled_from([0, 0, 1, 2])),
            cpus_per_task=draw(st.sampled_from([1, 1, 1, 2, 4])),
            mem_per_node_mb=draw(st.sampled_from([None, None, 0, 500, 3000])),
            gpus_per_node=draw(st.sampled_from([0, 0, 1, 2])),
            exclusive=draw(st.integers(0, 4)) == 0,
            time_limit_min=draw(st.sampled_from([UNLIMITED, 30, 30, 120])),
            held=draw(st.integers(0, 9)) == 0,
            begin_time=draw(st.sampled_from([0.0] * 6 + [NOW, NOW + 60]))))
    return Snapshot(nodes=ns, partitions=tuple(parts), pending=tuple(jobs))


EXAMPLES = settings(max_examples=200, deadline=None)


@EXAMPLES
@given(snapshots())
def test_no_node_gets_more_than_it_has(snap):
    plan = schedule(snap, NOW)
    used = defaultdict(lambda: [0, 0, 0])
    for s in plan.starts:
        for i, name in enumerate(s.nodes):
            u = used[name]
            u[0] += s.cpus_per_node[i]
            u[1] += s.mem_per_node_mb[i]
            u[2] += s.gpus_per_node[i]
    for n in snap.nodes:
        u = used[n.name]
        got = (n.alloc_cpus + u[0], n.alloc_memory_mb + u[1], n.alloc_gpus + u[2])
        want = (n.cpus, n.memory_mb, n.gpus)
        assert all(g <= w for g, w in zip(got, want)), f"{n.name}: holds {got}, has {want}"


@EXAMPLES
@given(snapshots())
def test_no_gpu_index_is_given_twice_on_a_node(snap):
    plan = schedule(snap, NOW)
    given_out = {n.name: list(n.alloc_gpu_ids) for n in snap.nodes}
    gpus = {n.name: n.gpus for n in snap.nodes}
    for s in plan.starts:
        assert len(s.gpu_ids_per_node) == len(s.nodes)
        for name, count, ids in zip(s.nodes, s.gpus_per_node, s.gpu_ids_per_node):
            assert len(ids) == count, f"job {s.job_id} on {name}: {count} GPUs, ids {ids}"
            assert all(0 <= i < gpus[name] for i in ids), f"{name} has {gpus[name]} GPUs: {ids}"
            given_out[name] += ids
    for name, ids in given_out.items():
        assert len(ids) == len(set(ids)), f"{name}: GPU indices {sorted(ids)} given twice"


@EXAMPLES
@given(snapshots())
def test_exclusive_is_alone_on_untouched_nodes(snap):
    plan = schedule(snap, NOW)
    by_name = {n.name: n for n in snap.nodes}
    starts_on = defaultdict(list)
    for s in plan.starts:
        for name in s.nodes:
            starts_on[name].append(s)
    for name, starts in starts_on.items():
        n = by_name[name]
        assert not n.exclusive, f"{name} is held exclusively, yet got jobs {[s.job_id for s in starts]}"
        if any(s.exclusive for s in starts):
            assert len(starts) == 1, f"{name}: exclusive beside others {[s.job_id for s in starts]}"
            assert (n.running_jobs, n.alloc_cpus, n.alloc_memory_mb, n.alloc_gpus) == (0, 0, 0, 0), \
                f"{name}: exclusive start on a node in use: {n}"


@EXAMPLES
@given(snapshots())
def test_a_gang_starts_whole_on_distinct_nodes_of_its_partition(snap):
    plan = schedule(snap, NOW)
    jobs = {j.job_id: j for j in snap.pending}
    parts = {p.name: p for p in snap.partitions}
    by_name = {n.name: n for n in snap.nodes}
    for s in plan.starts:
        j = jobs[s.job_id]
        low = max(1, j.min_nodes)
        high = max(low, j.max_nodes)
        assert low <= len(s.nodes) <= high, f"job {j.job_id}: want {low}-{high} nodes, got {s.nodes}"
        assert len(set(s.nodes)) == len(s.nodes), f"job {j.job_id}: repeated node in {s.nodes}"
        assert list(s.nodes) == sorted(s.nodes, key=slurm.natural_key)
        for t in (s.cpus_per_node, s.mem_per_node_mb, s.gpus_per_node, s.tasks_per_node):
            assert len(t) == len(s.nodes), f"job {j.job_id}: {t} for nodes {s.nodes}"
        if j.num_tasks:
            assert sum(s.tasks_per_node) == j.num_tasks
        for name in s.nodes:
            assert name in parts[j.partition].nodes and by_name[name].schedulable, \
                f"job {j.job_id} on {name}, outside partition {j.partition} or unschedulable"


@EXAMPLES
@given(snapshots())
def test_every_pending_job_starts_or_has_one_reason(snap):
    plan = schedule(snap, NOW)
    started = [s.job_id for s in plan.starts]
    assert len(started) == len(set(started)), f"a job started twice: {started}"
    pending = {j.job_id for j in snap.pending}
    assert set(plan.reasons) == pending - set(started), \
        f"want reasons for {sorted(pending - set(started))}, got {sorted(plan.reasons)}"
    assert set(plan.reasons) & set(started) == set()
    bad = {r for r in plan.reasons.values() if r not in REASON_WORDS}
    assert not bad, f"reasons not in lingjun.slurm: {bad}"


@EXAMPLES
@given(snapshots(), st.randoms(use_true_random=False))
def test_a_pass_is_deterministic_whatever_the_queue_order(snap, rnd):
    first = schedule(snap, NOW)
    shuffled = list(snap.pending)
    rnd.shuffle(shuffled)
    again = schedule(Snapshot(nodes=snap.nodes, partitions=snap.partitions,
                              pending=tuple(shuffled)), NOW)
    assert (first.starts, dict(first.reasons)) == (again.starts, dict(again.reasons))
