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

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund.sched import dependency
from lingjund.service import authz, batch, errors
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
            spec.nice = req.nice
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
                        st.update_job(job_id, held=False, hold_admin=False,
                                      reason=slurm.REASON_NONE,
                                      eligible_time=job.eligible_time
                                      or (0.0 if job.dependency else now))
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
