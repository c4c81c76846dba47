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

Shared GPUs are kept in the same books. A node configured with shards (or
MPS) has that many per GPU; an ask of N shards takes them from ONE GPU
(Slurm's default: one sharing GPU per job per node), preferring a GPU that
already carries shards and has room (so whole GPUs stay whole), else the
GPU ``choose_gpus`` would give a one-GPU ask. Taking shards from a GPU takes
it out of the free indices: no whole-GPU ask gets it until its last share is
given back. A GPU carries shards or MPS, never both. Example: 1 GPU with 4
shards; asks of shard:2, shard:2 get GPU 0 each, a third shard:2 gets None,
and so does an ask of 1 whole GPU until both shard jobs end.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from lingjund.sched import gpu_topology
from lingjund.sched.gpu_topology import GpuTopology
from lingjund.sched.snapshot import MPS, SHARD, NodeView

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
    shards: int = 0             # of one GPU (--gres=shard:N)
    mps: int = 0                # of one GPU (--gres=mps:P)


@dataclass(frozen=True)
class Share:
    """What one node gives one rank: the numbers a ``Start`` carries."""

    node: str
    cpus: int
    mem_mb: int
    gpus: int
    tasks: int
    exclusive: bool
    # which of the node's GPUs: len == gpus, or for a shards or MPS share the
    # one GPU it is on
    gpu_ids: tuple[int, ...] = ()
    shards: int = 0
    mps: int = 0


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
    # per GPU: how many shards / how much MPS it has (0: the node shares none)
    shards_per_gpu: int = 0
    mps_per_gpu: int = 0
    # GPUs carrying shares now: (index, SHARD or MPS, count in use), by index;
    # none of them is in free_gpu_ids.
    shared: tuple[tuple[int, str, int], ...] = ()

    @classmethod
    def from_view(cls, v: NodeView) -> NodeFree:
        if v.gpus:
            ids = free_gpu_ids(v.gpus, v.alloc_gpu_ids, v.gpus - v.alloc_gpus)
        else:
            ids = ()
        shared: tuple[tuple[int, str, int], ...] = ()
        if v.alloc_shared:
            shared = _sum_shared(v.alloc_shared)
            busy = {g for g, _, _ in shared}
            ids = tuple(i for i in ids if i not in busy)
        return cls(name=v.name, cpus=v.cpus, memory_mb=v.memory_mb, gpus=v.gpus,
                   free_cpus=v.cpus - v.alloc_cpus,
                   free_memory_mb=v.memory_mb - v.alloc_memory_mb,
                   free_gpus=len(ids),
                   jobs=v.running_jobs, exclusive=v.exclusive,
                   schedulable=v.schedulable, weight=v.weight, free_gpu_ids=ids,
                   topology=v.gpu_topology,
                   shards_per_gpu=v.shards // v.gpus if v.shards and v.gpus else 0,
                   mps_per_gpu=v.mps // v.gpus if v.mps and v.gpus else 0, shared=shared)

    @classmethod
    def idle(cls, v: NodeView) -> NodeFree:
        """The node as it would be with nothing running: to tell "not now" from "never"."""
        return cls(name=v.name, cpus=v.cpus, memory_mb=v.memory_mb, gpus=v.gpus,
                   free_cpus=v.cpus, free_memory_mb=v.memory_mb, free_gpus=v.gpus,
                   jobs=0, exclusive=False, schedulable=True, weight=v.weight,
                   free_gpu_ids=all_gpus(v.gpus), topology=v.gpu_topology,
                   shards_per_gpu=v.shards // v.gpus if v.shards and v.gpus else 0,
                   mps_per_gpu=v.mps // v.gpus if v.mps and v.gpus else 0)

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
        if cpus > self.free_cpus or mem > self.free_memory_mb:
            return None
        if ask.shards or ask.mps:
            gpu = self.shared_gpu(SHARD if ask.shards else MPS, ask.shards or ask.mps)
            if gpu is None:
                return None
            return Share(node=self.name, cpus=cpus, mem_mb=mem, gpus=0, tasks=ask.tasks,
                         exclusive=ask.exclusive, gpu_ids=(gpu,), shards=ask.shards,
                         mps=ask.mps)
        if gpus > self.free_gpus:
            return None
        return Share(node=self.name, cpus=cpus, mem_mb=mem, gpus=gpus,
                     tasks=ask.tasks, exclusive=ask.exclusive,
                     gpu_ids=choose_gpus(self.free_gpu_ids, gpus, self.topology) if gpus else ())

    def shared_gpu(self, kind: str, n: int) -> int | None:
        """The GPU ``n`` shards (or MPS) of one GPU come from here, or None.

        The fullest GPU already carrying this kind that still has room, so whole
        GPUs stay whole; else a free GPU as a one-GPU ask would get it."""
        per = self.shards_per_gpu if kind == SHARD else self.mps_per_gpu
        if n > per:
            return None
        best, best_used = None, -1
        for g, k, used in self.shared:
            if k == kind and used + n <= per and used > best_used:
                best, best_used = g, used
        if best is not None:
            return best
        if not self.free_gpu_ids:
            return None
        return choose_gpus(self.free_gpu_ids, 1, self.topology)[0]

    def take(self, share: Share) -> None:
        self.free_cpus -= share.cpus
        self.free_memory_mb -= share.mem_mb
        if share.gpu_ids:
            gone = set(share.gpu_ids)
            self.free_gpu_ids = tuple(i for i in self.free_gpu_ids if i not in gone)
            if share.shards or share.mps:
                self._share(share.gpu_ids[0], SHARD if share.shards else MPS,
                            share.shards or share.mps)
        self.free_gpus = len(self.free_gpu_ids)
        self.jobs += 1
        self.exclusive = self.exclusive or share.exclusive

    def _share(self, gpu: int, kind: str, n: int) -> None:
        """Add ``n`` (or take back ``-n``) of ``kind`` on ``gpu``; a GPU whose
        last share is given back is free again for any ask."""
        rest = [e for e in self.shared if e[0] != gpu]
        used = sum(c for g, _, c in self.shared if g == gpu) + n
        if used > 0:
            rest.append((gpu, kind, used))
        elif 0 <= gpu < self.gpus and gpu not in self.free_gpu_ids:
            self.free_gpu_ids = tuple(sorted(self.free_gpu_ids + (gpu,)))
            self.free_gpus = len(self.free_gpu_ids)
        self.shared = tuple(sorted(rest))

    def release(self, cpus: int, mem_mb: int, gpus: int, gpu_ids: tuple[int, ...],
                exclusive: bool, shards: int = 0, mps: int = 0) -> None:
        """What a running job holds here comes free (never past the node's size).

        ``gpu_ids``: the indices it held; () when not known, then any ``gpus``
        indices not free now come back, lowest first. With ``shards`` or
        ``mps``, ``gpu_ids`` names the GPU they were on."""
        self.free_cpus = min(self.cpus, self.free_cpus + cpus)
        self.free_memory_mb = min(self.memory_mb, self.free_memory_mb + mem_mb)
        if (shards or mps) and gpu_ids:
            self._share(gpu_ids[0], SHARD if shards else MPS, -(shards or mps))
        elif gpus or gpu_ids:
            have = set(self.free_gpu_ids)
            back = [i for i in gpu_ids if 0 <= i < self.gpus and i not in have]
            if len(back) < gpus:
                known = have.union(back).union(g for g, _, _ in self.shared)
                back += [i for i in range(self.gpus) if i not in known][:gpus - len(back)]
            self.free_gpu_ids = tuple(sorted(have.union(back)))
            self.free_gpus = len(self.free_gpu_ids)
        self.jobs = max(0, self.jobs - 1)
        if exclusive:
            self.exclusive = False


def _sum_shared(held: tuple[tuple[int, str, int], ...]) -> tuple[tuple[int, str, int], ...]:
    """Running jobs' shares (one entry each) as one entry per GPU, by index."""
    per: dict[int, tuple[str, int]] = {}
    for g, kind, n in held:
        k, c = per.get(g, (kind, 0))
        per[g] = (k, c + n)
    return tuple((g, k, c) for g, (k, c) in sorted(per.items()))


@dataclass(frozen=True)
class Placement:
    """A staged gang: one share per rank, in natural node order.

    Committing applies every share to the pass's free capacity
    (``capacity.FreeCapacity.commit``); dropping it is doing nothing, since
    staging changed nothing.
    """

    shares: tuple[Share, ...]
