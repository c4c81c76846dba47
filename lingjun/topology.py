"""The network's shape as the scheduler sees it: switches over leaves over nodes.

Slurm's topology/tree (topology.conf ``SwitchName=s0 Nodes=node[1-32]``,
``SwitchName=s2 Switches=s[0-1]``) and topology/block (``BlockName=b1
Nodes=...``, ``BlockSizes=``). A ``Topology`` is built once per
configuration (``Topology.tree`` / ``Topology.block``) and handed to every
pass in the snapshot; a pass only reads it.

Levels: a leaf switch (one with nodes) is level 0; a switch over switches
is one above the highest of them (Slurm's switch levels). For a block
topology each block is a leaf, and each further block size groups that many
nodes' worth of consecutive blocks into a level-1, level-2 ... "switch"
(block_sizes 32,64 over blocks of 32: pairs of blocks).

What placement asks of it (``plugins/gang.py``):

- ``leaf_of``: a node's leaf (index into ``leaves``), -1 for a node under
  no switch;
- ``order``: every switch, lowest level first, then name: the first that
  can hold a gang is the lowest-level switch that can (Slurm's "top switch");
- ``below[s]``: the leaves under switch ``s``.

Example. node[1-4], s0 over node[1-2], s1 over node[3-4], s2 over s[0-1]:

    leaves      s0 s1              leaf_of    node1,node2 -> 0; node3,node4 -> 1
    order       s0 s1 s2           below      s0: (0,)  s1: (1,)  s2: (0, 1)
    address     node3 -> "s2.s1.node3", pattern "switch.switch.node"

A 2-node gang with node1 and node3 free finds no leaf with two free nodes
and takes s2 (two leaves); with node1 and node2 free it takes s0 (one).

It lives on the ground floor (``lingjun/``), beside the configuration that
builds it (``config.py`` checks ``[topology]`` into one at load): every
program reads the configuration, the commands and the agent included, so
the model cannot live in the controller's core, which places gangs over it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

TREE = "topology/tree"
BLOCK = "topology/block"
DEFAULT = "topology/default"
PLUGINS = (TREE, BLOCK, DEFAULT)


class TopologyError(ValueError):
    """A topology that cannot be: Slurm's words for the fault in topology.conf."""


@dataclass(frozen=True)
class Switch:
    """One switch (or block, or block group) as ``scontrol show topology`` shows it."""

    name: str
    level: int
    nodes: tuple[str, ...]            # every node below it, in configuration order
    children: tuple[str, ...] = ()    # switches directly below it ("" for a leaf)
    link_speed: int = 1


@dataclass(frozen=True, eq=False)
class Topology:
    """Switches and where each node hangs; compared by identity (one per configuration)."""

    plugin: str
    switches: tuple[Switch, ...]
    leaves: tuple[str, ...]
    leaf_of: dict[str, int]
    below: tuple[tuple[int, ...], ...]          # per switch (same order as ``switches``)
    order: tuple[int, ...]                      # switch indices, lowest level first, then name
    parent: dict[str, str] = field(default_factory=dict)
    block_nodes: int = 0                        # topology/block: nodes per base block

    @staticmethod
    def tree(switches: list[tuple[str, tuple[str, ...], tuple[str, ...], int]],
             known_nodes: set[str] | None = None) -> Topology:
        """From (name, nodes, child switches, link speed) entries, as topology.conf
        lists them; ``known_nodes``: the cluster's nodes (None: any name)."""
        names: dict[str, int] = {}
        for i, (name, nodes, children, _) in enumerate(switches):
            if name in names:
                raise TopologyError(f"Switch ({name}) has already been defined")
            names[name] = i
            if not nodes and not children:
                raise TopologyError(f"Switch configuration ({name}) lacks children")
            if nodes and children:
                raise TopologyError(f"Switch configuration ({name}) has both nodes and "
                                    "child switches")
        parent: dict[str, str] = {}
        node_parent: dict[str, str] = {}
        for name, nodes, children, _ in switches:
            for c in children:
                if c not in names:
                    raise TopologyError(f"Switch configuration ({name}) names an undefined "
                                        f"child switch ({c})")
                if c in parent:
                    raise TopologyError(f"Switch ({c}) has multiple parents ({parent[c]}, {name})")
                parent[c] = name
            for n in nodes:
                if known_nodes is not None and n not in known_nodes:
                    raise TopologyError(f"Invalid node name ({n}) in switch config ({name})")
                if n in node_parent:
                    raise TopologyError(f"Node ({n}) is in more than one leaf switch "
                                        f"({node_parent[n]}, {name})")
                node_parent[n] = name
        # Levels, finding loops on the way: a switch's level is one above its highest child.
        level: dict[str, int] = {}
        for start, _, _, _ in switches:
            path: list[str] = []
            stack = [(start, False)]
            while stack:
                name, done = stack.pop()
                if done:
                    path.pop()
                    kids = switches[names[name]][2]
                    level[name] = 1 + max(level[c] for c in kids) if kids else 0
                    continue
                if name in level:
                    continue
                if name in path:
                    raise TopologyError("Switch configuration has a loop: "
                                        + " -> ".join(path[path.index(name):] + [name]))
                path.append(name)
                stack.append((name, True))
                stack.extend((c, False) for c in switches[names[name]][2])
        leaves = tuple(name for name, nodes, _, _ in switches if nodes)
        leaf_index = {name: i for i, name in enumerate(leaves)}
        leaf_of = {n: leaf_index[s] for n, s in node_parent.items()}
        below_names: dict[str, tuple[str, ...]] = {}

        def leaves_under(name: str) -> tuple[str, ...]:
            got = below_names.get(name)
            if got is None:
                _, nodes, kids, _ = switches[names[name]]
                got = (name,) if nodes else tuple(x for c in kids for x in leaves_under(c))
                below_names[name] = got
            return got

        for name in sorted(names, key=lambda n: level[n]):
            leaves_under(name)
        built = []
        for name, nodes, kids, speed in switches:
            under = leaves_under(name)
            all_nodes = tuple(n for leaf in under for n in switches[names[leaf]][1])
            built.append(Switch(name=name, level=level[name], nodes=all_nodes,
                                children=kids, link_speed=speed))
        below = tuple(tuple(sorted(leaf_index[x] for x in leaves_under(s.name))) for s in built)
        order = tuple(sorted(range(len(built)), key=lambda i: (built[i].level, i)))
        return Topology(plugin=TREE, switches=tuple(built), leaves=leaves, leaf_of=leaf_of,
                        below=below, order=order, parent=parent)

    @staticmethod
    def block(blocks: list[tuple[str, tuple[str, ...]]], block_sizes: tuple[int, ...] = (),
              known_nodes: set[str] | None = None) -> Topology:
        """From (name, nodes) blocks; ``block_sizes`` as Slurm's BlockSizes (the
        first the base block's node count, each further one a group of blocks)."""
        if not blocks:
            raise TopologyError("blocks contain no nodes")
        seen: dict[str, str] = {}
        names: set[str] = set()
        for name, nodes in blocks:
            if name in names:
                raise TopologyError(f"Block ({name}) has already been defined")
            names.add(name)
            if not nodes:
                raise TopologyError(f"Block configuration ({name}) lacks children")
            for n in nodes:
                if known_nodes is not None and n not in known_nodes:
                    raise TopologyError(f"Invalid node name ({n}) in block config ({name})")
                if n in seen:
                    raise TopologyError(f"Node ({n}) is in more than one block "
                                        f"({seen[n]}, {name})")
                seen[n] = name
        base = block_sizes[0] if block_sizes else max(len(nodes) for _, nodes in blocks)
        for name, nodes in blocks:
            if len(nodes) > base:
                raise TopologyError(f"Block configuration ({name}) has {len(nodes)} nodes, "
                                    f"more than the block size {base}")
        for prev, size in zip(block_sizes, block_sizes[1:]):
            if size <= prev or size % prev:
                raise TopologyError(f"BlockSizes: {size} is not a larger multiple of {prev}")
        switches: list[tuple[str, tuple[str, ...], tuple[str, ...], int]] = [
            (name, nodes, (), 1) for name, nodes in blocks]
        units = [name for name, _ in blocks]        # the level below, in order
        for prev, size in zip(block_sizes, block_sizes[1:]):
            per = size // prev
            if len(units) <= 1:
                break
            upper = []
            for k in range(0, len(units), per):
                members = units[k:k + per]
                if len(members) == 1:
                    upper.append(members[0])        # a lone unit stays as it is
                    continue
                gname = f"{members[0]}-{members[-1]}"
                switches.append((gname, (), tuple(members), 1))
                upper.append(gname)
            units = upper
        topo = Topology.tree(switches, known_nodes)
        return Topology(plugin=BLOCK, switches=topo.switches, leaves=topo.leaves,
                        leaf_of=topo.leaf_of, below=topo.below, order=topo.order,
                        parent=topo.parent, block_nodes=base)

    def address(self, node: str) -> tuple[str, str]:
        """SLURM_TOPOLOGY_ADDR and SLURM_TOPOLOGY_ADDR_PATTERN of ``node``:
        its switches from the top down, then itself ("s2.s0.node1",
        "switch.switch.node"); a node under no switch is just "node1", "node"."""
        leaf = self.leaf_of.get(node)
        if leaf is None:
            return node, "node"
        path = [self.leaves[leaf]]
        while path[-1] in self.parent:
            path.append(self.parent[path[-1]])
        path.reverse()
        return ".".join(path + [node]), ".".join(["switch"] * len(path) + ["node"])

    def leaves_spanned(self, nodes) -> int:
        """How many leaves ``nodes`` touch (a node under none counts as one of its own)."""
        got = set()
        for n in nodes:
            got.add(self.leaf_of.get(n, n))
        return len(got)
