"""Preemption, carried out: the core names victims, this module stops them.

With ``[preempt] type = "partition_prio"`` (or ``"qos"``) the scheduling pass
runs with the ``preempt/partition_prio`` (``preempt/qos``) plugin
(``lingjund/sched/plugins/preempt.py``), whose plan names victims; with
``[scheduler] lend_idle_quota`` it also names borrowed jobs that a job within
its own limits needs gone (``lingjund/sched/lending.py``), whatever the type.

A victim's PreemptMode (``mode_of``): a borrowed job's is REQUEUE; under
preempt/qos its QOS's (sacctmgr PreemptMode=) unless that is ``cluster``;
else its partition's, else the cluster's ``[preempt] mode``.

For each victim, in one transaction and only while it still runs and
nothing else is stopping it:

    RUNNING --preempt(by J)--> RUNNING, kill_reason PREEMPTED, PreemptTime=now
       |   at once: its --signal as it asked (B: the batch shell, else its
       |   steps), or SIGTERM to its steps without one (Slurm with
       |   preempt_send_user_signal; SIGCONT+SIGTERM otherwise)
       |
       +-- partition GraceTime later, if still running: the usual kill
       |   (SIGTERM, KillWait, SIGKILL; the timer is lingjund/lifecycle.py's,
       |   carried out by timers.enforce at the start of each pass)
       v
    its batch script ends (by itself in the grace time, or killed)
       |-- PreemptMode=REQUEUE and requeueable (--requeue / JobRequeue):
       |      PENDING again, same id, Restarts+1, BeginTime for requeue_delay_s
       |      (as scontrol requeue; batch.record_batch_finished)
       +-- otherwise (CANCEL): PREEMPTED, final

An allocation (srun/salloc, no script) is never requeued: at the end of its
grace time it ends PREEMPTED. ``scancel`` in the grace time wins: the job
ends CANCELLED. A job being preempted is never preempted again (the core
sees it as stopping), and the job it makes room for starts when its nodes
have cleaned up, in a later pass, since the pass that chose the victims
blocked their nodes for it.
"""
from __future__ import annotations

import logging
import signal as signals

from lingjun import slurm
from lingjun.v1 import agent_pb2
from lingjund import lifecycle
from lingjund.sched.plugins import (DEFAULT_PROFILE, PARTITION_PRIO_PROFILE, QOS_PREEMPT_PROFILE,
                                   Profile)
from lingjund.sched.snapshot import Preemption, QosView
from lingjund.service import restarts
from lingjund.service.context import Controller
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.preempt")

REQUEUE, CANCEL, OFF = "REQUEUE", "CANCEL", "OFF"


def profile(ctl: Controller) -> Profile:
    """The scheduling profile for the configured PreemptType."""
    return {"partition_prio": PARTITION_PRIO_PROFILE,
            "qos": QOS_PREEMPT_PROFILE}.get(ctl.config.preempt.type, DEFAULT_PROFILE)


def borrowed(job: JobRecord) -> bool:
    """Runs on quota lent by others (lingjund/sched/lending.py)."""
    return job.state == slurm.RUNNING and job.reason == slurm.REASON_BORROWED


def mode_of(ctl: Controller, job: JobRecord) -> str:
    """The job's PreemptMode (see the module's docstring)."""
    if borrowed(job):
        return REQUEUE
    if ctl.config.preempt.type == "qos":
        q = ctl.store.assoc.qos.get(job.spec.qos or "normal")
        mode = qos_mode(q.preempt_mode) if q is not None else ""
        if mode:
            return mode
    part = ctl.partition(job.partition)
    return ctl.config.preempt_mode(part) if part else OFF


_QOS_VIEWS: dict[int, tuple[int, dict]] = {}


def qos_views(ctl: Controller) -> dict[str, QosView]:
    """What preempt/qos reads of each QOS that preempts or sets a mode, built
    again only when a record changed (``AssocTables.version``)."""
    t = ctl.store.assoc
    hit = _QOS_VIEWS.get(id(t))
    if hit is not None and hit[0] == t.version:
        return hit[1]
    views = {}
    for q in t.qos.values():
        preempt = frozenset(n for n in q.preempt.split(",") if n)
        mode = qos_mode(q.preempt_mode)
        if preempt or mode or q.preempt_exempt_time >= 0:
            views[q.name] = QosView(q.name, preempt, mode, float(q.preempt_exempt_time))
    _QOS_VIEWS.clear()
    _QOS_VIEWS[id(t)] = (t.version, views)
    return views


def qos_mode(stored: str) -> str:
    """A QOS's PreemptMode as the core weighs it: "" for ``cluster`` (its
    partition's), else OFF, CANCEL or REQUEUE."""
    mode = stored.upper()
    return "" if mode in ("", "CLUSTER") else mode


def grace_of(ctl: Controller, job: JobRecord) -> float:
    """Its QOS's GraceTime under preempt/qos (Slurm's), else its partition's."""
    if ctl.config.preempt.type == "qos":
        q = ctl.store.assoc.qos.get(job.spec.qos or slurm.DEFAULT_QOS)
        return float(q.grace_time) if q is not None else 0.0
    part = ctl.partition(job.partition)
    return part.grace_time_s if part else 0.0


def exempt_of(ctl: Controller, job: JobRecord) -> float:
    """PreemptExemptTime: its QOS's when set, under preempt/qos; else the cluster's."""
    if ctl.config.preempt.type == "qos":
        q = ctl.store.assoc.qos.get(job.spec.qos or slurm.DEFAULT_QOS)
        if q is not None and q.preempt_exempt_time >= 0:
            return float(q.preempt_exempt_time)
    return ctl.config.preempt.exempt_time_s


def requeueable(ctl: Controller, job: JobRecord) -> bool:
    if not job.spec.batch:
        return False
    return job.spec.requeue if job.spec.HasField("requeue") else ctl.config.controller.job_requeue


def eligible_time(ctl: Controller, job: JobRecord) -> float:
    """Slurm's PreemptEligibleTime (lifecycle.preempt_eligible_time)."""
    preemptable = (ctl.config.preempt.enabled and mode_of(ctl, job) != OFF) or borrowed(job)
    return lifecycle.preempt_eligible_time(job, preemptable, exempt_of(ctl, job))


def note_preempted(ctl: Controller, job: JobRecord, by: int, requeue: bool, now: float) -> None:
    """One line of the job's history (``lingjun events``)."""
    with ctl.store.transaction() as st:
        restarts.record_job_event(
            st, job.job_id, restarts.EV_PREEMPTED,
            f"preempted by job {by} on {slurm.compress_hostlist(list(job.nodes))}; "
            f"{'requeued' if requeue else 'cancelled'} after {grace_of(ctl, job):.0f} s grace", now)


def preempt(ctl: Controller, preemptions: tuple[Preemption, ...], now: float) -> int:
    """Start preempting the plan's victims; returns how many were taken."""
    if not preemptions:
        return 0
    taken: list[tuple[JobRecord, int, bool]] = []
    with ctl.store.transaction() as st:
        for p in preemptions:
            job = st.job(p.victim)
            if job is None or job.state != slurm.RUNNING or job.kill_reason or job.completing:
                continue   # ended or stopping since the snapshot: nothing to do
            if mode_of(ctl, job) == OFF:
                continue
            requeue = mode_of(ctl, job) == REQUEUE and requeueable(ctl, job)
            st.update_job(job.job_id, **lifecycle.preempt(job, p.by, now, requeue))
            taken.append((job, p.by, requeue))
    for job, by, requeue in taken:
        note_preempted(ctl, job, by, requeue, now)
        _warn(ctl, job)
    if taken:
        ctl.jobs_changed()
    return len(taken)


def _warn(ctl: Controller, job: JobRecord) -> None:
    """The victim's signal, sent once at preemption."""
    spec = job.spec
    if not job.launched and spec.batch:
        return     # its script has not started yet: nothing to warn, the grace end kills it
    sig = spec.signal or int(signals.SIGTERM)
    batch_only = spec.signal_flags == "B" and bool(spec.signal)
    msg = agent_pb2.ControllerMessage(signal_job=agent_pb2.SignalJob(
        job_id=job.job_id, signal=sig, batch_only=batch_only, step_id=-1,
        steps_only=not batch_only))
    for node in ([job.batch_host] if batch_only else job.nodes):
        ctl.agents.send(node, msg)
    log.info("job=%d: signal %d sent to its %s at preemption", job.job_id, sig,
             "batch shell" if batch_only else "steps")
