"""priority/basic: the queue in Slurm's order for priority/basic.

Highest priority first; among equals the earlier submission; among those
the lower job id, so that the order is total and a pass is deterministic
whatever order the store returned the jobs in.
"""
from __future__ import annotations

from typing import Sequence

from lingjund.sched.snapshot import JobRequest


class BasicPriority:
    name = "priority/basic"

    def order(self, pending: Sequence[JobRequest]) -> list[JobRequest]:
        """Pending jobs in the order the pass considers them (a new list)."""
        return sorted(pending, key=lambda j: (-j.priority, j.submit_time, j.job_id))
