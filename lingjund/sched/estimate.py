"""When a job would start if it were submitted now (sbatch --test-only).

``estimate_start(snapshot, job, now)`` answers like Slurm's will-run test:
place the job on what is free now; if it does not fit, let the running
jobs end one by one at their expected end times (earliest first), freeing
what each holds, and take the first moment the whole gang fits. Pending
jobs are not simulated (Slurm's will-run does not order against them
either); a job that never fits, even on an idle cluster, gets None.

Example: node[1-2], 2 CPUs each, node1 running job 7 (2 CPUs) until
t=600. ``-N2`` at now=0 does not fit; after job 7 ends it does: start 600
on node[1-2]. ``-N3`` never fits: None.

Running jobs end in the free-capacity index of a pass (``capacity.py``): each
end moves its nodes between buckets, so the estimate costs a search per end,
not a scan and copy of the partition per end.

Pure: no clock (``now`` is an argument), no I/O.
"""
from __future__ import annotations

from lingjun.slurm import natural_key
from lingjund.sched.capacity import FreeCapacity
from lingjund.sched.plugins import DEFAULT_PROFILE, Profile
from lingjund.sched.plugins.partition import node_cap
from lingjund.sched.snapshot import JobRequest, RunningJob, Snapshot, Start


def estimate_start(snapshot: Snapshot, job: JobRequest, now: float,
                   profile: Profile = DEFAULT_PROFILE) -> tuple[float, Start] | None:
    """(start time, placement) for ``job``, or None if it can never run here."""
    part = next((p for p in snapshot.partitions if p.name == job.partition), None)
    if part is None:
        return None
    for f in profile.filters:
        # Held or begin-time jobs would still run some day; partition refusals never.
        if f.name.startswith("partition/") and f.check(job, part, now) is not None:
            return None
    free = FreeCapacity(snapshot.nodes, snapshot.partitions)
    ids = tuple(i for i in free.members(part.name)
                if all(nf.check_node(job, free.views[i]) is None for nf in profile.node_filters))
    only = None if len(ids) == len(free.members(part.name)) else frozenset(ids)
    select = profile.select
    indexed = callable(getattr(select, "place_in", None))
    most = node_cap(part)
    ending = sorted((r for r in snapshot.running if r.end_time > 0),
                    key=lambda r: (r.end_time, r.job_id))
    when = now
    for release in [None, *ending]:
        if release is not None:
            _free(free, release)       # its nodes move buckets; nothing is rebuilt
            when = max(now, release.end_time)
        if indexed:
            placement = select.place_in(job, free.free(part.name, only), most)
        else:
            placement = select.place_gang(job, free.candidates(ids), most)
        if placement is not None:
            shares = sorted(placement.shares, key=lambda s: natural_key(s.node))
            return when, Start(job_id=job.job_id, nodes=tuple(s.node for s in shares),
                               cpus_per_node=tuple(s.cpus for s in shares),
                               mem_per_node_mb=tuple(s.mem_mb for s in shares),
                               gpus_per_node=tuple(s.gpus for s in shares),
                               tasks_per_node=tuple(s.tasks for s in shares),
                               exclusive=job.exclusive,
                               gpu_ids_per_node=tuple(s.gpu_ids for s in shares))
    return None


def _free(free: FreeCapacity, job: RunningJob) -> None:
    """Give back what ``job`` holds on each of its nodes."""
    for i, name in enumerate(job.nodes):
        k = free.ids.get(name)
        if k is None:
            continue
        node = free.nodes[k]
        free.give_back(name, cpus=_at(job.cpus_per_node, i, node.cpus),
                       mem_mb=_at(job.mem_per_node_mb, i, 0),
                       gpus=_at(job.gpus_per_node, i, node.gpus), exclusive=job.exclusive,
                       gpu_ids=job.gpu_ids_per_node[i] if i < len(job.gpu_ids_per_node) else (),
                       shards=job.shards_per_node, mps=job.mps_per_node)


def _at(values: tuple[int, ...], i: int, unknown: int) -> int:
    """values[i], or ``unknown`` (everything) when the job's shares were not given."""
    return values[i] if i < len(values) else unknown
