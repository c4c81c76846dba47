"""Restart policy: whether a run that ended badly runs again, and after how long.

A job's history is kept in two tables: ``job_events`` (what happened and
why, for ``lingjun events``) and ``job_attempts`` (each earlier run: nodes,
times, how it ended, for ``sacct -D``). The job row itself always describes
the current (or last) run, so a job that never ran twice has no attempt rows.

Which runs run again (``may_restart``):

    cause        --max-restarts=N given     not given
    NODE_FAIL    while restarts < N         requeueable: up to 5 times (Slurm's
    HANG         while restarts < N         MAX_BATCH_REQUEUE); else never
    FAILED       while restarts < N         never (Slurm: the exit code is final)

"Requeueable" is --requeue / --no-requeue, else the cluster's
``[controller] job_requeue`` (Slurm's JobRequeue, 1 by default). The count
is the job's ``restarts`` (Slurm's restart_cnt: ``Restarts=`` in scontrol,
``SLURM_RESTART_COUNT`` in the next run), which ``scontrol requeue`` bumps too.

Backoff: the n-th automatic restart waits ``restart_backoff_s * 2**(n-1)``,
capped at ``restart_backoff_max_s``, pending with reason ``BeginTime`` meanwhile,
so a job that dies at once does not spin through the queue.

Why ``--max-restarts``: it is torchrun's flag for the same thing (restarts of
the whole gang after a worker failure), so the people who submit training jobs
already know it; Slurm has no per-job option, and AIMaster's
``--max-num-of-job-restart`` says the same at twice the length.
"""
from __future__ import annotations

import logging

from lingjun import slurm
from lingjund import lifecycle
from lingjund.lifecycle import HANG, NOT_RESPONDING
from lingjund.service.context import Controller
from lingjund.store.store import Attempt, JobRecord

log = logging.getLogger("lingjund.restarts")

# event kinds (lingjun events prints them)
EV_NODE_LOST = "node_lost"
EV_HANG = "hang"
EV_REQUEUED = "requeued"
EV_RESTARTED = "restarted"
EV_GAVE_UP = "gave_up"
EV_PREEMPTED = "preempted"


def fence_wait_s(ctl: Controller, st, job: JobRecord, now: float) -> float:
    """How long a new attempt of ``job`` must still wait for the fences of its
    silent nodes (0 when none of its nodes went DOWN for silence).

    A node declared DOWN for silence at ``t`` may still run the job until its
    supervisors have fenced it, which ends by ``t + fence_margin``
    (``[controller] fence_margin_s``; the argument is in
    lingjun_agent/launcher/lease.py). A DOWN a person set leaves the agent
    connected and obeying, so it needs no wait.
    """
    margin = ctl.config.controller.fence_margin
    until = 0.0
    for name in job.nodes:
        rec = st.node(name)
        if rec is not None and rec.down and rec.reason == NOT_RESPONDING:
            until = max(until, rec.reason_time + margin)
    return max(0.0, until - now)


def record_job_event(st, job_id: int, kind: str, text: str, now: float) -> None:
    """One line of a job's history, in the caller's transaction ``st``."""
    st.add_job_event(job_id, now, kind, text)
    log.info("job=%d %s: %s", job_id, kind, text)


def record_attempt(st, job: JobRecord, state: str, end_time: float,
                   exit_code: int = 0, exit_signal: int = 0) -> None:
    """The run ``job`` describes ended in ``state`` and the job runs again."""
    st.put_attempt(Attempt(job_id=job.job_id, attempt=job.restarts + 1, state=state,
                           nodes=job.nodes, start_time=job.start_time, end_time=end_time,
                           exit_code=exit_code, exit_signal=exit_signal))


def requeueable(ctl: Controller, job: JobRecord) -> bool:
    spec = job.spec
    return spec.requeue if spec.HasField("requeue") else ctl.config.controller.job_requeue


def restart_limit(ctl: Controller, job: JobRecord, cause: str) -> int:
    """How many restarts this cause allows in all (see the table above)."""
    return lifecycle.restart_limit(job, cause, requeueable(ctl, job))


def may_restart(ctl: Controller, job: JobRecord, cause: str) -> bool:
    return job.restarts < restart_limit(ctl, job, cause)


def backoff_s(ctl: Controller, job: JobRecord) -> float:
    """Wait before the next automatic restart: doubling per restart, capped."""
    ft = ctl.config.faulttol
    return lifecycle.restart_backoff_s(job.restarts, ft.restart_backoff_s, ft.restart_backoff_max_s)


def after_run(ctl: Controller, st, job: JobRecord, state: str, end_time: float,
              exit_code: int, exit_signal: int, now: float, *, cause: str = "",
              requeued: bool = False) -> float | None:
    """A run of ``job`` ended in ``state``; inside the caller's transaction.

    Returns the backoff when the job is to be restarted automatically (the
    caller puts it back in the queue), None when not. ``requeued`` says the
    caller requeues it anyway (scontrol requeue): only the attempt is kept.
    ``cause`` defaults to ``state`` (HANG for a run stopped by hang detection).
    """
    cause = cause or state
    if requeued:     # scontrol requeue, or preempted with PreemptMode=REQUEUE
        record_attempt(st, job, slurm.PREEMPTED if state == slurm.PREEMPTED else slurm.REQUEUED,
                       end_time, exit_code, exit_signal)
        return None
    if state not in (slurm.NODE_FAIL, slurm.FAILED):
        return None
    limit = restart_limit(ctl, job, cause)
    if job.restarts >= limit:
        if limit:
            record_job_event(st, job.job_id, EV_GAVE_UP,
                             f"{state} after {job.restarts} restart(s): limit of {limit} reached", now)
        return None
    delay = backoff_s(ctl, job)
    record_attempt(st, job, state, end_time, exit_code, exit_signal)
    why = {HANG: "hang"}.get(cause, state)
    record_job_event(st, job.job_id, EV_REQUEUED,
                     f"attempt {job.restarts + 1} ended {why} on "
                     f"{slurm.compress_hostlist(list(job.nodes))}; restart {job.restarts + 1} "
                     f"of {limit} in {delay:g} s", now)
    return delay


def note_started(st, job: JobRecord, now: float) -> None:
    """A job that ran before started again: say where (attempt N on nodes)."""
    if job.restarts:
        record_job_event(st, job.job_id, EV_RESTARTED,
                         f"attempt {job.restarts + 1} started on "
                         f"{slurm.compress_hostlist(list(job.nodes))}", now)
