"""The nodes as configured and as their agents registered them, summarised once
per change rather than once per request.

A submission is checked against what the partition's nodes can give
(``jobs._validate``), and ``squeue`` estimates a pending job's node count from
the partition's biggest node. Both used to look at every node of the
partition, one store read each, on every call: at 10,000 nodes most of half a
second per submission. The catalog holds the names in natural order, each
node's capacity, features and GPU type, and per partition its nodes and their
capacities counted by shape, so those questions cost what the number of
distinct node shapes costs, not the number of nodes.

It depends on the configuration and on what agents reported at registration
(an inventory, or a node that is not configured); the controller builds it on
first use and drops it when either changes (``Controller.nodes_changed``,
called by ``nodes.register``, or another ``Config`` object).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from lingjun import slurm
from lingjun.config import Config, NodeConfig

Shape = tuple[int, int, int]        # (cpus, memory_mb, gpus) of one node


def capacity(cfg: NodeConfig | None, inventory) -> Shape | None:
    """(cpus, memory_mb, gpus): configured values, else what the agent reported
    (``inventory``, an agent_pb2.Inventory or None); None while no CPU count is known."""
    cpus = (cfg.cpus if cfg and cfg.cpus else 0) or (inventory.cpus if inventory else 0)
    mem = (cfg.memory_mb if cfg and cfg.memory_mb else 0) or (inventory.real_memory_mb if inventory else 0)
    gpus = (cfg.gpus if cfg else 0) or (inventory.gpus if inventory else 0)
    if not cpus:
        return None
    return cpus, mem, gpus


def gpu_type(cfg: NodeConfig | None, inventory) -> str:
    """Configured GPU type, else the agent's ("" = untyped)."""
    if cfg and cfg.gpu_type:
        return cfg.gpu_type
    return inventory.gpu_type if inventory else ""


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
    names: tuple[str, ...]                          # configured + registered, natural order
    capacity: Mapping[str, Shape | None]
    features: Mapping[str, tuple[str, ...]]
    gpu_type: Mapping[str, str]
    all_features: frozenset[str]
    gpu_types: frozenset[str]
    partition_nodes: Mapping[str, tuple[str, ...]]
    partition_shapes: Mapping[str, Shapes]

    def shapes(self, names: Iterable[str]) -> Shapes:
        return Shapes.of(self.capacity.get(n) for n in names)


def build(config: Config, registered: Mapping) -> Catalog:
    """``registered``: the store's node records by name (``Store.nodes()``)."""
    names = {n.name for n in config.nodes}
    names.update(registered)
    ordered = tuple(sorted(names, key=slurm.natural_key))
    cap, feats, types = {}, {}, {}
    for name in ordered:
        cfg = config.node(name)
        rec = registered.get(name)
        inv = rec.inventory if rec else None
        cap[name] = capacity(cfg, inv)
        feats[name] = cfg.features if cfg else ()
        types[name] = gpu_type(cfg, inv)
    part_nodes, part_shapes = {}, {}
    for p in config.effective_partitions():
        members = ordered if p.nodes is None else tuple(p.nodes)
        if p.name not in part_nodes:        # the first of a name counts, as Controller.partition
            part_nodes[p.name] = members
            part_shapes[p.name] = Shapes.of(cap.get(n) for n in members)
    return Catalog(config=config, names=ordered, capacity=cap, features=feats, gpu_type=types,
                   all_features=frozenset(f for fs in feats.values() for f in fs),
                   gpu_types=frozenset(types.values()), partition_nodes=part_nodes,
                   partition_shapes=part_shapes)
