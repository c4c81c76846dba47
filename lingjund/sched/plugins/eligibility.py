"""eligibility/basic: jobs that may not start yet whatever the cluster holds.

A held job waits for a release, a job with a dependency waits for other
jobs (``lingjund.sched.dependency`` gives the verdict), a job with a begin
time waits for the clock, an array whose %N throttle is used up by running
tasks waits for one of them to end (JobArrayTaskLimit). None is waiting for
resources, so none holds back the jobs behind it (Slurm skips them in its
main loop the same way).
"""
from __future__ import annotations

from lingjun.slurm import (REASON_ARRAY_TASK_LIMIT, REASON_BEGIN_TIME, REASON_HELD_ADMIN,
                           REASON_HELD_USER)
from lingjund.sched.snapshot import JobRequest, PartitionView


class JobEligibility:
    name = "eligibility/basic"

    def check(self, job: JobRequest, partition: PartitionView, now: float) -> str | None:
        # Held first: a held job with a future begin time shows JobHeldUser, as in Slurm.
        if job.held:
            return REASON_HELD_ADMIN if job.hold_admin else REASON_HELD_USER
        # Dependency before BeginTime: the other jobs are the longer wait, and
        # Slurm tests dependencies first too.
        if job.dependency:
            return job.dependency
        if job.begin_time > now:
            return REASON_BEGIN_TIME
        if job.array_tasks and job.wanted == 0:
            return REASON_ARRAY_TASK_LIMIT
        return None
