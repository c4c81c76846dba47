"""Restart policy: whether a run that ended badly runs again, and after how long.

A job's history is kept in two tables: ``job_events`` (what happened and
why, for ``lingjun events``) and ``job_attempts`` (each earlier run: nodes,
times, how it ended, for ``sacct -D``). The job row itself always describes
the current (or last) run, so a job that never ran twice has no attempt rows.

Which runs run again (decided by ``lifecycle.batch_ended``):

    cause        --max-restarts=N given     not given
    NODE_FAIL    while restarts < N         requeueable: up to 5 times (Slurm's
    HANG         while restarts < N         MAX_BATCH_REQUEUE); else never
    FAILED       while restarts < N         never (Slurm: the exit code is final)

"Requeueable" is --requeue / --no-requeue, else the cluster's
``[controller] job_requeue`` (Slurm's JobRequeue, 1 by default). The count
is the job's ``restarts`` (Slurm's restart_cnt: ``Restarts=`` in scontrol,
``SLURM_RESTART_COUNT`` in the next run), which ``scontrol requeue`` bumps too.

Expedited (``--requeue=expedite``, Slurm 25.11's mode): a lost node or a
hang restarts the job at once (no backoff; only the fence wait of silent
nodes), as the first job in line (sched/cycle.py), avoiding the nodes the
run failed on (``avoid``) and allowed on its partition's spare nodes
(``[[partitions]] spare_nodes``). Slurm 25.11 keeps the old allocation for
it; here the healthy old nodes are simply free for it, first in line.

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
from lingjun.cron import next_time
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
EV_SCHEDULED = "scheduled"     # a scrontab entry's run ended: its next time
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
    if spec.requeue_expedite:
        return True
    return spec.requeue if spec.HasField("requeue") else ctl.config.controller.job_requeue


def cron_next(st, job: JobRecord, now: float) -> float:
    """For ``lifecycle.Policy``: the next time of the scrontab entry ``job``
    stands for, or 0 when it stands for none now (not a cron job, or its
    crontab changed). Here, not in ``crontab`` (the operation that sets
    crontabs and writes their jobs through ``jobs`` and ``batch``, which use
    this module): a step shared by the operations, below them."""
    if not job.spec.cron_spec:
        return 0.0
    found = st.crontab(job.user)
    if found is None or job.job_id not in found[1]:
        return 0.0
    return next_time(job.spec.cron_spec, now)


def policy(ctl: Controller, st, job: JobRecord, now: float) -> lifecycle.Policy:
    """What ``lifecycle.batch_ended`` needs to decide whether ``job``'s run runs again."""
    ft = ctl.config.faulttol
    backoff = 0.0 if job.spec.requeue_expedite else ft.restart_backoff_s    # expedite: at once
    return lifecycle.Policy(requeueable=requeueable(ctl, job), backoff_s=backoff,
                            backoff_max_s=ft.restart_backoff_max_s,
                            requeue_delay_s=ctl.config.controller.requeue_delay_s,
                            fence_wait_s=fence_wait_s(ctl, st, job, now),
                            cron_next=cron_next(st, job, now))


def record_run_end(st, job: JobRecord, end: lifecycle.RunEnd, end_time: float,
                   exit_code: int, exit_signal: int, now: float) -> None:
    """Keep the history of a run's end (``lifecycle.batch_ended`` decided it), in
    the caller's transaction: the run as an attempt when the job runs again,
    and a line for a restart or for a limit reached."""
    if end.attempt_state:
        record_attempt(st, job, end.attempt_state, end_time, exit_code, exit_signal)
    if end.outcome == lifecycle.GAVE_UP:
        record_job_event(st, job.job_id, EV_GAVE_UP,
                         f"{end.state} after {job.restarts} restart(s): "
                         f"limit of {end.limit} reached", now)
    elif end.outcome == lifecycle.CRON:
        record_job_event(st, job.job_id, EV_SCHEDULED,
                         f"run ended {end.state}; next run of '{job.spec.cron_spec}' "
                         f"at {slurm.format_timestamp(now + end.delay)}", now)
    elif end.outcome == lifecycle.RESTART:
        why = {HANG: "hang"}.get(end.cause, end.state)
        record_job_event(st, job.job_id, EV_REQUEUED,
                         f"attempt {job.restarts + 1} ended {why} on "
                         f"{slurm.compress_hostlist(list(job.nodes))}; restart {job.restarts + 1} "
                         f"of {end.limit} in {end.delay:g} s"
                         + (f", avoiding {job.spec.failed_nodes}" if job.spec.failed_nodes else ""),
                         now)


def avoid(st, job_id: int, nodes) -> None:
    """The job's later runs avoid ``nodes`` (a run failed there: lost, or suspect),
    in the caller's transaction: kept in its spec's failed_nodes, which the
    scheduler adds to its -x."""
    job = st.job(job_id)
    if job is None:
        return
    had = set(slurm.expand_hostlist(job.spec.failed_nodes)) if job.spec.failed_nodes else set()
    new = set(nodes) - had
    if not new:
        return
    spec = type(job.spec)()
    spec.CopyFrom(job.spec)
    spec.failed_nodes = slurm.compress_hostlist(sorted(had | new))
    st.update_job(job_id, spec=spec)


def note_started(st, job: JobRecord, now: float) -> None:
    """A job that ran before started again: say where (attempt N on nodes)."""
    if job.restarts:
        record_job_event(st, job.job_id, EV_RESTARTED,
                         f"attempt {job.restarts + 1} started on "
                         f"{slurm.compress_hostlist(list(job.nodes))}", now)
