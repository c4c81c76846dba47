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

Topology (``lingjun/topology.py``; Slurm's topology/tree select). With a
topology, a gang of two or more nodes goes under the lowest-level switch
that can hold all of it (fewest free nodes first among switches of one
level: best fit), and within it onto leaves chosen one by one: a leaf
that can take all the ranks still unplaced, the one with the fewest free
nodes that suffice; else the leaf with the most. The ranks are then staged
as above among those leaves' nodes (and, should memory or a larger rank
not fit there, among all the switch's nodes). "Free" counts the nodes with
the CPUs and GPUs of the smallest rank. Example: leaves s0 (node[1-4], 3
free) and s1 (node[5-8], all 4 free) under s2: a 3-node gang takes s0's
three, leaving s1 whole for a 4-node gang; without a topology it would
take node[1-3] or wherever weight and best fit lead.

``--switches=N`` (``JobRequest.switches``): a placement over more than N
leaves is no placement; a switch whose fewest leaves for the gang exceed N
is passed over. The pass drops the limit once ``switches_until`` is
reached (Slurm's max-wait): the job then starts anywhere.
``--segment=N`` (topology/block): the ranks go in groups of N, each
group within one block. A single-node job is placed as without topology
(one node is one leaf).

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
from lingjund.sched.pool import ALL_MEMORY, Ask, NodeFree, Placement, Share
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
    """One ``Ask`` per rank; ranks with as many tasks share one object (an Ask is
    frozen): a backfill query asks a 64-node gang at many times, and building 64
    equal asks each time cost more than placing it."""
    if job.mem_per_node_mb is None:
        mem = 0
    elif job.mem_per_node_mb == 0:
        mem = ALL_MEMORY
    else:
        mem = job.mem_per_node_mb
    cpt = max(1, job.cpus_per_task)
    made: dict[int, Ask] = {}
    out = []
    for t in layout(job, nodes):
        ask = made.get(t)
        if ask is None:
            cpus = max(max(t, 1) * cpt, job.gpus_per_node * job.cpus_per_gpu)
            rank_mem = cpus * job.mem_per_cpu_mb if job.mem_per_cpu_mb else mem
            if job.mem_per_gpu_mb is not None:
                rank_mem = job.gpus_per_node * job.mem_per_gpu_mb
            ask = made[t] = Ask(tasks=t, cpus=cpus, mem_mb=rank_mem, gpus=job.gpus_per_node,
                                exclusive=job.exclusive, shards=job.shards_per_node,
                                mps=job.mps_per_node)
        out.append(ask)
    return tuple(out)


class GangPlacement:
    name = "select/gang"

    def shape(self, job: JobRequest) -> Hashable:
        """What placement reads of ``job``: two jobs of equal shape, asked of the
        same nodes, get the same answer (the pass remembers shapes that found no room)."""
        return (job.min_nodes, job.max_nodes, job.num_tasks, job.ntasks_per_node,
                job.cpus_per_task, job.mem_per_node_mb, job.mem_per_cpu_mb, job.gpus_per_node,
                job.cpus_per_gpu, job.mem_per_gpu_mb,
                job.exclusive, job.req_nodes, job.shards_per_node, job.mps_per_node,
                job.switches, job.segment)

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
            if free.topology is not None and count > 1:
                shares = by_switch(asks(job, count), free, required, job.switches,
                                   job.segment)
            else:
                shares = free.stage(asks(job, count), required)
            if shares is not None:
                return Placement(shares=shares)
        return None

    def place_gang(self, job: JobRequest, candidates: Sequence[NodeFree],
                   most_nodes: int) -> Placement | None:
        """``place_in`` over a plain list of nodes (preemption, start estimates)."""
        return self.place_in(job, FreeNodes.of(candidates), most_nodes)


def by_switch(ranks: tuple[Ask, ...], free: FreeNodes, required: frozenset[str],
              switches: int = 0, segment: int = 0) -> tuple[Share, ...] | None:
    """Stage ``ranks`` under one switch, on as few leaves as it takes (module doc)."""
    topo, leaf = free.topology, free.leaf
    need = len(ranks)
    unit = segment if segment and need % segment == 0 else 1
    groups = need // unit
    per_leaf = free.by_leaf(min(ranks, key=lambda a: a.cpus), need)
    if per_leaf is None:
        return None                   # not enough nodes with the CPUs and GPUs anywhere
    req_leaves = set()
    for i in free.ids_of(required):
        if leaf[i] < 0:
            return None               # a node under no switch never joins a gang
        req_leaves.add(leaf[i])
    room = {lf: len(ids) // unit for lf, ids in per_leaf.items() if len(ids) >= unit}
    tops = []
    for s in topo.order:
        below = topo.below[s]
        total = 0
        for lf in below:
            total += room.get(lf, 0)
        if total >= groups and req_leaves.issubset(below):
            tops.append((topo.switches[s].level, total, s))
    tops.sort()
    for _, _, s in tops:
        chosen = _leaves(topo.below[s], room, groups, req_leaves)
        if chosen is None or (switches and len(chosen) > switches):
            continue
        if unit > 1:
            shares = _by_segment(ranks, free, required, chosen, room, per_leaf, unit)
        else:
            within = frozenset(i for lf in chosen for i in per_leaf.get(lf, ()))
            shares = free.stage_among(ranks, required, within)
            if shares is None and len(chosen) < len(topo.below[s]) and not switches:
                shares = free.stage_among(ranks, required, frozenset(
                    i for lf in topo.below[s] for i in per_leaf.get(lf, ())))
        if shares is not None:
            return shares
    return None


def _leaves(below: tuple[int, ...], room: dict[int, int], need: int,
            first: set[int]) -> list[int] | None:
    """Leaves under a switch for ``need`` units: ``first`` (required nodes'), then one
    by one the best-fitting leaf for what is left, else the roomiest."""
    chosen = sorted(first)
    got = sum(room.get(lf, 0) for lf in chosen)
    rest = [lf for lf in below if lf not in first and room.get(lf, 0) > 0]
    while got < need:
        if not rest:
            return None
        left = need - got
        fits = [lf for lf in rest if room[lf] >= left]
        if fits:
            pick = min(fits, key=lambda lf: (room[lf], lf))
        else:
            pick = min(rest, key=lambda lf: (-room[lf], lf))
        rest.remove(pick)
        chosen.append(pick)
        got += room[pick]
    return chosen


def _by_segment(ranks: tuple[Ask, ...], free: FreeNodes, required: frozenset[str],
                chosen: list[int], room: dict[int, int], per_leaf: dict[int, list[int]],
                unit: int) -> tuple[Share, ...] | None:
    """Groups of ``unit`` ranks, in rank order, each group within one of the
    ``chosen`` blocks (a block holds as many whole groups as it has room for)."""
    out: list[Share] = []
    at = 0
    for lf in chosen:
        if at >= len(ranks):
            break
        take = min(room[lf] * unit, len(ranks) - at)
        names = {free.name_of(i) for i in per_leaf[lf]}
        shares = free.stage_among(ranks[at:at + take], required & names,
                                  frozenset(per_leaf[lf]))
        if shares is None:
            return None
        out.extend(shares)
        at += take
    if at < len(ranks) or not required <= {s.node for s in out}:
        return None
    return tuple(out)
