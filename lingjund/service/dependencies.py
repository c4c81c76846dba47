"""Settle the dependencies of pending jobs before a scheduling pass.

The verdicts come from the pure ``lingjund.sched.dependency``; this module
only gathers the jobs they may name, and commits in one transaction what is
left of each dependency (satisfied terms drop out, failures stay marked).
A job whose dependency can never be satisfied pends with
``DependencyNeverSatisfied``, or is cancelled when it (or the cluster's
``kill_invalid_depend``) asked for that.
"""
from __future__ import annotations

import logging

from lingjun import slurm
from lingjund import lifecycle
from lingjund.sched import dependency
from lingjund.service import batch
from lingjund.service.context import Controller
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.dependencies")


def job_view(job: JobRecord, now: float = 0.0, fence_margin: float = 0.0) -> dependency.JobView:
    """A NODE_FAIL'd job counts as still completing for ``fence_margin`` after
    its end, while its lost nodes may still be fencing what ran there
    (lingjun_agent/launcher/lease.py): no dependent starts beside it."""
    fencing = job.state == slurm.NODE_FAIL and now < job.end_time + fence_margin
    return dependency.JobView(
        job_id=job.job_id, state=job.state, name=job.name, user=job.user,
        exit_code=job.exit_code, start_time=job.start_time,
        completing=bool(job.completing) or fencing,
        array_job_id=job.array_job_id, array_task_id=job.array_task_id,
        array_task_str=job.array_task_str, singleton="singleton" in job.dependency)


def kills_on_invalid(ctl: Controller, job: JobRecord) -> bool:
    spec = job.spec
    if spec.HasField("kill_on_invalid_dep"):
        return spec.kill_on_invalid_dep
    return ctl.config.controller.kill_invalid_depend


def settle(ctl: Controller, now: float) -> dict[int, str]:
    """Bring every pending job's dependency up to date; returns job id ->
    pending reason ("Dependency" / "DependencyNeverSatisfied") for those still
    waiting. One transaction."""
    reasons: dict[int, str] = {}
    if not ctl.store.dependent_jobs():
        return reasons          # the common case: no write lock taken
    with ctl.store.transaction() as st:
        waiting = st.dependent_jobs()
        named: set[int] = set()
        for job in waiting:
            named.update(t.job_id for t in dependency.parse(job.dependency).terms if t.job_id)
        world_jobs = {j.job_id: j for j in st.jobs_and_arrays(named)}
        if any("singleton" in j.dependency for j in waiting):
            for j in st.jobs(states=slurm.ACTIVE_STATES) + st.holding_jobs():
                world_jobs[j.job_id] = j
        for j in waiting:
            world_jobs[j.job_id] = j
        margin = ctl.config.controller.fence_margin
        world = dependency.DependencyWorld(job_view(j, now, margin) for j in world_jobs.values())
        for job in waiting:
            verdict = world.evaluate(job.dependency, job_view(job), now)
            if verdict.state == dependency.NEVER and kills_on_invalid(ctl, job):
                batch.commit(st, job, lifecycle.never_runnable(job, now, verdict.remaining), now)
                log.info("job=%d cancelled: dependency %s can never be satisfied",
                         job.job_id, verdict.remaining)
                continue
            changes: dict = {}
            if verdict.remaining != job.dependency:
                changes["dependency"] = verdict.remaining
            if verdict.state == dependency.SATISFIED:
                # Eligible from now on (Slurm shows EligibleTime=Unknown until then).
                changes["eligible_time"] = max(job.eligible_time, now)
                log.info("job=%d dependency satisfied", job.job_id)
            else:
                reasons[job.job_id] = verdict.reason
            if changes:
                st.update_job(job.job_id, **changes)
    return reasons
