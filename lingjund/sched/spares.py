"""Spare nodes: what a partition holds back for expedited restarts.

``[[partitions]] spare_nodes = N`` keeps N nodes out of every job's reach but
an expedited restart's (``--requeue=expedite``; sched/cycle.py). The spares
are the partition's last N nodes, in its order, of those that can take work
(not DOWN, not drained): a spare that fails or is drained is replaced by the
next one before it, and one an expedited restart runs on stays a spare, so
nothing else lands there once that job ends. Fewer healthy nodes than N:
all of them are spares.

    spares(("node1", "node2", "node3", "node4", "node5"), {"node1", "node2", "node3",
           "node4"}, 2)
    -> ("node3", "node4")        # node5 is drained: the two before it
"""
from __future__ import annotations

from typing import Container, Sequence


def spares(nodes: Sequence[str], fit: Container[str], count: int) -> tuple[str, ...]:
    """The last ``count`` of ``nodes`` in ``fit`` (able to take work), in partition order."""
    if count <= 0:
        return ()
    out: list[str] = []
    for name in reversed(nodes):
        if name in fit:
            out.append(name)
            if len(out) == count:
                break
    return tuple(reversed(out))
