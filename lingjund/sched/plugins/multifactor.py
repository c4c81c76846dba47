"""priority/multifactor: Slurm 22.05's job priority from weighted factors.

    Job_priority = site_factor
                 + PriorityWeightAge       * age_factor
                 + PriorityWeightAssoc     * assoc_factor
                 + PriorityWeightFairshare * fair_share_factor
                 + PriorityWeightJobSize   * job_size_factor
                 + PriorityWeightPartition * partition_factor
                 + PriorityWeightQOS       * qos_factor
                 - nice

summed in that order as doubles, below 1 raised to 1 (0 is a held job),
above 2^32-1 capped, then truncated to an integer: what
``_get_priority_internal`` in Slurm's priority_multifactor.c does. Each
factor is in [0, 1], and 0 when its weight is 0 (Slurm skips it):

- age: seconds since the job became eligible (``JobRequest.begin_time``;
  none while held or waiting on a dependency, which have no begin time)
  over PriorityMaxAge, 1.0 from there on.
- job size, by the cluster's node count N and CPU count C, for a job of n
  nodes and c CPUs: (n/N + c/C) / 2; with PriorityFavorSmall
  ((N-n)/N + (C-c)/C) / 2; clipped to [0, 1].
- partition: the partition's PriorityJobFactor over the highest of all
  partitions'.
- QOS, association, fair share: given on the request (``qos_factor``,
  ``assoc_factor``, ``fairshare``): the service works them out from the
  QOS and association records (a QOS's Priority over the highest QOS
  Priority, ...); fair share is 1.0 where nothing computes it.

A job whose priority an operator set (``priority_set``: scontrol update
Priority=N) keeps it: no factor is computed for it.

Worked example (Slurm's priority_multifactor page, weights 1000 each for
age, fair share, job size, partition, QOS): on 4 nodes of 4 CPUs, a job
asking 1 node and 1 CPU, eligible 3.5 days ago with PriorityMaxAge 7-0,
in a partition of factor 1 (the highest is 2), fair share 0.5, no QOS:
age 500 + fair share 500 + job size (1/4 + 1/16)/2*1000 = 156.25 +
partition 500 = 1656.25, so priority 1656; with --nice=100, 1556.

Cost: a pass asks the priority of every pending job. What does not change
between passes (all but age) is kept per request object (the service reuses
requests of unchanged jobs), so a pass computes age and the sum for all
jobs at once with numpy and sorts by (-priority, submit time, job id) with
one lexsort.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from lingjund.sched.snapshot import JobRequest, PartitionView, Snapshot

NAME = "priority/multifactor"
PRIORITY_MAX = 0xFFFFFFFF


@dataclass(frozen=True)
class Weights:
    """PriorityWeight* and the settings the factors read (Slurm's defaults: all 0)."""

    age: int = 0
    assoc: int = 0
    fairshare: int = 0
    job_size: int = 0
    partition: int = 0
    qos: int = 0
    max_age_s: int = 7 * 86400        # PriorityMaxAge
    favor_small: bool = False         # PriorityFavorSmall


@dataclass(frozen=True)
class Cluster:
    """What the job size and partition factors are normalised by."""

    nodes: int = 0                    # Slurm's node_record_count
    cpus: int = 0                     # cluster_cpus
    max_partition_factor: int = 0     # the highest PriorityJobFactor of any partition

    @classmethod
    def of(cls, snapshot: Snapshot) -> Cluster:
        return cls(nodes=len(snapshot.nodes), cpus=sum(n.cpus for n in snapshot.nodes),
                   max_partition_factor=max((p.priority_job_factor for p in snapshot.partitions),
                                            default=0))


@dataclass(frozen=True)
class Factors:
    """One job's factors, each in [0, 1] (sprio -n), and its nice and site factor."""

    job_id: int
    site: int = 0
    age: float = 0.0
    assoc: float = 0.0
    fairshare: float = 0.0
    job_size: float = 0.0
    partition: float = 0.0
    qos: float = 0.0
    nice: int = 0

    def weighted(self, w: Weights) -> tuple[float, float, float, float, float, float]:
        """(age, assoc, fairshare, job size, partition, QOS) times their weights (sprio)."""
        return (self.age * w.age, self.assoc * w.assoc, self.fairshare * w.fairshare,
                self.job_size * w.job_size, self.partition * w.partition, self.qos * w.qos)


def job_cpus(job: JobRequest) -> int:
    """The CPUs the job asks at least (Slurm's min_cpus: tasks x CPUs per task)."""
    tasks = job.num_tasks or (job.min_nodes * job.ntasks_per_node if job.ntasks_per_node
                              else job.min_nodes)
    return max(1, tasks) * max(1, job.cpus_per_task)


def age_factor(job: JobRequest, now: float, w: Weights) -> float:
    if not w.age or job.begin_time <= 0 or job.held:
        return 0.0
    diff = max(0, int(now) - int(job.begin_time))
    if diff < w.max_age_s:
        return diff / w.max_age_s
    return 1.0


def job_size_factor(job: JobRequest, cluster: Cluster, w: Weights) -> float:
    if not w.job_size or not cluster.nodes:
        return 0.0
    n, c = job.min_nodes, job_cpus(job)
    if w.favor_small:
        f = (cluster.nodes - n) / cluster.nodes
        if c and cluster.cpus:
            f = (f + (cluster.cpus - c) / cluster.cpus) / 2
    else:
        f = n / cluster.nodes
        if c and cluster.cpus:
            f = (f + c / cluster.cpus) / 2
    return min(1.0, max(0.0, f))


def partition_factor(part: PartitionView | None, cluster: Cluster, w: Weights) -> float:
    if not w.partition or part is None or not part.priority_job_factor \
            or not cluster.max_partition_factor:
        return 0.0
    return part.priority_job_factor / cluster.max_partition_factor


def factors(job: JobRequest, part: PartitionView | None, cluster: Cluster, w: Weights,
            now: float) -> Factors:
    """The job's factors at ``now`` (all 0 but nice for a job whose priority was set)."""
    if job.priority_set:
        return Factors(job_id=job.job_id, nice=job.nice)
    return Factors(
        job_id=job.job_id, site=job.site_factor, age=age_factor(job, now, w),
        assoc=job.assoc_factor if w.assoc else 0.0,
        fairshare=job.fairshare if w.fairshare else 0.0,
        job_size=job_size_factor(job, cluster, w),
        partition=partition_factor(part, cluster, w),
        qos=job.qos_factor if w.qos else 0.0, nice=job.nice)


def combine(f: Factors, w: Weights) -> int:
    """Slurm's sum of the weighted factors, as an integer priority (at least 1)."""
    age, assoc, fs, js, part, qos = f.weighted(w)
    p = float(f.site) + age + assoc + fs + js + part + qos - float(f.nice)
    if p < 1:
        p = 1.0
    return min(int(p), PRIORITY_MAX)


def job_priority(job: JobRequest, part: PartitionView | None, cluster: Cluster, w: Weights,
                 now: float) -> int:
    """The job's priority at ``now``: its set priority, else the weighted factors' sum."""
    if job.priority_set:
        return job.priority
    return combine(factors(job, part, cluster, w, now), w)


# The per-job columns kept between passes: the weighted factors but age, in the
# order Slurm adds them, what age needs, a set priority (-1: none), and what the
# queue order and the plan read (submit time, job id, the priority the job holds).
_SITE, _ACCRUE, _ASSOC, _FS, _JS, _PART, _QOS, _NICE, _FIXED, _SUBMIT, _ID, _HELD = range(12)


class MultifactorPriority:
    """The QueueSort for priority/multifactor (``plugins/__init__.py``)."""

    name = NAME

    def __init__(self, weights: Weights = Weights()) -> None:
        self.weights = weights
        # job id -> (the request the row was made from, its row); valid for one context
        self._rows: dict[int, tuple[JobRequest, tuple]] = {}
        self._context: tuple | None = None
        # the last pass's requests and table (``_table``)
        self._last: tuple[list[JobRequest], np.ndarray] | None = None

    def order(self, pending: Sequence[JobRequest], now: float = 0.0,
              snapshot: Snapshot | None = None) -> list[JobRequest]:
        return self.rank(pending, now, snapshot)[0]

    def rank(self, pending: Sequence[JobRequest], now: float, snapshot: Snapshot | None
             ) -> tuple[list[JobRequest], Mapping[int, int]]:
        """The queue (highest priority at ``now`` first; then earlier submission,
        lower job id), and the priority of each job whose priority at ``now`` is
        not the one it holds (``JobRequest.priority``)."""
        if not pending:
            return [], {}
        t = self._table(pending, snapshot)
        prio = self._sum(t, now)
        ids = t[:, _ID].astype(np.int64)
        idx = np.lexsort((ids, t[:, _SUBMIT], -prio))
        queue = [pending[i] for i in idx.tolist()]
        moved = np.flatnonzero(prio != t[:, _HELD].astype(np.int64))
        return queue, dict(zip(ids[moved].tolist(), prio[moved].tolist()))

    def priorities(self, pending: Sequence[JobRequest], now: float,
                   snapshot: Snapshot | None) -> np.ndarray:
        """Every pending job's priority at ``now`` (int64, in ``pending``'s order)."""
        if not pending:
            return np.zeros(0, dtype=np.int64)
        return self._sum(self._table(pending, snapshot), now)

    def _sum(self, t: np.ndarray, now: float) -> np.ndarray:
        """Slurm's sum over the table's rows at ``now``, in Slurm's order of terms."""
        w = self.weights
        accrue = t[:, _ACCRUE]
        if w.age:
            diff = np.maximum(0.0, np.floor(now) - accrue)
            age = np.where(diff < w.max_age_s, diff / w.max_age_s, 1.0) * w.age
            age[accrue <= 0] = 0.0
        else:
            age = np.zeros(len(t))
        p = t[:, _SITE] + age
        for col in (_ASSOC, _FS, _JS, _PART, _QOS):
            p = p + t[:, col]
        p = p - t[:, _NICE]
        p = np.minimum(np.maximum(p, 1.0), float(PRIORITY_MAX))
        out = p.astype(np.int64)
        fixed = t[:, _FIXED]
        set_ = fixed >= 0
        if set_.any():
            out[set_] = fixed[set_].astype(np.int64)
        return out

    def _table(self, pending: Sequence[JobRequest], snapshot: Snapshot | None) -> np.ndarray:
        """One row per job (``_row``), in ``pending``'s order. The last pass's table is
        patched where its requests were replaced, when the queue kept its length (most
        passes: a few jobs' priorities or reasons changed); otherwise built anew from
        the rows kept per request."""
        w = self.weights
        parts = {p.name: p for p in snapshot.partitions} if snapshot is not None else {}
        cluster = Cluster.of(snapshot) if snapshot is not None else Cluster()
        context = (w, cluster, tuple((p.name, p.priority_job_factor) for p in parts.values()))
        if context != self._context:
            self._context = context
            self._rows = {}
            self._last = None
        rows = self._rows

        def row(job: JobRequest) -> tuple:
            kept = rows.get(job.job_id)
            if kept is None or kept[0] is not job:
                kept = (job, self._row(job, parts.get(job.partition), cluster))
                rows[job.job_id] = kept
            return kept[1]

        last = self._last
        if last is not None and len(last[0]) == len(pending):
            changed = [i for i, (a, b) in enumerate(zip(pending, last[0])) if a is not b]
            if len(changed) * 4 < len(pending):
                t = last[1]
                for i in changed:
                    t[i] = row(pending[i])
                self._last = (list(pending), t)
                return t
        t = np.array([row(j) for j in pending], dtype=np.float64)
        self._last = (list(pending), t)
        if len(rows) > 2 * len(pending) + 1024:      # forget jobs that left the queue
            live = {j.job_id for j in pending}
            self._rows = {k: v for k, v in rows.items() if k in live}
        return t

    def _row(self, job: JobRequest, part: PartitionView | None, cluster: Cluster) -> tuple:
        w = self.weights
        tail = (job.submit_time, float(job.job_id), float(job.priority))
        if job.priority_set:
            return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, float(job.priority), *tail)
        f = factors(job, part, cluster, w, 0.0)
        _, assoc, fs, js, pt, qos = f.weighted(w)
        accrue = float(int(job.begin_time)) if job.begin_time > 0 and not job.held else 0.0
        return (float(f.site), accrue, assoc, fs, js, pt, qos, float(f.nice), -1.0, *tail)
