"""Free capacity during one pass, indexed so that placing a rank does not scan every node.

What it decides: for one rank's ``Ask``, which nodes could take it and in
which order placement prefers them. The order is the one ``plugins/gang.py``
documents: a node the job requires (-w) first, then lowest weight, then the
fewest CPUs left over (best fit), then natural name order. Without an index
that means asking every node of the partition, for every rank of every job;
with it a rank looks only at nodes that have the CPUs and GPUs it asks, best
first, and stops at the first that also has the memory.

How. A ``NodeIndex`` keeps the nodes that can take any rank at all (not
held exclusively, at least one CPU free) in buckets keyed by
``(weight, free CPUs, free GPUs)``, each bucket a sorted list of node ids,
where a node's id is its place in natural name order. Walking the bucket
keys in order and skipping those with too few CPUs or GPUs yields exactly
the preferred order: weight, then free CPUs (so the least left over, since
the ask is the same for every node), then ids, merged across the buckets
that differ only in free GPUs. An exclusive ask wants an untouched node and
takes all of it (nothing is left over), so untouched nodes are also kept by
weight alone, in id order.

Example. gpu[1-4], 64 CPUs and 8 GPUs each, weight 1; gpu2 runs a job
holding 48 CPUs and 6 GPUs, gpu3 one holding 8 CPUs and 1 GPU:

    bucket (1, 16, 2): gpu2
    bucket (1, 56, 7): gpu3
    bucket (1, 64, 8): gpu1 gpu4      untouched (weight 1): gpu1 gpu4

A rank asking 16 CPUs and 1 GPU walks gpu2, gpu3, gpu1, gpu4 and takes
gpu2 (best fit); one asking 32 CPUs skips bucket (1, 16, 2) without looking
at gpu2; an exclusive rank walks the untouched gpu1, gpu4. A 2-node gang of
16 CPUs and 4 GPUs per rank skips (1, 16, 2), finds gpu3 and gpu1, and
never touches gpu4.

Shared GPUs (shards, MPS) are not in the bucket keys: a shard ask asks no
whole GPU, so every bucket with its CPUs is walked and the node itself says
whether one of its GPUs has room (``pool.NodeFree.share``). Only shard and
MPS jobs pay for that walk; the keys, and every other ask, stay as they were.

Staging and committing. A gang stages its ranks on distinct nodes without
changing anything: one rank per node means no rank sees another's share,
so the overlay of a staged gang is just the set of nodes it used and their
shares. ``FreeCapacity.commit`` then applies the shares whole (the nodes
move to their new buckets in every partition's index); dropping a gang is
doing nothing. Nothing copies the pool.

Within a pass capacity only shrinks (starts take, blocked partitions keep
their nodes), which is what lets the pass remember a shape that found no
room (``cycle.py``).
"""
from __future__ import annotations

from bisect import bisect_left, insort
from functools import lru_cache
from heapq import merge
from typing import Iterable, Mapping, Sequence

from lingjun.slurm import natural_key
from lingjund.sched.pool import Ask, NodeFree, Share
from lingjund.sched.snapshot import NodeView, PartitionView
from lingjun.topology import Topology


# Node names repeat from pass to pass (and from one preemption trial to the next):
# their natural-order keys are worth remembering. A pure function's memo.
_natural = lru_cache(maxsize=1 << 17)(natural_key)


def _placeable(node: NodeFree) -> bool:
    """Can take some rank: every ask wants at least one CPU; nothing joins an exclusive holder."""
    return not node.exclusive and node.free_cpus >= 1


class NodeIndex:
    """Some nodes, those able to take a rank kept in placement order (see the module doc).

    ``nodes`` maps a node id to its ``NodeFree`` (ids are natural name
    order); ``ids`` maps names back to ids. The index reads the nodes; the
    owner changes them only between ``discard`` and ``add``.
    """

    def __init__(self, nodes: Sequence[NodeFree] | Mapping[int, NodeFree],
                 ids: Mapping[str, int], members: Iterable[int]):
        self._node = nodes
        self._ids = ids
        self._members: set[int] = set()
        self._bucket_of: dict[int, tuple[int, int, int]] = {}
        self._buckets: dict[tuple[int, int, int], list[int]] = {}
        self._keys: list[tuple[int, int, int]] = []
        self._untouched_of: dict[int, int] = {}       # id -> weight, for untouched nodes
        self._untouched: dict[int, list[int]] = {}    # weight -> ids
        self._weights: list[int] = []
        self._members.update(members)
        bucket_of, buckets = self._bucket_of, self._buckets
        untouched_of, untouched = self._untouched_of, self._untouched
        for i in self._members:                       # in bulk: append, then sort once
            node = nodes[i]
            if node.exclusive or node.free_cpus < 1:  # _placeable, inlined: 10,000 nodes a pass
                continue
            key = (node.weight, node.free_cpus, node.free_gpus)
            bucket_of[i] = key
            ids_ = buckets.get(key)
            if ids_ is None:
                buckets[key] = [i]
            else:
                ids_.append(i)
            if node.untouched:
                untouched_of[i] = node.weight
                untouched.setdefault(node.weight, []).append(i)
        for ids_ in self._buckets.values():
            ids_.sort()
        for ids_ in self._untouched.values():
            ids_.sort()
        self._keys = sorted(self._buckets)
        self._weights = sorted(self._untouched)

    @property
    def size(self) -> int:
        """How many nodes the index holds, placeable or not (an upper bound for a gang)."""
        return len(self._members)

    def discard(self, i: int, forget: bool = False) -> None:
        """Take node ``i`` out of the placement order (before it changes); ``forget``:
        out of the index for good (its partition was blocked)."""
        if forget:
            self._members.discard(i)
        key = self._bucket_of.pop(i, None)
        if key is not None:
            ids_ = self._buckets[key]
            del ids_[bisect_left(ids_, i)]
            if not ids_:
                del self._buckets[key]
                del self._keys[bisect_left(self._keys, key)]
        w = self._untouched_of.pop(i, None)
        if w is not None:
            ids_ = self._untouched[w]
            del ids_[bisect_left(ids_, i)]
            if not ids_:
                del self._untouched[w]
                del self._weights[bisect_left(self._weights, w)]

    def add(self, i: int) -> None:
        """Put node ``i`` back in order as it is now (after it changed)."""
        if i not in self._members or i in self._bucket_of:
            return
        node = self._node[i]
        if not _placeable(node):
            return
        key = (node.weight, node.free_cpus, node.free_gpus)
        self._bucket_of[i] = key
        ids_ = self._buckets.get(key)
        if ids_ is None:
            self._buckets[key] = [i]
            insort(self._keys, key)
        else:
            insort(ids_, i)
        if node.untouched:
            self._untouched_of[i] = node.weight
            ids_ = self._untouched.get(node.weight)
            if ids_ is None:
                self._untouched[node.weight] = [i]
                insort(self._weights, node.weight)
            else:
                insort(ids_, i)

    def stage(self, ranks: Sequence[Ask], required: frozenset[str] = frozenset(),
              only: frozenset[int] | None = None) -> tuple[Share, ...] | None:
        """One share per rank, each on its own node, in natural node order; or None.

        Largest ask first, each on the best node left (see the module doc);
        every node in ``required`` must take a rank; ``only``: the ids the
        job may use (None: all). Changes nothing.
        """
        req: set[int] = set()
        for name in required:
            i = self._ids.get(name)
            if i is None or i not in self._bucket_of or (only is not None and i not in only):
                return None       # a required node that can take no rank: never satisfied
            req.add(i)
        if ranks and ranks.count(ranks[0]) == len(ranks):
            ordered = ranks       # all alike (the usual gang): nothing to sort or compare
            groups = [(0, len(ranks))]
        else:
            ordered = sorted(ranks, key=lambda a: -a.cpus)
            groups = []
            start = 0
            while start < len(ordered):
                end = start + 1
                while end < len(ordered) and ordered[end] == ordered[start]:
                    end += 1
                groups.append((start, end))
                start = end
        used: set[int] = set()
        got: list[tuple[int, Share]] = []
        for start, end in groups:
            ask = ordered[start]
            # Ranks with equal asks are interchangeable: the best ``end - start`` nodes
            # in one walk are what rank-by-rank choice would give them.
            chosen = self._best(ask, end - start, used, req, only)
            if chosen is None:
                return None
            for i, share in chosen:
                used.add(i)
                got.append((i, share))
        if not req <= used:
            return None
        got.sort(key=lambda t: t[0])
        return tuple(share for _, share in got)

    def _best(self, ask: Ask, need: int, used: set[int], req: set[int],
              only: frozenset[int] | None) -> list[tuple[int, Share]] | None:
        out: list[tuple[int, Share]] = []
        if req:
            first = []
            for i in req:
                if i in used:
                    continue
                node = self._node[i]
                share = node.share(ask)
                if share is not None:
                    first.append(((node.weight, node.free_cpus - share.cpus, i), i, share))
            first.sort(key=lambda t: t[0])
            out = [(i, share) for _, i, share in first[:need]]
            if len(out) == need:
                return out
        runs = self._runs(ask)
        fitting = sum(len(ids_) for run in runs for ids_ in run)
        if fitting < need:
            return None           # not enough nodes with the CPUs and GPUs: no walk
        excluded = getattr(only, "excluded", None)
        if excluded is not None and len(excluded) > fitting - (need - len(out)) \
                and _unexcluded(runs, excluded) < need - len(out):
            return None           # enough of them, but too few not reserved: no walk
        node_of = self._node
        for run in runs:
            for i in (run[0] if len(run) == 1 else merge(*run)):
                if i in used or i in req or (only is not None and i not in only):
                    continue
                share = node_of[i].share(ask)
                if share is None:
                    continue
                out.append((i, share))
                if len(out) == need:
                    return out
        return None

    def fitting(self, ask: Ask, need: int = 0) -> list[int]:
        """Ids of the nodes with the CPUs and GPUs (an untouched node, for an
        exclusive ask) that ``ask`` needs; memory and shared GPUs unchecked.
        Fewer than ``need`` of them: [] without listing them."""
        runs = self._runs(ask)
        if need and sum(len(ids_) for run in runs for ids_ in run) < need:
            return []
        return [i for run in runs for ids_ in run for i in ids_]

    def _runs(self, ask: Ask) -> list[list[list[int]]]:
        """The id lists that may fit ``ask``, grouped into runs walked in order;
        the lists of one run are merged (equal weight and left-over CPUs)."""
        if ask.exclusive:
            return [[self._untouched[w]] for w in self._weights]
        runs: list[list[list[int]]] = []
        last = None
        for key in self._keys:
            w, cpus, gpus = key
            if cpus < ask.cpus or gpus < ask.gpus:
                continue
            if (w, cpus) != last:
                runs.append([])
                last = (w, cpus)
            runs[-1].append(self._buckets[key])
        return runs


def _unexcluded(runs: list[list[list[int]]], excluded: set[int]) -> int:
    """How many ids of ``runs`` are not in ``excluded``: at least as many as a walk
    could take (it skips more: nodes already used, short of memory, not the job's).

    Why: with backfill a job asking about a later time is shown the nodes free then,
    most of them often reserved for higher jobs (``backfill.Allowed``); a walk would
    ask each of them in turn and take none. Counting them with set operations costs
    a fraction of that walk, and answers the same (None) when it is short. Only
    counted when enough are excluded that it could be short: a start now, with a
    few reserved among thousands, would walk a few nodes, not count them all."""
    n = 0
    for run in runs:
        for ids_ in run:
            n += len(ids_) - len(excluded.intersection(ids_))
    return n


class FreeNodes:
    """What a select sees of the free capacity: an index and the node ids one job may use,
    and where the nodes hang in the network (``topology``, ``leaf``: a node id's leaf
    switch, -1 for none; both None without a topology)."""

    def __init__(self, index: NodeIndex, only: frozenset[int] | None = None,
                 topology: Topology | None = None, leaf: Sequence[int] | None = None):
        self._index = index
        self._only = only
        self.topology = topology
        self.leaf = leaf

    @classmethod
    def of(cls, candidates: Sequence[NodeFree]) -> FreeNodes:
        """An index over a plain list of nodes (built for this one question)."""
        by_name = {n.name: n for n in reversed(candidates)}   # first of a repeated name wins
        nodes = sorted(by_name.values(), key=lambda n: _natural(n.name))
        ids = {n.name: i for i, n in enumerate(nodes)}
        return cls(NodeIndex(nodes, ids, range(len(nodes))))

    @property
    def size(self) -> int:
        """At least as many as the nodes a gang could use; a gang of more never fits."""
        return self._index.size

    def stage(self, ranks: Sequence[Ask], required: frozenset[str] = frozenset()
              ) -> tuple[Share, ...] | None:
        return self._index.stage(ranks, required, self._only)

    def stage_among(self, ranks: Sequence[Ask], required: frozenset[str],
                    ids: frozenset[int]) -> tuple[Share, ...] | None:
        """``stage`` among ``ids`` alone, which must be ids this job may use
        (``by_leaf``'s): the job's own limit is not asked again."""
        return self._index.stage(ranks, required, ids)

    def by_leaf(self, ask: Ask, need: int) -> dict[int, list[int]] | None:
        """``fitting``'s ids grouped by leaf switch (those under none left out), in one
        walk; None when fewer than ``need`` nodes have the CPUs and GPUs at all."""
        got = self._index.fitting(ask, need)
        if not got:
            return None
        only = self._only
        if only is not None:
            # backfill's Allowed (ids not reserved, of those the job may use): its sets
            # asked directly, 10,000 ids a gang
            excluded = getattr(only, "excluded", None)
            if excluded is None:
                got = [i for i in got if i in only]
            elif only.only is None:
                got = [i for i in got if i not in excluded]
            else:
                inner = only.only
                got = [i for i in got if i not in excluded and i in inner]
        leaf = self.leaf
        out: dict[int, list[int]] = {}
        for i in got:
            lf = leaf[i]
            if lf >= 0:
                ids = out.get(lf)
                if ids is None:
                    out[lf] = [i]
                else:
                    ids.append(i)
        return out

    def name_of(self, i: int) -> str:
        return self._index._node[i].name

    def ids_of(self, names: Iterable[str]) -> list[int]:
        """The ids of node names (those the pass has)."""
        ids = self._index._ids
        return [ids[n] for n in names if n in ids]


class FreeCapacity:
    """The pass's free resources: one ``NodeFree`` per node, changed only by
    ``commit``, and an index per partition built when a job first needs it."""

    def __init__(self, views: Sequence[NodeView], partitions: Sequence[PartitionView],
                 topology: Topology | None = None):
        by_name = {v.name: v for v in views}
        names = sorted(by_name, key=_natural)
        self.ids: dict[str, int] = {n: i for i, n in enumerate(names)}
        self.views: list[NodeView] = [by_name[n] for n in names]
        self.nodes: list[NodeFree] = [NodeFree.from_view(v) for v in self.views]
        self.blocked: set[str] = set()
        self._parts = {p.name: p for p in partitions}
        self._members: dict[str, tuple[int, ...]] = {}
        self._index: dict[str, NodeIndex] = {}
        self._idle_all: NodeIndex | None = None
        self._idle_nodes: list[NodeFree] = []
        self._member_set: dict[str, frozenset[int]] = {}
        self._indexes_of: dict[int, list[NodeIndex]] = {}
        self.topology = topology
        self._leaf: list[int] | None = None

    @property
    def leaf(self) -> list[int] | None:
        """Each node id's leaf switch (-1: under none); None without a topology.
        Built when a pass first places a multi-node gang."""
        if self.topology is None:
            return None
        if self._leaf is None:
            leaf_of = self.topology.leaf_of
            self._leaf = [leaf_of.get(v.name, -1) for v in self.views]
        return self._leaf

    def showing(self, nodes: list[NodeFree]) -> FreeCapacity:
        """The same nodes and partitions showing ``nodes`` (by id) instead, with indexes of
        their own and nothing blocked: a view of another time (``backfill.py``)."""
        other = object.__new__(FreeCapacity)
        other.ids, other.views, other.nodes, other.blocked = self.ids, self.views, nodes, set()
        other._parts, other._members, other._member_set = self._parts, self._members, {}
        other._index, other._idle_all, other._idle_nodes = {}, None, []
        other._indexes_of = {}
        other.topology, other._leaf = self.topology, self._leaf
        return other

    def members(self, part: str) -> tuple[int, ...]:
        """Ids of the partition's nodes that the snapshot has, in the partition's order."""
        got = self._members.get(part)
        if got is None:
            ids = self.ids
            got = tuple(dict.fromkeys(ids[n] for n in self._parts[part].nodes if n in ids))
            self._members[part] = got
        return got

    def free(self, part: str, only: frozenset[int] | None = None) -> FreeNodes:
        """The partition's schedulable nodes not kept for a blocked partition."""
        index = self._index.get(part)
        if index is None:
            nodes, blocked = self.nodes, self.blocked
            live = [i for i in self.members(part)
                    if nodes[i].schedulable and nodes[i].name not in blocked]
            index = NodeIndex(nodes, self.ids, live)
            self._index[part] = index
            for i in live:
                self._indexes_of.setdefault(i, []).append(index)
        if self.topology is None:
            return FreeNodes(index, only)
        return FreeNodes(index, only, self.topology, self.leaf)

    def idle(self, part: str, only: frozenset[int] | None = None) -> FreeNodes:
        """The partition's nodes as if nothing ran and all were up: "never" versus "not now".

        One index of every node serves all partitions (nothing changes it in a
        pass); a partition short of the whole cluster narrows it to its members."""
        if self._idle_all is None:
            self._idle_nodes = [NodeFree.idle(v) for v in self.views]
            self._idle_all = NodeIndex(self._idle_nodes, self.ids, range(len(self.views)))
        if only is None and len(self.members(part)) < len(self.views):
            only = self._member_set.get(part)
            if only is None:
                only = self._member_set[part] = frozenset(self.members(part))
        if self.topology is None:
            return FreeNodes(self._idle_all, only)
        return FreeNodes(self._idle_all, only, self.topology, self.leaf)

    def candidates(self, ids: Iterable[int], schedulable: bool = True) -> list[NodeFree]:
        """The nodes of ``ids`` not kept for a blocked partition (and schedulable), as a
        list: for a select or preemptor without the index."""
        nodes, blocked = self.nodes, self.blocked
        return [nodes[i] for i in ids
                if nodes[i].name not in blocked and (nodes[i].schedulable or not schedulable)]

    def idle_nodes(self, ids: Iterable[int]) -> list[NodeFree]:
        """The nodes of ``ids`` as if nothing ran and all were up, as a list."""
        views = self.views
        return [NodeFree.idle(views[i]) for i in ids]

    def commit(self, shares: Iterable[Share]) -> None:
        """Apply a placed gang's shares, all of them."""
        for share in shares:
            i = self.ids[share.node]
            indexes = self._indexes_of.get(i, ())
            for index in indexes:
                index.discard(i)
            self.nodes[i].take(share)
            for index in indexes:
                index.add(i)

    def give_back(self, name: str, cpus: int, mem_mb: int, gpus: int, exclusive: bool,
                  gpu_ids: tuple[int, ...] = (), shards: int = 0, mps: int = 0) -> None:
        """What a running job holds on node ``name`` comes free (start estimates let
        running jobs end one by one); never past the node's size."""
        i = self.ids.get(name)
        if i is None:
            return
        indexes = self._indexes_of.get(i, ())
        for index in indexes:
            index.discard(i)
        self.nodes[i].release(cpus, mem_mb, gpus, gpu_ids, exclusive, shards, mps)
        for index in indexes:
            index.add(i)

    def replace_node(self, i: int, state: NodeFree | None) -> None:
        """Node ``i`` out of the indexes (None), or back in them showing ``state``: how
        a view of another time (``backfill.py``) changes what one node shows."""
        indexes = self._indexes_of.get(i, ())
        for index in indexes:
            index.discard(i)
        if state is not None:
            self.nodes[i] = state
            for index in indexes:
                index.add(i)

    def block(self, part: PartitionView) -> None:
        """Keep every node of ``part`` for its blocked job: no later job of the pass gets one."""
        for name in part.nodes:
            if name in self.blocked:
                continue
            self.blocked.add(name)
            i = self.ids.get(name)
            if i is None:
                continue
            for index in self._indexes_of.pop(i, ()):
                index.discard(i, forget=True)

    def any_blocked(self, part: PartitionView) -> bool:
        return not self.blocked.isdisjoint(part.nodes)

