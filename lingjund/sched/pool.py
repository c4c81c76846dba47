"""Free resources per node during one scheduling pass.

The pass starts from the snapshot's ``NodeView``s and keeps one mutable
``NodeFree`` per node, so that a job placed early in the pass uses up what a
later job would see. Nothing outside the pass ever sees these objects: the
snapshot stays frozen, the pass hands back a ``Plan``.

A rank of a job asks for an ``Ask``; a node answers with the ``Share`` it
would give (or ``None``). Gang placement stages one share per rank without
changing any node, then the pass commits every share or drops them all
(``capacity.py``, ``plugins/gang.py``).

Example: node1 with 8 CPUs, 16,000 MB and 2 GPUs, a job holding 2 CPUs
there. An ask of 4 CPUs, 1,000 MB and 1 GPU gets that share (2 CPUs and 1
GPU left after taking it); an exclusive ask gets None (the node is not
untouched); on an idle node1 an exclusive ask of 1 CPU gets all 8 CPUs
and 2 GPUs but only the memory it asked.

GPUs are devices, not just a count: a node keeps which of its indices
(0 .. gpus-1) are free, and a share names the ones it takes, so no index is
ever given to two jobs on one node. Which free ones a rank gets is
``choose_gpus``'s to say: by the node's ``GpuTopology`` where it reports one
(NVLink-connected first, then NUMA node and NIC rail, packed:
``gpu_topology.py``), else the lowest. On a 4-GPU node without topology where
a job holds GPUs 0 and 1, an ask of 2 GPUs gets (2, 3); once that first job
ends, the next ask of 1 gets (0,).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from lingjund.sched import gpu_topology
from lingjund.sched.gpu_topology import GpuTopology
from lingjund.sched.snapshot import NodeView

# Ask.mem_mb value meaning "all of the node's memory" (--mem=0).
ALL_MEMORY = -1


@dataclass(frozen=True)
class Ask:
    """What one rank (one node's part) of a job asks of its node."""

    tasks: int
    cpus: int
    mem_mb: int                 # MB, or ALL_MEMORY
    gpus: int
    exclusive: bool


@dataclass(frozen=True)
class Share:
    """What one node gives one rank: the numbers a ``Start`` carries."""

    node: str
    cpus: int
    mem_mb: int
    gpus: int
    tasks: int
    exclusive: bool
    gpu_ids: tuple[int, ...] = ()     # which of the node's GPUs (len == gpus)


@lru_cache(maxsize=256)
def all_gpus(n: int) -> tuple[int, ...]:
    """Every GPU index of an ``n``-GPU node (one tuple per size, shared by all nodes)."""
    return tuple(range(n))


def free_gpu_ids(total: int, held: tuple[int, ...], free: int) -> tuple[int, ...]:
    """A node's free GPU indices: those of ``total`` that no job holds, at most ``free``.

    A job whose indices are not known (it started before they were kept) holds
    a count only; it took the lowest ones then (CUDA_VISIBLE_DEVICES=0..n-1),
    so the highest unheld are the ones counted free."""
    if free >= total and not held:
        return all_gpus(total)
    if free <= 0:
        return ()
    taken = set(held)
    ids = [i for i in range(total) if i not in taken]
    return tuple(ids[len(ids) - free:]) if len(ids) > free else tuple(ids)


def choose_gpus(free: tuple[int, ...], n: int,
                topology: GpuTopology | None = None) -> tuple[int, ...]:
    """Which ``n`` of a node's ``free`` GPU indices (ascending) one rank gets:
    packed by the node's ``topology`` (``gpu_topology.choose``), the lowest
    without one."""
    if topology is None:
        return free[:n]
    return gpu_topology.choose(free, n, topology)


@dataclass
class NodeFree:
    """One node's capacity and what is still free on it in this pass."""

    name: str
    cpus: int
    memory_mb: int
    gpus: int
    free_cpus: int
    free_memory_mb: int
    free_gpus: int
    jobs: int                   # jobs holding an allocation here
    exclusive: bool             # some job holds the node exclusively
    schedulable: bool
    weight: int
    free_gpu_ids: tuple[int, ...] = ()   # ascending; len == free_gpus
    topology: GpuTopology | None = None  # the node's GPU layout (shared, never changed)

    @classmethod
    def from_view(cls, v: NodeView) -> NodeFree:
        if v.gpus:
            ids = free_gpu_ids(v.gpus, v.alloc_gpu_ids, v.gpus - v.alloc_gpus)
        else:
            ids = ()
        return cls(name=v.name, cpus=v.cpus, memory_mb=v.memory_mb, gpus=v.gpus,
                   free_cpus=v.cpus - v.alloc_cpus,
                   free_memory_mb=v.memory_mb - v.alloc_memory_mb,
                   free_gpus=len(ids),
                   jobs=v.running_jobs, exclusive=v.exclusive,
                   schedulable=v.schedulable, weight=v.weight, free_gpu_ids=ids,
                   topology=v.gpu_topology)

    @classmethod
    def idle(cls, v: NodeView) -> NodeFree:
        """The node as it would be with nothing running: to tell "not now" from "never"."""
        return cls(name=v.name, cpus=v.cpus, memory_mb=v.memory_mb, gpus=v.gpus,
                   free_cpus=v.cpus, free_memory_mb=v.memory_mb, free_gpus=v.gpus,
                   jobs=0, exclusive=False, schedulable=True, weight=v.weight,
                   free_gpu_ids=all_gpus(v.gpus), topology=v.gpu_topology)

    def copy(self) -> NodeFree:
        return replace(self)

    @property
    def untouched(self) -> bool:
        return (self.jobs == 0 and self.free_cpus == self.cpus
                and self.free_memory_mb == self.memory_mb and self.free_gpus == self.gpus)

    def share(self, ask: Ask) -> Share | None:
        """The share this node would give ``ask`` now, or None if it does not fit.

        An exclusive ask needs an untouched node and takes all its CPUs and
        GPUs (memory stays as asked, as in Slurm: --exclusive without --mem
        reserves none). Nothing fits beside an exclusive holder.
        """
        if self.exclusive:
            return None
        cpus, gpus = ask.cpus, ask.gpus
        if ask.exclusive:
            if not self.untouched or ask.cpus > self.cpus or ask.gpus > self.gpus:
                return None
            cpus, gpus = self.cpus, self.gpus
        mem = self.memory_mb if ask.mem_mb == ALL_MEMORY else ask.mem_mb
        if cpus > self.free_cpus or mem > self.free_memory_mb or gpus > self.free_gpus:
            return None
        return Share(node=self.name, cpus=cpus, mem_mb=mem, gpus=gpus,
                     tasks=ask.tasks, exclusive=ask.exclusive,
                     gpu_ids=choose_gpus(self.free_gpu_ids, gpus, self.topology) if gpus else ())

    def take(self, share: Share) -> None:
        self.free_cpus -= share.cpus
        self.free_memory_mb -= share.mem_mb
        if share.gpu_ids:
            gone = set(share.gpu_ids)
            self.free_gpu_ids = tuple(i for i in self.free_gpu_ids if i not in gone)
        self.free_gpus = len(self.free_gpu_ids)
        self.jobs += 1
        self.exclusive = self.exclusive or share.exclusive

    def release(self, cpus: int, mem_mb: int, gpus: int, gpu_ids: tuple[int, ...],
                exclusive: bool) -> None:
        """What a running job holds here comes free (never past the node's size).

        ``gpu_ids``: the indices it held; () when not known, then any ``gpus``
        indices not free now come back, lowest first."""
        self.free_cpus = min(self.cpus, self.free_cpus + cpus)
        self.free_memory_mb = min(self.memory_mb, self.free_memory_mb + mem_mb)
        if gpus or gpu_ids:
            have = set(self.free_gpu_ids)
            back = [i for i in gpu_ids if 0 <= i < self.gpus and i not in have]
            if len(back) < gpus:
                known = have.union(back)
                back += [i for i in range(self.gpus) if i not in known][:gpus - len(back)]
            self.free_gpu_ids = tuple(sorted(have.union(back)))
            self.free_gpus = len(self.free_gpu_ids)
        self.jobs = max(0, self.jobs - 1)
        if exclusive:
            self.exclusive = False


@dataclass(frozen=True)
class Placement:
    """A staged gang: one share per rank, in natural node order.

    Committing applies every share to the pass's free capacity
    (``capacity.FreeCapacity.commit``); dropping it is doing nothing, since
    staging changed nothing.
    """

    shares: tuple[Share, ...]
