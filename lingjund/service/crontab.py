"""scrontab: each user's crontab of recurring batch jobs, as Slurm 22.05 runs them.

Every entry of a crontab is one job (its JobSpec's ``cron_spec`` holds the
entry's five cron fields or @keyword), pending with BeginTime set to the
entry's next time. When a run ends, however it ends, the same job goes back
to the queue for the next time after its end (``lifecycle.batch_ended``'s
CRON outcome; ``Policy.cron_next`` comes from ``restarts.cron_next``), so an entry never runs
twice at once, and a time missed while a run still went is skipped, not
queued: "if the job scheduled to start at 08:20:00 isn't able to start until
08:20:30 and it runs for 35 seconds then the job at 08:21:00 will be skipped
and the next job will be scheduled for 08:22:00" (scrontab.1). Each run is
an attempt of the job, numbered as a requeue's (``Restarts=``,
``SLURM_RESTART_COUNT``; ``sacct -D`` lists them all, ``sacct`` the last).

``set_crontab`` replaces a user's crontab in one transaction: every entry is
checked as a submission first (nothing changes when one is refused), the
jobs of the old crontab that are pending end CANCELLED, the ones running
finish their run and are not queued again (their ids leave the crontab's
list, which ``restarts.cron_next`` consults), and a job is written for each new
entry. An empty list of entries is ``scrontab -r``. The crontab and its
jobs are in the store, so a restarted controller loses no schedule.
``scancel`` of an entry's job ends it (CANCELLED) and it is not queued again,
as Slurm's scancel disables a cron job.

Times are the controller's local time, as cron's (``lingjun/cron.py``,
croniter).
"""
from __future__ import annotations

import logging
import pwd

from lingjun import slurm
from lingjun.cron import next_time, valid
from lingjun.v1 import api_pb2
from lingjund import lifecycle
from lingjund.service import authz, batch, errors, jobs
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.crontab")

def _owner(ctl: Controller, req) -> str:
    """Whose crontab: the caller's own, or anyone's for an operator (-u)."""
    if not req.user or req.user == req.requester:
        return req.requester
    if not authz.is_operator(req.requester_uid, ctl.config.authz):
        raise errors.AccessDenied()
    try:
        pwd.getpwnam(req.user)
    except KeyError:
        raise errors.InvalidRequest(f"Invalid user: {req.user}") from None
    return req.user


def get_crontab(ctl: Controller, req: api_pb2.GetCrontabRequest) -> api_pb2.GetCrontabResponse:
    user = _owner(ctl, req)
    found = ctl.store.crontab(user)
    if found is None:
        return api_pb2.GetCrontabResponse(found=False)
    return api_pb2.GetCrontabResponse(found=True, text=found[0])


def set_crontab(ctl: Controller, req: api_pb2.SetCrontabRequest) -> api_pb2.SetCrontabResponse:
    user = _owner(ctl, req)
    now = ctl.clock()
    subs = []
    for i, entry in enumerate(req.entries):
        if not valid(entry.cron_spec):
            raise errors.InvalidRequest(f"crontab entry {i + 1}: invalid time specification "
                                        f"{entry.cron_spec!r}")
        spec = api_pb2.JobSpec()
        spec.CopyFrom(entry)
        if spec.user != user:              # an operator's -u: the jobs are the user's
            pw = pwd.getpwnam(user)
            spec.uid, spec.gid, spec.user = pw.pw_uid, pw.pw_gid, user
            spec.group = slurm.account_names(pw.pw_uid, pw.pw_gid)[1]
        spec.begin_time = int(next_time(spec.cron_spec, now))
        sub = jobs.prepare(ctl, api_pb2.SubmitJobRequest(spec=spec))
        if not isinstance(sub, jobs.Submission):
            raise errors.InvalidRequest(f"crontab entry {i + 1}: cannot be submitted")
        if sub.array is not None:
            raise errors.InvalidRequest(f"crontab entry {i + 1}: --array is not allowed in a crontab")
        subs.append(sub)
    grace = ctl.config.controller.kill_wait_s
    ids: list[int] = []
    with ctl.store.transaction() as st:
        old = st.crontab(user)
        for job_id in (old[1] if old else ()):
            job = st.job(job_id)
            if job is not None and job.state == slurm.PENDING:
                t = lifecycle.cancel(job, now, by=req.requester, grace_s=grace)
                if t is not None:
                    batch.commit(st, job, t, now)
        for sub in subs:
            ids.append(jobs._write(ctl, st, sub, now).job_id)
        st.put_crontab(user, req.text if req.entries or req.text.strip() else None, ids)
    log.info("crontab of %s set by %s: %d entries, jobs %s", user, req.requester, len(ids),
             ",".join(map(str, ids)) or "none")
    ctl.wake_scheduler()
    ctl.jobs_changed()
    return api_pb2.SetCrontabResponse(job_ids=ids)
