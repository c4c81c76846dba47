"""priority/basic: the queue in Slurm's order for priority/basic.

The stored priority is the job's (the service gives each submission one
less than the one before, less its nice; an operator may set it); highest first; among equals the earlier submission; among those
the lower job id, so that the order is total and a pass is deterministic
whatever order the store returned the jobs in.

Example: jobs (id, priority, submit) 7 (100, t=5), 3 (100, t=5), 9 (200,
t=8), 4 (100, t=2) are walked 9, 4, 3, 7.
"""
from __future__ import annotations

from operator import attrgetter
from typing import Sequence

from lingjund.sched.snapshot import JobRequest, Snapshot


class BasicPriority:
    name = "priority/basic"

    def order(self, pending: Sequence[JobRequest], now: float = 0.0,
              snapshot: Snapshot | None = None) -> list[JobRequest]:
        """Pending jobs in the order the pass considers them (a new list); the
        stored priority alone decides (``now`` and ``snapshot`` are not read)."""
        # (-priority, submit_time, job_id) as three stable sorts, least significant
        # first: C-level keys, no tuple per job (a quarter of the time at 100,000 jobs).
        queue = sorted(pending, key=_JOB_ID)
        queue.sort(key=_SUBMIT_TIME)
        queue.sort(key=_PRIORITY, reverse=True)   # reverse keeps equal keys in order
        return queue


_JOB_ID = attrgetter("job_id")
_SUBMIT_TIME = attrgetter("submit_time")
_PRIORITY = attrgetter("priority")
