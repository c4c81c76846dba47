"""A scheduling pass: snapshot the store, ask the pure core, commit its plan.

Decide, then commit: the core sees a frozen snapshot; the plan is applied in
one transaction that re-checks each job is still PENDING (a cancel may have
raced the pass), and only after the commit are launches sent to agents.
A pass starts by carrying out the job timers that are due (time limits,
--signal warnings, deadlines, grace times: ``timers.enforce``, decided in
``lingjund/lifecycle.py``), as slurmctld checks time limits before it schedules.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from lingjun import slurm
from lingjund import lifecycle
from lingjund.sched.backfill import Backfill
from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import Profile
from lingjund.sched.snapshot import Plan, Snapshot, Start
from lingjund.service import (associations, batch, dependencies, faulttol, health, preemption,
                              priority, timers)
from lingjund.service.context import Controller
from lingjund.service.jobs import split_task
from lingjund.service.views import build_snapshot
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.sched")


def profile(ctl: Controller) -> Profile:
    """The core's profile: the configured PreemptType and PriorityType, and
    sched/backfill unless [scheduler] backfill = false."""
    base = preemption.profile(ctl)
    sort = priority.queue_sort(ctl)
    if sort is not None:
        base = replace(base, queue_sort=sort)
    conf = ctl.config.scheduler
    if not conf.backfill:
        return base
    return replace(base, backfill=Backfill(window_min=conf.bf_window_min,
                                           max_job_test=conf.bf_max_job_test,
                                           resolution_s=conf.bf_resolution_s))


def _running_fields(job: JobRecord, s: Start, now: float) -> dict:
    fields = lifecycle.start(job, now, nodes=s.nodes, cpus_per_node=s.cpus_per_node,
                             mem_per_node=s.mem_per_node_mb, gpus_per_node=s.gpus_per_node,
                             gpu_ids=s.gpu_ids_per_node, tasks_per_node=s.tasks_per_node)
    if s.borrowed:                  # on lent quota (lingjund/sched/lending.py): it shows
        fields.update(reason=slurm.REASON_BORROWED)
    if job.sched_start or job.sched_nodes:
        fields.update(sched_start=0.0, sched_nodes=())     # started: no reservation now
    return fields


def _stale(ctl: Controller, plan: Plan) -> set[int]:
    """Jobs of the plan's starts that changed since the snapshot (cancelled,
    held, updated while the core ran), or whose nodes can no longer take work:
    their starts are skipped; the next pass sees them as they are now."""
    live = ctl.store.live
    stale = set()
    for s in plan.starts:
        if s.job_id in stale:
            continue
        if live.jobs.get(s.job_id) is not ctl.views.seen(s.job_id):
            stale.add(s.job_id)
            continue
        for n in s.nodes:
            rec = live.nodes.get(n)
            if rec is None or rec.drain or rec.down or not ctl.agents.connected(n):
                stale.add(s.job_id)
                break
    return stale


def apply_plan(ctl: Controller, plan: Plan, now: float,
               stale: set[int] = frozenset()) -> list[JobRecord]:
    """Commit the plan's starts (but those of ``stale``) and pending reasons."""
    started: list[JobRecord] = []
    with ctl.store.transaction() as st:
        # priority/multifactor: the priorities that moved since the last pass (first,
        # so that a job starting now keeps the one it started with)
        pending = st.live.jobs
        st.set_priorities({job_id: p for job_id, p in plan.priorities.items()
                           if (job := pending.get(job_id)) is not None
                           and job.state == slurm.PENDING and not job.priority_set
                           and job.priority != p})
        for s in plan.starts:
            job = st.job(s.job_id)
            if job is None or job.state != slurm.PENDING or s.job_id in stale:
                continue  # changed since the snapshot: skip, the next pass sees it
            if s.array_task_id >= 0 and job.array_task_str:
                if s.array_task_id not in slurm.unfold_indices(job.array_task_str):
                    continue  # cancelled since the snapshot
                task_job = split_task(st, job, s.array_task_id, **_running_fields(job, s, now))
                started.append(st.job(task_job))
                continue
            st.update_job(job.job_id, **_running_fields(job, s, now))
            started.append(st.job(job.job_id))
        live = st.live.jobs
        st.set_reasons({job_id: reason for job_id, reason in plan.reasons.items()
                        if (job := live.get(job_id)) is not None and job.state == slurm.PENDING
                        and job.reason != reason})
        # Reservations: this pass's, and none for a pending job that had one before.
        expected = plan.expected
        changed = {}
        for job_id in plan.reasons:
            job = live.get(job_id)
            if job is None or job.state != slurm.PENDING:
                continue
            want = expected.get(job_id, (0.0, ()))
            if (job.sched_start, job.sched_nodes) != want:
                changed[job_id] = want
        st.set_expected(changed)
    return started


def prepare_pass(ctl: Controller) -> tuple[Snapshot, float] | None:
    """The timers due now, then the snapshot for the core (None: nothing pending)."""
    now = ctl.clock()
    timers.enforce(ctl, now)       # time limits, --signal, deadlines, grace times
    ctl.store.evict_finished(now - ctl.config.controller.min_job_age_s)
    waiting = dependencies.settle(ctl, now)
    snap = build_snapshot(ctl, now, waiting)
    if not snap.pending:
        return None
    held_to = associations.pass_limits(ctl, ctl.store.holding_jobs())
    if held_to is not None:
        snap = replace(snap, limits=held_to)
    if ctl.config.preempt.type == "qos":
        snap = replace(snap, qos=preemption.qos_views(ctl))
    return snap, now


def run_pass(ctl: Controller) -> int:
    """One pass; returns the number of jobs started."""
    prepared = prepare_pass(ctl)
    if prepared is None:
        return 0
    snap, now = prepared
    return commit_pass(ctl, schedule(snap, now, profile(ctl)), now)


async def run_pass_off_loop(ctl: Controller) -> int:
    """One pass whose pure core runs in a worker thread, so that the event loop
    goes on serving heartbeats and commands meanwhile; returns the jobs started.

    Only the core leaves the loop: it reads nothing but its frozen snapshot.
    What changed while it ran is caught at commit (``_stale``); passes never
    overlap (``ctl.pass_lock``), so no two plans share out the same free
    resources."""
    async with ctl.pass_lock:
        prepared = prepare_pass(ctl)
        if prepared is None:
            return 0
        snap, now = prepared
        plan = await asyncio.to_thread(schedule, snap, now, profile(ctl))
        return commit_pass(ctl, plan, now, _stale(ctl, plan))


def commit_pass(ctl: Controller, plan: Plan, now: float, stale: set[int] = frozenset()) -> int:
    """Commit the core's plan, then tell the agents."""
    started = apply_plan(ctl, plan, now, stale)
    if preemption.preempt(ctl, plan.preemptions, now):
        timers.enforce(ctl, now)       # GraceTime=0: stop them now
    for job in started:
        task = f" (array {job.array_job_id}_{job.array_task_id})" if job.array_job_id else ""
        log.info("job=%d%s started on %s", job.job_id, task,
                 slurm.compress_hostlist(list(job.nodes)))
        if health.wants_prolog(ctl, job):
            health.start_prolog(ctl, job)       # the script follows the prolog
        elif job.spec.batch:
            ctl.agents.send(job.batch_host, batch.launch_message(ctl, job))
        # an allocation (srun/salloc) has no script: its client runs steps once told
    if started:
        faulttol.after_starts(ctl, started)
        ctl.jobs_changed()
    return len(started)
