"""The plain placement the indexed one must agree with (kept here, not in the product).

Every rank scans every candidate and stages on copies of them all: the
algorithm ``plugins/gang.py`` documents, written the obvious way. It is a
``GangSelect`` with only ``place_gang``, so a pass given it walks the
cycle's list path (no index, no shared failures); ``REFERENCE_PROFILE`` is
the default profile with it, ``REFERENCE_PREEMPT_PROFILE`` the preempting
one.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from lingjun.slurm import natural_key
from lingjund.sched.plugins import DEFAULT_PROFILE, PARTITION_PRIO_PROFILE
from lingjund.sched.plugins.gang import asks, node_counts
from lingjund.sched.pool import Ask, NodeFree, Placement, Share
from lingjund.sched.snapshot import JobRequest


def stage(ranks: Sequence[Ask], candidates: Sequence[NodeFree],
          required: frozenset[str] = frozenset()) -> Placement | None:
    scratch = [c.copy() for c in candidates]
    used: set[str] = set()
    shares: list[Share] = []
    for ask in sorted(ranks, key=lambda a: -a.cpus):
        best = None
        for node in scratch:
            if node.name in used:
                continue
            share = node.share(ask)
            if share is None:
                continue
            key = (node.name not in required, node.weight, node.free_cpus - share.cpus,
                   natural_key(node.name))
            if best is None or key < best[0]:
                best = (key, node, share)
        if best is None:
            return None
        _, node, share = best
        node.take(share)
        used.add(node.name)
        shares.append(share)
    if not required <= used:
        return None
    shares.sort(key=lambda s: natural_key(s.node))
    return Placement(shares=tuple(shares))


class ReferenceGang:
    name = "select/reference"

    def place_gang(self, job: JobRequest, candidates: Sequence[NodeFree],
                   most_nodes: int) -> Placement | None:
        required = frozenset(job.req_nodes)
        counts = node_counts(job, most_nodes)
        for count in counts:
            if count > len(candidates):
                if counts.step > 0:
                    break
                continue
            placement = stage(asks(job, count), candidates, required)
            if placement is not None:
                return placement
        return None


REFERENCE_PROFILE = replace(DEFAULT_PROFILE, select=ReferenceGang())
REFERENCE_PREEMPT_PROFILE = replace(PARTITION_PRIO_PROFILE, select=ReferenceGang())
