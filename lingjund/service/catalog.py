"""The nodes as configured and as their agents registered them, summarised once
per change rather than once per request.

A submission is checked against what the partition's nodes can give
(``jobs._validate``), and ``squeue`` estimates a pending job's node count from
the partition's biggest node. Both used to look at every node of the
partition, one store read each, on every call: at 10,000 nodes most of half a
second per submission. The catalog holds each node's capacity, features and
GPU type, and per partition its nodes' capacities counted by shape, so those
questions cost what the number of distinct node shapes costs, not the number
of nodes.

It depends on the configuration and on what agents reported at registration
(an inventory, or a node that is not configured); the controller builds it on
first use and drops it when either changes (``Controller.nodes_changed``,
called by ``nodes.register``; another ``Config`` object; another number of
node records).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from lingjun.config import Config
from lingjund.service.resources import node_capacity, node_features, node_gpu_type

if TYPE_CHECKING:
    from lingjund.service.context import Controller

Shape = tuple[int, int, int]        # (cpus, memory_mb, gpus) of one node


@dataclass(frozen=True)
class Shapes:
    """A set of nodes by capacity: how many nodes, and how many of each shape.

    ``counts`` lists each distinct shape once with its node count, most CPUs
    first; nodes whose capacity is not known yet count in ``nodes`` only.
    """
    nodes: int
    counts: tuple[tuple[Shape, int], ...]

    @classmethod
    def of(cls, caps: Iterable[Shape | None]) -> "Shapes":
        n, by_shape = 0, {}
        for c in caps:
            n += 1
            if c:
                by_shape[c] = by_shape.get(c, 0) + 1
        return cls(n, tuple(sorted(by_shape.items(), key=lambda kv: (-kv[0][0], kv[0]))))

    @property
    def with_capacity(self) -> int:
        return sum(k for _, k in self.counts)

    @property
    def total_cpus(self) -> int:
        return sum(s[0] * k for s, k in self.counts)

    @property
    def biggest_cpus(self) -> int:
        return self.counts[0][0][0] if self.counts else 0

    def top_cpus(self, nodes: int) -> int:
        """CPUs of the ``nodes`` biggest nodes together."""
        total, left = 0, nodes
        for s, k in self.counts:
            if left <= 0:
                break
            take = min(k, left)
            total += s[0] * take
            left -= take
        return total

    def where(self, keep) -> "Shapes":
        """The nodes whose shape passes ``keep(shape)`` (unknown capacities drop out)."""
        counts = tuple((s, k) for s, k in self.counts if keep(s))
        return Shapes(sum(k for _, k in counts), counts)


@dataclass(frozen=True, eq=False)
class Catalog:
    config: Config                                  # the configuration it was built from
    registered: int                                 # how many node records it was built with
    capacity: Mapping[str, Shape | None]            # every known node
    features: Mapping[str, tuple[str, ...]]
    gpu_type: Mapping[str, str]
    all_features: frozenset[str]
    gpu_types: frozenset[str]
    partition_shapes: Mapping[str, Shapes]

    def shapes(self, names: Iterable[str]) -> Shapes:
        return Shapes.of(self.capacity.get(n) for n in names)


def build(ctl: Controller) -> Catalog:
    layout = ctl.node_layout()
    records = ctl.store.nodes()
    cap, feats, types = {}, {}, {}
    for name in layout.names:
        rec = records.get(name)
        cap[name] = node_capacity(ctl, name, rec)
        feats[name] = node_features(ctl, name)
        types[name] = node_gpu_type(ctl, name, rec)
    shapes = {part: Shapes.of(cap.get(n) for n in members)
              for part, members in layout.nodes_of.items()}
    return Catalog(config=ctl.config, registered=len(records), capacity=cap, features=feats,
                   gpu_type=types, all_features=frozenset(f for fs in feats.values() for f in fs),
                   gpu_types=frozenset(types.values()), partition_shapes=shapes)
