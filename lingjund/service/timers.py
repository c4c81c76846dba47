"""The lifecycle's timers, carried out: load a view, ask ``lingjund.lifecycle``,
commit its changes in one transaction, then tell the agents.

``view`` gathers what the pure decisions look at (from the store's live
jobs and nodes, the open agent streams, the jobs' last signs of life, the
prologs in progress); ``next_deadline`` is when the scheduler loop must wake
next. ``enforce`` carries out the job timers a scheduling pass starts with
(time limits, --signal warnings, deadlines, the end of preemption grace
times); ``apply`` commits any of the lifecycle's job changes, and is the
one way a timer stops a running job (``lifecycle.Stop``). The node and
hang timers are carried out by the modules that own what they change
(``nodes.check_heartbeats``, ``faulttol.handle_lost_nodes`` and
``check_hangs``, ``health.check_prologs``, ``allocations.sweep_orphans``),
each over the same kind of view.
"""
from __future__ import annotations

import logging

from lingjun import slurm
from lingjun.v1 import agent_pb2
from lingjund import lifecycle
from lingjund.service import batch, quarantine, restarts
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.timers")

# the line a stop leaves in the job's history (lingjun events), by kill reason
EVENT_KINDS = {lifecycle.HANG: restarts.EV_HANG}


def limits(ctl: Controller) -> lifecycle.Limits:
    return lifecycle.Limits(
        heartbeat_timeout_s=ctl.config.controller.heartbeat_timeout_s,
        prolog_timeout_s=ctl.config.sanity.prolog_timeout_s,
        started_at=ctl.started_at,
        grace_s={p.name: p.grace_time_s for p in ctl.partitions()},
        qos_grace_s=({q.name: float(q.grace_time) for q in ctl.store.assoc.qos.values()}
                     if ctl.config.preempt.type == "qos" else None))


def view(ctl: Controller, now: float, *, jobs: bool = True, deadlines: bool = True,
         nodes: bool = False, prologs: bool = False, orphans: bool = False,
         begin: bool = False) -> lifecycle.View:
    """What the lifecycle's decisions look at; only the parts asked for are read
    (``deadlines``: the pending jobs with a --deadline, with ``jobs``)."""
    parts: dict = {}
    if jobs:
        parts.update(holding=tuple(ctl.store.holding_jobs()), activity=dict(ctl.activity),
                     ranks={jid: tuple(r for seen in by_node.values() for r in seen)
                            for jid, by_node in ctl.ranks.items() if by_node})
        if deadlines:
            parts["deadline_pending"] = tuple(j for j in ctl.store.deadline_jobs()
                                              if j.state == slurm.PENDING)
    if nodes:
        streams = {}
        for name in ctl.agents.nodes():
            conn = ctl.agents.get(name)
            if conn is not None:
                streams[name] = conn.last_heartbeat
        parts.update(nodes=ctl.store.nodes(), streams=streams)
    if prologs:
        parts["prologs"] = tuple(lifecycle.Prolog(p.job_id, p.started, tuple(p.waiting))
                                 for p in ctl.prologs.values())
    if orphans:
        parts["orphans"] = tuple(j for j in ctl.store.jobs(states=[slurm.PENDING, slurm.RUNNING])
                                 if not j.spec.batch and j.job_id not in ctl.allocations)
    if begin:
        parts["next_begin"] = ctl.store.next_eligible_time(now)
    return lifecycle.View(limits=limits(ctl), **parts)


def next_deadline(ctl: Controller) -> float | None:
    """The next moment a pass must run: a time limit, a --signal warning, a
    deadline, the end of a grace time, a begin time, a node or job falling
    silent, a prolog's timeout. (The sweep of srun/salloc leases after a
    restart is not timed: the loop runs at least every half heartbeat timeout.)"""
    now = ctl.clock()
    return lifecycle.next_deadline(
        view(ctl, now, nodes=True, prologs=True, begin=True), now)


def enforce(ctl: Controller, now: float) -> None:
    """The job timers due at ``now``: stops, warnings, expired pending jobs."""
    changes = lifecycle.job_timers(view(ctl, now), now)
    if changes:
        apply(ctl, changes, now)


def apply(ctl: Controller, changes: list, now: float) -> None:
    """Commit the job timers' changes in one transaction, then send."""
    stops: list[lifecycle.Transition] = []
    signals: list[lifecycle.Signal] = []
    expired: list[lifecycle.Transition] = []
    with ctl.store.transaction() as st:
        for c in changes:
            if isinstance(c, lifecycle.Stop):
                s = _stop(ctl, st, c, now)
                if s is not None:
                    stops.append(s)
            elif isinstance(c, lifecycle.Signal):
                cur = st.job(c.job_id)
                due = lifecycle.warning_due(cur) if cur is not None else None
                if due is not None and now >= due:
                    st.update_job(c.job_id, warn_signal_sent=True)
                    signals.append(c)
            elif isinstance(c, lifecycle.Expire):
                cur = st.job(c.job_id)
                if cur is not None and cur.state == slurm.PENDING:
                    t = lifecycle.expire(cur, now)
                    batch.commit(st, cur, t, now)
                    expired.append(t)
    for t in expired:
        log.info("job=%d cannot end by its deadline; ended DEADLINE", t.job_id)
    batch.send(ctl, stops)
    for c in signals:
        log.info("job=%d sending warning signal %d, %d s before its time limit%s",
                 c.job_id, c.signal, c.before_s, " (batch shell)" if c.batch_only else "")
        msg = agent_pb2.ControllerMessage(signal_job=agent_pb2.SignalJob(
            job_id=c.job_id, signal=c.signal, batch_only=c.batch_only, step_id=-1,
            steps_only=not c.batch_only))
        for node in c.nodes:
            ctl.agents.send(node, msg)
    if expired:
        ctl.jobs_changed()


def _stop(ctl: Controller, st, c: lifecycle.Stop, now: float) -> lifecycle.Transition | None:
    job = st.job(c.job_id)
    if job is None or not lifecycle.may_stop(job, c.kill_reason):
        return None      # ended, or stopped for something else, since the view
    fields = {}
    if c.kill_reason == slurm.PREEMPTED:
        fields["preempt_killed"] = True
        log.info("job=%d: grace time over, stopping it (preempted by job %d)",
                 job.job_id, job.preempted_by)
    elif c.kill_reason == slurm.TIMEOUT:
        log.info("job=%d reached its time limit of %d min", job.job_id, job.time_limit_min)
    elif c.kill_reason == slurm.DEADLINE:
        log.info("job=%d reached its deadline", job.job_id)
    s = lifecycle.stop(job, c.kill_reason, now, why=c.why,
                       grace_s=ctl.config.controller.kill_wait_s, alive=batch.alive(ctl, job),
                       exit_signal=c.exit_signal, **fields)
    batch.commit(st, job, s, now)
    if c.event:
        restarts.record_job_event(st, job.job_id, EVENT_KINDS.get(c.kill_reason, "stopped"),
                                  c.event, now)
    for node, why in c.suspects:
        quarantine.suspect(ctl, st, node, why, job.job_id, now)
    if c.suspects:
        restarts.avoid(st, job.job_id, [n for n, _ in c.suspects])
    return s
