"""Shared GPUs in the core: shards and MPS of one GPU, in the same books as whole GPUs.

A node configured with shards (or MPS) has them spread evenly over its GPUs.
A shard job takes its shards from ONE GPU; many shard jobs share a GPU up to
its count, never beyond; a GPU carrying any share gives no whole GPU, a
whole-allocated GPU gives no share, and shards and MPS never meet on a GPU.
"""
from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lingjun import slurm
from lingjund.sched.cycle import schedule
from lingjund.sched.estimate import estimate_start
from lingjund.sched.snapshot import (MPS, SHARD, JobRequest, NodeView, RunningJob, Snapshot,
                                     Start)
from tests.sched.builders import cluster, job, node

NOW = 1_000_000.0
R = slurm.REASON_RESOURCES
P = slurm.REASON_PRIORITY


def gpu_node(name="node1", gpus=1, shards=4, mps=0, **kw) -> NodeView:
    return node(name, cpus=8, gpus=gpus, shards=shards, mps=mps, **kw)


def placed(plan) -> dict[int, object]:
    """job id -> the GPU ids per node it starts with, or its pending reason."""
    out: dict[int, object] = {s.job_id: s.gpu_ids_per_node for s in plan.starts}
    out.update(plan.reasons)
    return out


CASES = [
    ("two shard:2 jobs share a 4-shard GPU and a third waits for Resources",
     [gpu_node()],
     [job(1, shards_per_node=2), job(2, shards_per_node=2), job(3, shards_per_node=2)],
     {1: ((0,),), 2: ((0,),), 3: R}),
    ("a whole-GPU job waits while shards hold the node's only GPU",
     [gpu_node(alloc_cpus=1, alloc_shared=((0, SHARD, 1),))],
     [job(1, gpus=1)],
     {1: R}),
    ("a shard job waits while the only GPU is whole-allocated",
     [gpu_node(alloc_cpus=1, alloc_gpus=1, alloc_gpu_ids=(0,))],
     [job(1, shards_per_node=1)],
     {1: R}),
    ("shards fill the GPU already carrying shards before breaking a whole one",
     [gpu_node(gpus=2, shards=8, alloc_cpus=1, alloc_shared=((1, SHARD, 2),))],
     [job(1, shards_per_node=2), job(2, gpus=1)],
     {1: ((1,),), 2: ((0,),)}),
    ("a shard job takes a free GPU when the shared one is full",
     [gpu_node(gpus=2, shards=8, alloc_cpus=1, alloc_shared=((0, SHARD, 4),))],
     [job(1, shards_per_node=3)],
     {1: ((1,),)}),
    ("shards never come from two GPUs: 3 shards of 2-shard GPUs never fit",
     [gpu_node(gpus=2, shards=4)],
     [job(1, shards_per_node=3), job(2, shards_per_node=1)],
     {1: R, 2: ((0,),)}),
    ("MPS and shards do not meet on a GPU",
     [gpu_node(gpus=2, shards=4, mps=200, alloc_cpus=1, alloc_shared=((0, MPS, 50),))],
     [job(1, shards_per_node=1), job(2, mps_per_node=50), job(3, mps_per_node=60)],
     {1: ((1,),), 2: ((0,),), 3: R}),
    ("a node without shards never gives one",
     [node("node1", cpus=8, gpus=4)],
     [job(1, shards_per_node=1)],
     {1: R}),
    ("a gang of shard jobs gets a GPU on every node",
     [gpu_node("node1", alloc_cpus=1, alloc_shared=((0, SHARD, 3),)), gpu_node("node2")],
     [job(1, nodes=2, shards_per_node=1)],
     {1: ((0,), (0,))}),
    ("a shard job beside a full node waits and blocks what is behind it",
     [gpu_node(alloc_cpus=1, alloc_shared=((0, SHARD, 4),))],
     [job(1, shards_per_node=1, prio=200), job(2, prio=100)],
     {1: R, 2: P}),
]


@pytest.mark.parametrize("nodes, jobs, want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_shares_of_one_gpu(nodes, jobs, want):
    assert placed(schedule(cluster(nodes, jobs), NOW)) == want


def test_a_start_estimate_counts_shards_coming_free():
    # shards 4 held by two jobs ending at +60 and +120: a shard:3 job starts at +120,
    # when the GPU has room for it again, not at +60.
    n = gpu_node(alloc_cpus=2, alloc_shared=((0, SHARD, 2), (0, SHARD, 2)), jobs=2)
    running = (RunningJob(job_id=1, nodes=("node1",), end_time=NOW + 60, cpus_per_node=(1,),
                          mem_per_node_mb=(0,), gpus_per_node=(0,), gpu_ids_per_node=((0,),),
                          shards_per_node=2),
               RunningJob(job_id=2, nodes=("node1",), end_time=NOW + 120, cpus_per_node=(1,),
                          mem_per_node_mb=(0,), gpus_per_node=(0,), gpu_ids_per_node=((0,),),
                          shards_per_node=2))
    snap = cluster([n], [job(3, shards_per_node=3)])
    snap = Snapshot(nodes=snap.nodes, partitions=snap.partitions, pending=snap.pending,
                    running=running)
    when, start = estimate_start(snap, snap.pending[0], NOW)
    assert when == NOW + 120
    assert start.gpu_ids_per_node == ((0,),)


# -- property: over passes with starts and ends, the books always balance ----------

@st.composite
def shared_clusters(draw):
    nodes = []
    for i in range(1, draw(st.integers(1, 3)) + 1):
        gpus = draw(st.integers(1, 3))
        nodes.append(NodeView(name=f"node{i}", cpus=draw(st.integers(2, 16)), memory_mb=8000,
                              gpus=gpus, shards=gpus * draw(st.sampled_from([0, 1, 2, 4])),
                              mps=gpus * draw(st.sampled_from([0, 100])),
                              partitions=("debug",)))
    jobs = []
    for job_id in range(1, draw(st.integers(1, 12)) + 1):
        kind = draw(st.sampled_from(["gpu", "shard", "mps", "cpu"]))
        jobs.append(JobRequest(
            job_id=job_id, priority=draw(st.integers(0, 3)), submit_time=float(job_id),
            partition="debug", min_nodes=draw(st.sampled_from([1, 1, 1, 2])),
            gpus_per_node=draw(st.integers(1, 2)) if kind == "gpu" else 0,
            shards_per_node=draw(st.integers(1, 4)) if kind == "shard" else 0,
            mps_per_node=draw(st.sampled_from([10, 50, 100])) if kind == "mps" else 0,
            exclusive=draw(st.integers(0, 9)) == 0))
    ends = draw(st.lists(st.booleans(), min_size=40, max_size=40))
    return tuple(nodes), jobs, ends


def _views(base: tuple[NodeView, ...], running: dict[int, tuple[JobRequest, Start]]):
    out = []
    for v in base:
        cpus = gpus = jobs = 0
        ids: list[int] = []
        shared: list[tuple[int, str, int]] = []
        exclusive = False
        for req, s in running.values():
            if v.name not in s.nodes:
                continue
            i = s.nodes.index(v.name)
            cpus += s.cpus_per_node[i]
            gpus += s.gpus_per_node[i]
            jobs += 1
            exclusive |= s.exclusive
            if req.shards_per_node or req.mps_per_node:
                kind = SHARD if req.shards_per_node else MPS
                shared.append((s.gpu_ids_per_node[i][0], kind,
                               req.shards_per_node or req.mps_per_node))
            else:
                ids += s.gpu_ids_per_node[i]
        out.append(NodeView(name=v.name, cpus=v.cpus, memory_mb=v.memory_mb, gpus=v.gpus,
                            shards=v.shards, mps=v.mps, partitions=v.partitions,
                            alloc_cpus=cpus, alloc_gpus=gpus, running_jobs=jobs,
                            exclusive=exclusive, alloc_gpu_ids=tuple(sorted(ids)),
                            alloc_shared=tuple(sorted(shared))))
    return tuple(out)


def _check_books(base: tuple[NodeView, ...], running: dict[int, tuple[JobRequest, Start]]):
    per = {v.name: v for v in base}
    whole: dict[tuple[str, int], int] = defaultdict(int)
    used: dict[tuple[str, int, str], int] = defaultdict(int)
    for req, s in running.values():
        for i, name in enumerate(s.nodes):
            ids = s.gpu_ids_per_node[i]
            if req.shards_per_node or req.mps_per_node:
                assert len(ids) == 1 and s.gpus_per_node[i] == 0, s
                kind = SHARD if req.shards_per_node else MPS
                used[(name, ids[0], kind)] += req.shards_per_node or req.mps_per_node
            else:
                for g in ids:
                    whole[(name, g)] += 1
    for (name, g), n in whole.items():
        assert n == 1, f"GPU {g} of {name} whole-allocated {n} times"
    kinds: dict[tuple[str, int], set[str]] = defaultdict(set)
    for (name, g, kind), n in used.items():
        v = per[name]
        count = (v.shards if kind == SHARD else v.mps) // v.gpus
        assert n <= count, f"GPU {g} of {name}: {n} {kind} in use, it has {count}"
        assert (name, g) not in whole, f"GPU {g} of {name} whole-allocated and shared"
        kinds[(name, g)].add(kind)
    for key, ks in kinds.items():
        assert len(ks) == 1, f"GPU {key[1]} of {key[0]} carries {ks}"


@settings(max_examples=150, deadline=None)
@given(shared_clusters())
def test_a_gpus_shares_never_exceed_its_count_and_never_meet_a_whole_allocation(case):
    base, jobs, ends = case
    pending = {j.job_id: j for j in jobs}
    running: dict[int, tuple[JobRequest, Start]] = {}
    for step in range(6):
        snap = cluster(_views(base, running), sorted(pending.values(), key=lambda j: j.job_id))
        plan = schedule(snap, NOW)
        for s in plan.starts:
            running[s.job_id] = (pending.pop(s.job_id), s)
        _check_books(base, running)
        # some running jobs end (which ones: drawn), then the next pass
        for k, jid in enumerate(sorted(running)):
            if ends[(step * 7 + k) % len(ends)]:
                del running[jid]
        if not pending:
            break
