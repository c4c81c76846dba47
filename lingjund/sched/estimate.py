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

The arithmetic is backfill's (``backfill.Future``): the same expected ends,
taken as they are (not rounded), with no reservations.

Pure: no clock (``now`` is an argument), no I/O.
"""
from __future__ import annotations

from lingjun.slurm import natural_key
from lingjund.sched.backfill import Future
from lingjund.sched.capacity import FreeCapacity
from lingjund.sched.plugins import DEFAULT_PROFILE, Profile
from lingjund.sched.plugins.partition import node_cap
from lingjund.sched.snapshot import JobRequest, Snapshot, Start


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
    free = FreeCapacity(snapshot.nodes, snapshot.partitions, snapshot.topology)
    ids = tuple(i for i in free.members(part.name)
                if all(nf.check_node(job, free.views[i]) is None for nf in profile.node_filters))
    only = None if len(ids) == len(free.members(part.name)) else frozenset(ids)
    future = Future(free, snapshot.running, (), now, resolution_s=0)
    found = future.earliest(job, part.name, ids, only, profile.select, node_cap(part),
                            include_now=True)
    if found is None:
        return None
    when, placement = found
    shares = sorted(placement.shares, key=lambda s: natural_key(s.node))
    return when, Start(job_id=job.job_id, nodes=tuple(s.node for s in shares),
                       cpus_per_node=tuple(s.cpus for s in shares),
                       mem_per_node_mb=tuple(s.mem_mb for s in shares),
                       gpus_per_node=tuple(s.gpus for s in shares),
                       tasks_per_node=tuple(s.tasks for s in shares),
                       exclusive=job.exclusive,
                       gpu_ids_per_node=tuple(s.gpu_ids for s in shares))
