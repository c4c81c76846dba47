"""Changing jobs after submission: update, hold/release, requeue.

One function per operation, one transaction each; a refused change changes
nothing. Who may do what follows Slurm (service/authz.py): a user changes
only their own jobs; an operator (root or ``[authz] operators``) any job. A
hold by an operator is an admin hold (``JobHeldAdmin``) that only an operator
can release; a hold by the owner, or ``uhold``, is a user hold
(``JobHeldUser``). Raising a time limit is an operator's alone.

Requeue, as job_mgr.c does it:

    RUNNING --requeue--> (batch script stopped) --> PENDING, Restarts+1,
                          reason BeginTime until now + requeue_delay_s
    COMPLETED/FAILED/... --requeue--> PENDING at once, the same way
    requeuehold: the same, plus a user hold
"""
from __future__ import annotations

import logging
from dataclasses import replace

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund.sched import dependency
from lingjund.service import authz, batch, errors, priority
from lingjund.service.context import Controller
from lingjund.service.jobs import _validate, validate_dependency
from lingjund import lifecycle
from lingjund.lifecycle import REQUEUE, REQUEUE_HOLD
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.jobctl")

ROOT = 0


def _owned(ctl: Controller, job: JobRecord, uid: int) -> None:
    authz.require(uid, job.uid, ctl.config.authz)


def _operator(ctl: Controller, uid: int) -> bool:
    return authz.is_operator(uid, ctl.config.authz)


# -- scontrol update JobId=... ----------------------------------------------------
# Slurm refuses these once a job runs (ESLURM_JOB_NOT_PENDING); NumNodes too:
# Slurm can shrink a running job, we cannot yet.
_PENDING_ONLY = ("partition", "min_nodes", "max_nodes", "dependency", "begin_time")


def update_job(ctl: Controller, req: api_pb2.UpdateJobRequest) -> None:
    now = ctl.clock()
    with ctl.store.transaction() as st:
        job = st.job(req.job_id)
        if job is None:
            raise errors.InvalidJobId()
        _owned(ctl, job, req.requester_uid)
        if job.state not in (slurm.PENDING, slurm.RUNNING) or job.completing:
            raise errors.AlreadyDone()
        if job.state != slurm.PENDING and any(req.HasField(f) for f in _PENDING_ONLY):
            raise errors.JobNotPending()
        spec = api_pb2.JobSpec()
        spec.CopyFrom(job.spec)
        fields: dict = {}
        if req.HasField("name"):
            fields["name"] = req.name
            spec.name = req.name
        if req.HasField("comment"):
            spec.comment = req.comment
        if req.HasField("time_limit_min"):
            _time_limit(job, req, fields, _operator(ctl, req.requester_uid))
        if req.HasField("partition") or req.HasField("min_nodes") or req.HasField("max_nodes"):
            if req.HasField("partition"):
                spec.partition = req.partition
            if req.HasField("min_nodes"):
                spec.min_nodes = req.min_nodes
                spec.max_nodes = req.max_nodes if req.HasField("max_nodes") else 0
            part, _ = _validate(ctl, spec)
            fields["partition"] = part.name
        if req.HasField("dependency"):
            fields["dependency"] = _dependency(job, req.dependency)
            fields["eligible_time"] = 0.0 if fields["dependency"] else max(job.eligible_time, now)
        if req.HasField("nice"):
            authz.require_nice(req.requester_uid, req.nice, ctl.config.authz)
            fields["priority"] = priority.after_nice(ctl, job, req.nice, now)
            spec.nice = req.nice
        if req.HasField("priority"):
            _priority(ctl, job, req, spec, fields)
        if req.HasField("begin_time"):
            fields["eligible_time"] = float(max(req.begin_time, now))
        if req.HasField("deadline"):
            if req.deadline and req.deadline < now:
                raise errors.InvalidTimeValue()
            spec.deadline = req.deadline
            fields["deadline"] = float(req.deadline)
        st.update_job(job.job_id, spec=spec, **fields)
    log.info("job=%d updated by uid %d: %s", job.job_id, req.requester_uid,
             ", ".join(f.name for f, _ in req.ListFields() if f.name not in ("job_id", "requester_uid")))
    ctl.wake_scheduler()


def _priority(ctl: Controller, job: JobRecord, req: api_pb2.UpdateJobRequest,
              spec: api_pb2.JobSpec, fields: dict) -> None:
    """Priority=N, as job_mgr.c's _update_job: an operator's value is kept for good
    (and Nice goes back to 0); 0 holds the job (an admin hold when an operator
    asks); an owner may not raise it, and a lower value of theirs would not last
    (the plugin recomputes it), so it is refused with Slurm's words and nothing changes."""
    new = req.priority
    if new < 0 or new > 0xFFFFFFFF:
        raise errors.InvalidRequest("Invalid Priority value")
    operator = _operator(ctl, req.requester_uid)
    if job.held:
        if new:
            raise errors.JobHeld()      # held: priority 0 until released
        return
    if new == job.priority and (job.priority_set or not operator):
        return
    if not operator:
        if new > job.priority:
            raise errors.AccessDenied()
        if new:
            raise errors.PriorityResetFail()
    if new == 0:
        if job.state != slurm.PENDING:
            raise errors.JobNotPending()
        fields.update(held=True, hold_admin=operator,
                      reason=slurm.REASON_HELD_ADMIN if operator else slurm.REASON_HELD_USER)
        return
    spec.nice = 0
    fields.update(priority=new, priority_set=True)


def _time_limit(job: JobRecord, req: api_pb2.UpdateJobRequest, fields: dict,
                operator: bool) -> None:
    new = req.time_limit_min
    if new < slurm.UNLIMITED or new == 0:
        raise errors.InvalidTimeLimit()
    old = job.time_limit_min
    raising = old != slurm.UNLIMITED and (new == slurm.UNLIMITED or new > old)
    if raising and not operator:
        raise errors.AccessDenied()
    fields["time_limit_min"] = new
    if job.state == slurm.RUNNING:
        fields["end_time"] = job.start_time + new * 60 if new > 0 else 0.0


def _dependency(job: JobRecord, text: str) -> str:
    left = validate_dependency(text)
    if left and any(t.job_id == job.job_id for t in dependency.parse(left).terms):
        raise errors.DependencyProblem()     # a job cannot wait on itself
    return left


# -- scontrol hold | uhold | release -----------------------------------------------
def hold_jobs(ctl: Controller, req: api_pb2.HoldJobsRequest) -> api_pb2.JobControlResponse:
    results = []
    now = ctl.clock()
    with ctl.store.transaction() as st:
        for job_id in req.job_ids:
            job = st.job(job_id)
            try:
                if job is None:
                    raise errors.InvalidJobId()
                _owned(ctl, job, req.requester_uid)
                if job.state != slurm.PENDING:
                    raise errors.JobNotPending()
                if req.action == api_pb2.HoldJobsRequest.RELEASE:
                    if job.held and job.hold_admin and not _operator(ctl, req.requester_uid):
                        raise errors.AccessDenied()
                    if job.held:
                        # Slurm's release also drops a priority an operator set
                        # (direct_set_prio) and computes the job's again.
                        released = replace(job, held=False, hold_admin=False, priority_set=False,
                                           eligible_time=job.eligible_time
                                           or (0.0 if job.dependency else now))
                        st.update_job(job_id, held=False, hold_admin=False,
                                      reason=slurm.REASON_NONE,
                                      eligible_time=released.eligible_time, priority_set=False,
                                      priority=priority.at_submit(ctl, released, now)
                                      if job.priority_set else job.priority)
                else:
                    root = _operator(ctl, req.requester_uid)
                    if job.held and job.hold_admin and not root:
                        raise errors.AccessDenied()     # only root undoes an admin hold
                    admin = req.action == api_pb2.HoldJobsRequest.HOLD and root
                    st.update_job(job_id, held=True, hold_admin=admin,
                                  reason=slurm.REASON_HELD_ADMIN if admin
                                  else slurm.REASON_HELD_USER)
                results.append(api_pb2.CancelResult(job_id=job_id, ok=True))
            except errors.SlurmError as e:
                results.append(api_pb2.CancelResult(job_id=job_id, ok=False, error=str(e)))
    if any(r.ok for r in results):
        log.info("jobs %s: %s by uid %d", ",".join(str(r.job_id) for r in results if r.ok),
                 api_pb2.HoldJobsRequest.Action.Name(req.action).lower(), req.requester_uid)
        ctl.wake_scheduler()
    return api_pb2.JobControlResponse(results=results)


# -- scontrol top JOBID[,JOBID...] --------------------------------------------------
def top_jobs(ctl: Controller, req: api_pb2.TopJobsRequest) -> None:
    """These pending jobs first among their owner's pending jobs of the same
    partition, account and QOS, as Slurm 22.05's scontrol top does it: the listed
    jobs take the highest priorities of the listed jobs and of the group's jobs
    above them, in the order given (each at least one below the one before); what
    they gained is taken evenly from those jobs above (integer shares, the
    remainder from the last), and each ends below the listed ones (with equal
    priorities it loses a point more); every move is made through the job's nice,
    so the plugin keeps the order and the owner's jobs together gain nothing. Jobs below
    the listed ones and jobs whose priority an operator set are not touched (Slurm
    22.05 also raises the jobs below to just under the listed ones, even a set one:
    not done here). Operators only, unless [scheduler] enable_user_top.

    Example (observed on Slurm 22.05): priorities 11562, 11437, 11275, 11175;
    top of the last two, in that order, gives them 11562 and 11437 (+387, +162),
    and the two jobs that were above lose 549 between them: 274 and 275."""
    operator = _operator(ctl, req.requester_uid)
    if not operator and not ctl.config.scheduler.enable_user_top:
        raise errors.AccessDenied()
    if not req.job_ids:
        raise errors.InvalidJobId()
    with ctl.store.transaction() as st:
        top: list[JobRecord] = []
        for job_id in dict.fromkeys(req.job_ids):
            job = st.job(job_id)
            if job is None:
                raise errors.InvalidJobId()
            if job.state != slurm.PENDING:
                raise errors.JobNotPending()
            if job.held:
                raise errors.JobHeld()
            if job.priority_set:
                raise errors.PriorityResetFail()
            if not operator and job.uid != req.requester_uid:
                raise errors.AccessDenied()
            if top and _group(job) != _group(top[0]):
                raise errors.InvalidJobId()   # one owner, partition, account and QOS
            top.append(job)
        listed = {j.job_id for j in top}
        group = _group(top[0])
        low = min(j.priority for j in top)
        above = sorted((j for j in st.live.jobs.values()
                        if j.state == slurm.PENDING and j.job_id not in listed
                        and not j.held and not j.priority_set and j.priority >= low
                        and _group(j) == group),
                       key=lambda j: (-j.priority, j.submit_time, j.job_id))
        prios = sorted((j.priority for j in (*top, *above)), reverse=True)
        moves: list[tuple[JobRecord, int]] = []
        gained = 0
        last = None
        for job, new in zip(top, prios):
            if last is not None and new >= last and last > 2:
                new = last - 1
            last = new
            gained += new - job.priority
            moves.append((job, new))
        gained = max(0, gained)
        for k, job in enumerate(above):
            share = gained // (len(above) - k)
            gained -= share
            # and below the listed ones whatever the shares (ties: they lose a point)
            moves.append((job, max(1, min(job.priority - share, last - 1))))
        for job, new in moves:
            if new == job.priority:
                continue
            spec = api_pb2.JobSpec()
            spec.CopyFrom(job.spec)
            spec.nice = max(-NICE_MAX, min(NICE_MAX, spec.nice - (new - job.priority)))
            st.update_job(job.job_id, spec=spec, priority=new)
    log.info("jobs %s moved to the top by uid %d", ",".join(str(j.job_id) for j in top),
             req.requester_uid)
    ctl.wake_scheduler()


NICE_MAX = 2147483645        # Slurm's NICE_OFFSET - 3


def _group(job: JobRecord) -> tuple:
    spec = job.spec
    return (job.uid, job.partition, spec.account or job.user, spec.qos or "normal")


# -- scontrol requeue | requeuehold ------------------------------------------------
def requeue_jobs(ctl: Controller, req: api_pb2.RequeueJobsRequest) -> api_pb2.JobControlResponse:
    results = []
    stopping: list[JobRecord] = []
    stops: list[lifecycle.Transition] = []
    now = ctl.clock()
    delay = ctl.config.controller.requeue_delay_s
    with ctl.store.transaction() as st:
        for job_id in req.job_ids:
            job = st.job(job_id)
            try:
                if job is None:
                    raise errors.InvalidJobId()
                _owned(ctl, job, req.requester_uid)
                if not job.spec.batch:
                    raise errors.BatchOnly()
                if job.state == slurm.PENDING:
                    raise errors.JobPending()
                requeue = (job.spec.requeue if job.spec.HasField("requeue")
                           else ctl.config.controller.job_requeue)
                if not requeue:
                    raise errors.Disabled()
                if job.completing or job.kill_reason:
                    raise errors.AlreadyDone()
                if job.state == slurm.RUNNING:
                    t = lifecycle.stop(job, REQUEUE_HOLD if req.hold else REQUEUE, now,
                                       why="requeued", grace_s=ctl.config.controller.kill_wait_s,
                                       alive=batch.alive(ctl, job))
                    stops.append(t)
                    stopping.append(job)
                else:
                    t = lifecycle.requeue(job, now, delay, req.hold)
                batch.commit(st, job, t, now)
                results.append(api_pb2.CancelResult(job_id=job_id, ok=True))
            except errors.SlurmError as e:
                results.append(api_pb2.CancelResult(job_id=job_id, ok=False, error=str(e)))
    for job in stopping:
        log.info("job=%d requeued by uid %d: stopping it", job.job_id, req.requester_uid)
    batch.send(ctl, stops)
    if any(r.ok for r in results):
        ctl.wake_scheduler()
    return api_pb2.JobControlResponse(results=results)
