"""Which of a node's free GPUs one rank gets, by the node's device layout.

A node that reports its GPUs' topology hands the core a ``GpuTopology``:
for each index, its NVLink peers (a bit mask), its NUMA node and its rail
(the RDMA NIC under the same PCIe switch, else the switch itself). For an
ask of ``n`` GPUs ``choose`` prefers, in this order:

1. a set that is fully NVLink-connected (every two of them linked);
2. the fewest NUMA nodes, then the fewest rails (GPUs beside one NIC);
3. more NVLink pairs inside the set (only where no connected set exists);
4. packing: taken from the smallest groups of free, NVLink-connected GPUs,
   so a large connected group stays whole for a larger job;
5. the lowest indices.

Example: 8 GPUs in NVLink islands 0-3 and 4-7 (NUMA 0 and 1), one NIC per
pair (0-1, 2-3, 4-5, 6-7). A job holds 4 and 5. An ask of 2 may take any
linked pair; (0, 1), (2, 3) and (6, 7) each sit beside one NIC, and (6, 7)
is the whole of its free island (2 GPUs) where (0, 1) would break up a free
island of 4: it gets (6, 7). The next ask of 4 then gets 0-3, all linked.
An ask of 5 on the idle node cannot be linked: it gets 0-3 and 4 (four of
them on one NUMA node, and the most NVLink pairs).

Pure and cached: a topology compares by identity, and ``GpuTopology.build``
hands out one object per distinct layout (the service layer builds a node's
once per reported inventory), so ``choose`` remembers its answers for
(free, n, topology) across all nodes of one model.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

# Connected sets looked at per choice at most: enough for every set of an 8-GPU
# node (70 of size 4); on a 16-GPU NVSwitch node the lowest ones are as good.
MAX_CANDIDATES = 512


@dataclass(frozen=True, eq=False)
class GpuTopology:
    """Per GPU index: ``nvlink`` peer bit mask, ``numa`` node and ``rail`` (-1 = not known)."""

    nvlink: tuple[int, ...]
    numa: tuple[int, ...]
    rail: tuple[int, ...]

    @classmethod
    def build(cls, count: int, peers: Sequence[Sequence[int]], numa: Sequence[int],
              rails: Sequence[str]) -> GpuTopology | None:
        """From per-index peers, NUMA nodes and rail names ("" = none); None
        when nothing is known (the core then takes the lowest free indices).
        NVLink is taken as symmetric: a link either end reports joins both."""
        masks = [0] * count
        for i, ps in enumerate(peers[:count]):
            for j in ps:
                if 0 <= j < count and j != i:
                    masks[i] |= 1 << j
                    masks[j] |= 1 << i
        numa_t = tuple(int(numa[i]) if i < len(numa) else -1 for i in range(count))
        names = sorted({r for r in rails[:count] if r})
        rail_t = tuple(names.index(rails[i]) if i < len(rails) and rails[i] else -1
                       for i in range(count))
        if not any(masks) and all(x < 0 for x in numa_t) and all(x < 0 for x in rail_t):
            return None
        key = (tuple(masks), numa_t, rail_t)
        got = _INTERNED.get(key)
        if got is None:
            if len(_INTERNED) >= MAX_INTERNED:
                _INTERNED.clear()
            got = _INTERNED[key] = cls(nvlink=key[0], numa=numa_t, rail=rail_t)
        return got


# One object per distinct layout: a cluster's thousands of nodes of one
# model share it, and with it ``choose``'s remembered answers.
_INTERNED: dict[tuple, GpuTopology] = {}
MAX_INTERNED = 4096


def choose(free: tuple[int, ...], n: int, topo: GpuTopology | None) -> tuple[int, ...]:
    """``n`` of ``free`` (ascending indices), by the order in the module
    docstring; the lowest ``n`` without a topology. Never an index outside
    ``free``; ascending."""
    if topo is None or n <= 0 or n >= len(free):
        return free[:n]
    return _choose(free, n, topo)


@lru_cache(maxsize=16384)
def _choose(free: tuple[int, ...], n: int, topo: GpuTopology) -> tuple[int, ...]:
    size = len(topo.nvlink)
    ids = [i for i in free if i < size]
    if len(ids) < n:            # indices beyond what the topology knows: no preference
        return free[:n]
    adj = {i: topo.nvlink[i] for i in ids}
    free_mask = 0
    for i in ids:
        free_mask |= 1 << i
    group = _groups(ids, adj, free_mask)
    cliques = _cliques(ids, adj, n)
    if cliques:
        return min(cliques, key=lambda s: _score(s, topo, group, 0))
    return min(_grown(ids, adj, n, topo), key=lambda s: _score(s, topo, group, _pairs(s, adj)))


def _score(s: tuple[int, ...], topo: GpuTopology, group: dict[int, tuple[int, int]],
           pairs: int) -> tuple:
    numa = len({topo.numa[i] for i in s})
    rails = len({topo.rail[i] for i in s})
    touched = {group[i] for i in s}
    return (numa, rails, -pairs, sum(g[1] for g in touched), s)


def _groups(ids: list[int], adj: dict[int, int], free_mask: int) -> dict[int, tuple[int, int]]:
    """Each free GPU's NVLink-connected group among the free ones: (its lowest index, its size)."""
    out: dict[int, tuple[int, int]] = {}
    for i in ids:
        if i in out:
            continue
        seen, todo = 1 << i, [i]
        while todo:
            k = todo.pop()
            new = adj[k] & free_mask & ~seen
            seen |= new
            while new:
                low = new & -new
                todo.append(low.bit_length() - 1)
                new ^= low
        members = [j for j in ids if seen >> j & 1]
        for j in members:
            out[j] = (i, len(members))
    return out


def _cliques(ids: list[int], adj: dict[int, int], n: int) -> list[tuple[int, ...]]:
    """Fully NVLink-connected ``n``-sets of ``ids``, lowest first, at most MAX_CANDIDATES."""
    out: list[tuple[int, ...]] = []

    def extend(chosen: list[int], start: int, common: int) -> None:
        if len(out) >= MAX_CANDIDATES:
            return
        if len(chosen) == n:
            out.append(tuple(chosen))
            return
        need = n - len(chosen)
        for k in range(start, len(ids) - need + 1):
            j = ids[k]
            if common >> j & 1:
                chosen.append(j)
                extend(chosen, k + 1, common & adj[j])
                chosen.pop()

    everything = 0
    for i in ids:
        everything |= 1 << i
    extend([], 0, everything)
    return out


def _grown(ids: list[int], adj: dict[int, int], n: int, topo: GpuTopology) -> list[tuple[int, ...]]:
    """No connected set: from each free GPU, grow a set one GPU at a time by
    the most links into it, then its NUMA node and rail, then the lowest index."""
    out = []
    for seed in ids:
        chosen, mask = [seed], 1 << seed
        while len(chosen) < n:
            best = min((j for j in ids if not mask >> j & 1),
                       key=lambda j: (-(adj[j] & mask).bit_count(),
                                      topo.numa[j] != topo.numa[seed],
                                      topo.rail[j] != topo.rail[seed], j))
            chosen.append(best)
            mask |= 1 << best
        out.append(tuple(sorted(chosen)))
    return out


def _pairs(s: tuple[int, ...], adj: dict[int, int]) -> int:
    mask = 0
    for i in s:
        mask |= 1 << i
    return sum((adj[i] & mask).bit_count() for i in s) // 2
