"""select/gang: a job's nodes all at once, or none of them.

Layout first, then placement. The layout gives each rank (one per node)
its tasks, and from them what it asks:

- ``num_tasks`` given: tasks spread block-wise, the remainder on the first
  ranks (5 tasks on 2 nodes -> 3, 2). With ``ntasks_per_node`` too, that is
  a ceiling per node, so the gang needs at least ceil(n / per-node) nodes.
- only ``ntasks_per_node``: that many on every node.
- neither: one task per node.

A rank asks ``max(tasks, 1) * cpus_per_task`` CPUs (a node with no task
still holds one task's worth, as Slurm allocates at least one CPU per
node), ``gpus_per_node`` GPUs, and memory: none for ``mem_per_node_mb``
None, the whole node for 0, else that many MB.

Node count: from ``min_nodes`` (1 when 0) up to ``max_nodes`` (0 means
``min_nodes``), capped by the partition and, when ``num_tasks`` is given,
by the task count. With ``num_tasks`` the fewest nodes that fit win:
packing leaves whole nodes for the next gang. Without it each node is one
more rank (an elastic job, ``-N 3-4``: one more torchrun node), so, as
Slurm does ("as many nodes as possible within the range"), the most nodes
that fit win, down to ``min_nodes``; a restart after a node failed then
runs on fewer when no other node is free.

Placement stages every rank, largest ask first, each on the best remaining
node: a node the job requires (-w) first, then lowest weight, then least
CPU left over (best fit), then natural name order (node2 before node10).
If any rank finds no node, or a required node is left out, nothing is
placed. Asks of one job differ only in CPUs, so largest-first never misses
a layout that fits. The search runs over the pass's free-capacity index
(``capacity.py``), which yields nodes in exactly this order without
looking at those short of CPUs or GPUs; ``tests/sched/reference.py`` keeps
the plain scan it must agree with. Required nodes count toward the node
count, as in Slurm (-w node[1-2] alone asks for two nodes).

Memory per rank: ``mem_per_cpu_mb`` times the rank's CPUs when given.

Shared GPUs: ``shards_per_node`` / ``mps_per_node`` ride on every rank's
ask; the node gives them from one of its GPUs (``pool.NodeFree.share``).

CPUs and memory from GPUs (Slurm's --cpus-per-gpu, --mem-per-gpu): a rank
with 2 GPUs and ``cpus_per_gpu`` 4 asks at least 8 CPUs (more if its tasks
need more); with ``mem_per_gpu_mb`` 1,000 it asks 2,000 MB.
"""
from __future__ import annotations

from math import ceil
from typing import Hashable, Sequence

from lingjund.sched.capacity import FreeNodes
from lingjund.sched.pool import ALL_MEMORY, Ask, NodeFree, Placement
from lingjund.sched.snapshot import JobRequest


def node_counts(job: JobRequest, most: int) -> range:
    """Node counts to try for ``job``, in the order they are tried; empty if
    none is allowed."""
    low = max(1, job.min_nodes, len(set(job.req_nodes)))
    high = max(low, job.max_nodes)
    if job.num_tasks:
        high = min(high, max(low, job.num_tasks))
        if job.ntasks_per_node:
            low = max(low, ceil(job.num_tasks / job.ntasks_per_node))
    else:
        return range(min(high, most), low - 1, -1)   # elastic: the most that fit
    return range(low, min(high, most) + 1)


def layout(job: JobRequest, nodes: int) -> tuple[int, ...]:
    """Tasks per rank on ``nodes`` nodes (block distribution)."""
    if job.num_tasks:
        q, r = divmod(job.num_tasks, nodes)
        return tuple(q + 1 if i < r else q for i in range(nodes))
    return (job.ntasks_per_node or 1,) * nodes


def asks(job: JobRequest, nodes: int) -> tuple[Ask, ...]:
    if job.mem_per_node_mb is None:
        mem = 0
    elif job.mem_per_node_mb == 0:
        mem = ALL_MEMORY
    else:
        mem = job.mem_per_node_mb
    cpt = max(1, job.cpus_per_task)
    out = []
    for t in layout(job, nodes):
        cpus = max(max(t, 1) * cpt, job.gpus_per_node * job.cpus_per_gpu)
        rank_mem = cpus * job.mem_per_cpu_mb if job.mem_per_cpu_mb else mem
        if job.mem_per_gpu_mb is not None:
            rank_mem = job.gpus_per_node * job.mem_per_gpu_mb
        out.append(Ask(tasks=t, cpus=cpus, mem_mb=rank_mem, gpus=job.gpus_per_node,
                       exclusive=job.exclusive, shards=job.shards_per_node,
                       mps=job.mps_per_node))
    return tuple(out)


class GangPlacement:
    name = "select/gang"

    def shape(self, job: JobRequest) -> Hashable:
        """What placement reads of ``job``: two jobs of equal shape, asked of the
        same nodes, get the same answer (the pass remembers shapes that found no room)."""
        return (job.min_nodes, job.max_nodes, job.num_tasks, job.ntasks_per_node,
                job.cpus_per_task, job.mem_per_node_mb, job.mem_per_cpu_mb, job.gpus_per_node,
                job.cpus_per_gpu, job.mem_per_gpu_mb,
                job.exclusive, job.req_nodes, job.shards_per_node, job.mps_per_node)

    def place_in(self, job: JobRequest, free: FreeNodes, most_nodes: int) -> Placement | None:
        """Stage all of ``job`` on distinct nodes of ``free``, or return None.

        ``free`` is the pass's indexed capacity, narrowed to the nodes the job
        may use (its partition's, schedulable, not held for a higher-priority
        job); this hook only reads it. ``most_nodes`` is the partition's cap on
        one job. The caller commits the placement's shares or drops them.
        """
        required = frozenset(job.req_nodes)
        counts = node_counts(job, most_nodes)
        for count in counts:
            if count > free.size:
                if counts.step > 0:
                    break        # fewest first: every later count is larger still
                continue
            shares = free.stage(asks(job, count), required)
            if shares is not None:
                return Placement(shares=shares)
        return None

    def place_gang(self, job: JobRequest, candidates: Sequence[NodeFree],
                   most_nodes: int) -> Placement | None:
        """``place_in`` over a plain list of nodes (preemption, start estimates)."""
        return self.place_in(job, FreeNodes.of(candidates), most_nodes)
