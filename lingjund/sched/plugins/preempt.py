"""Which running jobs to preempt for a pending job: preempt/partition_prio and preempt/qos.

Both plugins answer the same question with the same search (``search``);
they differ only in which running jobs may be victims at all:

- preempt/partition_prio (Slurm's PreemptType=preempt/partition_prio): a
  pending job of a partition with a higher PriorityTier may preempt running
  jobs of partitions with a lower tier whose PreemptMode is not OFF.
- preempt/qos (PreemptType=preempt/qos): a pending job whose QOS lists
  another QOS in its ``Preempt=`` (sacctmgr) may preempt running jobs of that
  QOS, whatever their partitions' tiers. A victim's PreemptMode is its QOS's
  (sacctmgr ``PreemptMode=``), else its partition's, else the cluster's; OFF
  is never preempted. Example: QOS ``high`` with Preempt=low; a ``high`` job
  that does not fit preempts running ``low`` jobs, never ``normal`` ones, and
  a ``low`` job preempts nothing.

Lending (``lending.py``) uses the same search for borrowed jobs.

Called by the pass (``cycle.schedule``) for a job that does not fit now; the
answer is the victims, whole jobs, whose resources give the job a placement,
or why there are none.

Example (partition_prio). node[1-4], 2 CPUs each. Partition ``low`` (tier 1,
REQUEUE) and ``high`` (tier 2), both on every node. Running in ``low``:

    job  prio  nodes         start
    10   100   node[1-2]     t=0
    11    50   node3         t=0
    12    60   node4         t=0

Job 20 in ``high`` asks for 2 nodes x 2 CPUs. Fewest first: no single job
frees two nodes except job 10, so the answer is (10,) even though 11 and
12 have lower priority; for a 1-node ask it would be (11,), the lowest
priority among the one-job answers.

Rules of the search, in order:

1. Candidates: running jobs not already stopping that the plugin allows
   (above), running at least PreemptExemptTime, holding something on a node
   the job may use.
2. If the job fits once the jobs already stopping have let go (an earlier
   preemption, a cancel, a time limit), it waits for them: ``WAIT`` (no
   victims), so a job is never preempted twice and no extra one is taken.
3. If it does not fit even with every candidate gone: ``None``.
4. Otherwise the smallest set that gives a placement; among sets of one
   size, the first in (priority, youngest start, job id) order, which is the
   lowest-priority set. Sets are tried up to ``SEARCH_BUDGET`` placements;
   past that, greedy lowest-priority-first then drop any victim not needed.
"""
from __future__ import annotations

from itertools import combinations
from typing import Callable, Iterable, Mapping, Sequence

from lingjund.sched.pool import NodeFree
from lingjund.sched.snapshot import JobRequest, PartitionView, QosView, RunningJob

OFF = "OFF"
# Returned when the job only waits for jobs already on their way out.
WAIT: tuple[int, ...] = ()
# Placement attempts for the exact (fewest-victims) search before greedy.
SEARCH_BUDGET = 2000


class PartitionPrioPreempt:
    name = "preempt/partition_prio"

    def victims(self, job: JobRequest, part: PartitionView, candidates: Sequence[NodeFree],
                running: Sequence[RunningJob], partitions: Mapping[str, PartitionView],
                select, most_nodes: int, now: float, exempt_s: float,
                claimed: frozenset[int] = frozenset(),
                qos: Mapping[str, QosView] | None = None) -> tuple[int, ...] | None:
        """Job ids to preempt so ``job`` fits on ``candidates`` (its usable
        nodes as the pass sees them), ``WAIT`` when it only waits for jobs
        already stopping, or None when preemption cannot make it fit.
        ``claimed``: victims already chosen in this pass for other jobs.
        Pure: never changes ``candidates``."""
        def lower_tier(r: RunningJob) -> bool:
            theirs = partitions.get(r.partition)
            return (theirs is not None and theirs.priority_tier < part.priority_tier
                    and theirs.preempt_mode != OFF)
        return search(job, candidates, running, select, most_nodes, claimed,
                      lambda r: lower_tier(r) and now >= r.start_time + exempt_s)


class QosPreempt:
    name = "preempt/qos"

    def victims(self, job: JobRequest, part: PartitionView, candidates: Sequence[NodeFree],
                running: Sequence[RunningJob], partitions: Mapping[str, PartitionView],
                select, most_nodes: int, now: float, exempt_s: float,
                claimed: frozenset[int] = frozenset(),
                qos: Mapping[str, QosView] | None = None) -> tuple[int, ...] | None:
        """As PartitionPrioPreempt's, with the victims those of a QOS that the
        job's QOS may preempt (``qos``: the snapshot's QOS views)."""
        qos = qos or {}
        mine = qos.get(job.qos)
        may = mine.preempt if mine is not None else frozenset()

        def preemptible(r: RunningJob) -> bool:
            if r.qos not in may:
                return False
            theirs = qos.get(r.qos)
            if now < r.start_time + (theirs.exempt_s if theirs is not None
                                     and theirs.exempt_s >= 0 else exempt_s):
                return False
            return qos_preempt_mode(theirs, partitions.get(r.partition)) != OFF
        return search(job, candidates, running, select, most_nodes, claimed, preemptible)


def qos_preempt_mode(theirs: QosView | None, part: PartitionView | None) -> str:
    """A job's PreemptMode under preempt/qos: its QOS's, else its partition's
    (which is the cluster's when the partition names none); OFF without either."""
    if theirs is not None and theirs.preempt_mode:
        return theirs.preempt_mode
    return part.preempt_mode if part is not None else OFF


def search(job: JobRequest, candidates: Sequence[NodeFree], running: Sequence[RunningJob],
           select, most_nodes: int, claimed: frozenset[int],
           preemptible: Callable[[RunningJob], bool]) -> tuple[int, ...] | None:
    """The victims among ``running`` jobs that ``preemptible`` allows (the
    module's rules 1-4): ``WAIT``, a tuple of job ids, or None. Pure."""
    names = {n.name for n in candidates}
    here = [r for r in running if names.intersection(r.nodes) and r.cpus_per_node]
    base = _freed(candidates, [r for r in here if r.stopping or r.job_id in claimed])
    if _fits(select, job, base, most_nodes):
        return WAIT
    pool = [r for r in here if not r.stopping and r.job_id not in claimed and preemptible(r)]
    pool.sort(key=lambda r: (r.priority, -r.start_time, r.job_id))
    if not pool or not _fits(select, job, _freed(base, pool), most_nodes):
        return None
    tries = 0
    for k in range(1, len(pool) + 1):
        for combo in combinations(pool, k):
            tries += 1
            if tries > SEARCH_BUDGET:
                return _greedy(select, job, base, pool, most_nodes)
            if _fits(select, job, _freed(base, combo), most_nodes):
                return tuple(sorted(r.job_id for r in combo))
    return None   # unreachable: all of pool fits


def _greedy(select, job: JobRequest, base: Sequence[NodeFree], pool: Sequence[RunningJob],
            most_nodes: int) -> tuple[int, ...]:
    """Lowest priority first until the job fits, then drop each victim
    (highest priority first) that it still fits without."""
    chosen: list[RunningJob] = []
    for r in pool:
        chosen.append(r)
        if _fits(select, job, _freed(base, chosen), most_nodes):
            break
    for r in reversed(list(chosen)):
        rest = [c for c in chosen if c is not r]
        if _fits(select, job, _freed(base, rest), most_nodes):
            chosen = rest
    return tuple(sorted(r.job_id for r in chosen))


def _fits(select, job: JobRequest, nodes: Sequence[NodeFree], most_nodes: int) -> bool:
    usable = [n for n in nodes if n.schedulable]
    return select.place_gang(job, usable, most_nodes) is not None


def _freed(nodes: Sequence[NodeFree], gone: Iterable[RunningJob]) -> list[NodeFree]:
    """Copies of ``nodes`` with what the ``gone`` jobs hold there given back."""
    out = {n.name: n.copy() for n in nodes}
    for r in gone:
        for i, name in enumerate(r.nodes):
            n = out.get(name)
            if n is None:
                continue
            n.release(_at(r.cpus_per_node, i), _at(r.mem_per_node_mb, i),
                      _at(r.gpus_per_node, i),
                      r.gpu_ids_per_node[i] if i < len(r.gpu_ids_per_node) else (), r.exclusive,
                      r.shards_per_node, r.mps_per_node)
    return list(out.values())


def _at(values: Sequence[int], i: int) -> int:
    return values[i] if i < len(values) else 0
