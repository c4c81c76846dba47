"""eligibility/basic: jobs that may not start yet whatever the cluster holds.

A held job waits for a release, a job with a begin time waits for the
clock. Neither is waiting for resources, so neither holds back the jobs
behind it (Slurm skips them in its main loop the same way).
"""
from __future__ import annotations

from lingjun.slurm import REASON_BEGIN_TIME, REASON_HELD_USER
from lingjund.sched.snapshot import JobRequest, PartitionView


class JobEligibility:
    name = "eligibility/basic"

    def check(self, job: JobRequest, partition: PartitionView, now: float) -> str | None:
        # Held first: a held job with a future begin time shows JobHeldUser, as in Slurm.
        if job.held:
            return REASON_HELD_USER
        if job.begin_time > now:
            return REASON_BEGIN_TIME
        return None
