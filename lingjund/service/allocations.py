"""srun and salloc allocations: a job without a batch script that lives as long
as the command that asked for it.

    srun / salloc                      lingjund
    Allocate: spec (batch=false) ───►  submit, then try to start it at once
                             ◄───────  queued(job, reason)   only when it must wait
                             ◄───────  granted(job, env)
        ... steps run through RunStep ...
    release(exit code) ─────────────►  COMPLETED / FAILED with that exit code,
                             ◄───────  ended(state)          its nodes cleaned

Why the stream itself is the lease, not a keep-alive RPC the client repeats:
the kernel closes the sockets of a process that dies, SIGKILL included, so
the controller sees the stream end at once; and the server's gRPC keepalive
pings (transport/server.py) find a client that vanished without closing (a
host that went down) within the keepalive time. Nothing in the client can
forget to beat, and nothing here polls for silence. A stream that ends
without a release means the command is gone: its job is CANCELLED and its
tasks killed, as Slurm does for an srun that stops responding
(InactiveLimit), only sooner.

The one break that is not the client's fault is the controller's own
restart. Then the jobs are kept: a client may take the lease again
(``attach_job_id``); ``sweep_orphans`` ends those that nobody took back
within the heartbeat timeout.

An allocation is ended by its stream, or stopped as any running job is
(``lifecycle.stop``: scancel, its time limit, its deadline, preemption),
which ends it at once; the stream tells the client which (``ended``), so
srun and salloc can say "revoked".
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund import lifecycle
from lingjund.service import authz, batch, errors, jobenv, jobs, scheduling, timers
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.allocations")

RECHECK_S = 2.0   # waiters re-read the job this often even without a jobs_changed


@dataclass(eq=False)
class Lease:
    job_id: int


def _ended(job) -> api_pb2.AllocationEvent:
    return api_pb2.AllocationEvent(ended=api_pb2.AllocationEnded(
        job_id=job.job_id, state=job.state, reason=job.reason))


def _over(job) -> bool:
    return job is None or job.state != slurm.RUNNING or bool(job.kill_reason)


async def allocate(ctl: Controller, requests):
    """Async generator of AllocationEvent for one srun/salloc (see the module doc)."""
    it = requests.__aiter__()
    try:
        first = await it.__anext__()
    except StopAsyncIteration:
        return
    kind = first.WhichOneof("request")
    if kind == "spec":
        if first.spec.batch:
            raise errors.InvalidRequest("An allocation has no batch script (batch must be false)")
        job_id = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=first.spec)).job_id
        # Its client holds the lease from now on: the pass below is awaited,
        # and an orphan sweep meanwhile must not take the new job for one.
        lease = ctl.allocations[job_id] = Lease(job_id)
        # Slurm tries to place an allocation as it is made; only one that cannot
        # start now is "queued and waiting for resources".
        try:
            await scheduling.run_pass_off_loop(ctl)
        except BaseException:
            if ctl.allocations.get(job_id) is lease:
                del ctl.allocations[job_id]
            raise
    elif kind == "attach_job_id":
        job_id = first.attach_job_id
        job = ctl.store.job(job_id)
        if job is None:
            raise errors.InvalidJobId()
        authz.require_owner_or_root(first.requester_uid, job.uid)
        if job.spec.batch or job.state not in (slurm.PENDING, slurm.RUNNING):
            raise errors.AlreadyDone()
    else:
        raise errors.InvalidRequest("The first message must be an allocation request")

    if kind != "spec":
        lease = Lease(job_id)
        old = ctl.allocations.get(job_id)
        ctl.allocations[job_id] = lease
        if old is not None:
            log.info("job=%d: a new client took the allocation's lease", job_id)
    done = False
    reader: asyncio.Future | None = None
    try:
        job = ctl.store.job(job_id)
        waited = False
        while job.state == slurm.PENDING:
            if not waited:
                waited = True
                yield api_pb2.AllocationEvent(queued=api_pb2.AllocationQueued(
                    job_id=job_id, reason=job.reason))
            await ctl.wait_jobs_changed(RECHECK_S)
            job = ctl.store.job(job_id)
        if _over(job):
            done = True
            yield _ended(job)
            return
        log.info("job=%d: allocation granted on %s", job_id, slurm.compress_hostlist(list(job.nodes)))
        yield api_pb2.AllocationEvent(granted=api_pb2.AllocationGranted(
            job=jobs.job_info(ctl, job), waited=waited,
            environment=jobenv.allocation_env(job, ctl.cluster, ctl.address)))
        reader = asyncio.ensure_future(it.__anext__())
        while True:
            changed = asyncio.ensure_future(ctl.wait_jobs_changed(RECHECK_S))
            await asyncio.wait({reader, changed}, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            if reader.done():
                try:
                    msg = reader.result()
                except StopAsyncIteration:
                    msg = None
                if msg is None:
                    break   # the client closed its side without a release: gone
                if msg.WhichOneof("request") == "release":
                    job = release(ctl, job_id, msg.release.exit_code, msg.release.signal)
                    done = True
                    yield _ended(job)
                    return
                reader = asyncio.ensure_future(it.__anext__())
                continue
            job = ctl.store.job(job_id)
            if _over(job):  # stopped: scancel, time limit, deadline, preemption
                done = True
                yield _ended(job)
                return
    finally:
        if reader is not None and not reader.done():
            reader.cancel()
        if ctl.allocations.get(job_id) is lease:
            del ctl.allocations[job_id]
            if not done and not ctl.stopping:
                log.info("job=%d: its srun/salloc went away, ending the allocation", job_id)
                abandon(ctl, job_id)


def release(ctl: Controller, job_id: int, exit_code: int, signal: int):
    """The command is done: COMPLETED, or FAILED with its exit code (sacct's ExitCode)."""
    now = ctl.clock()
    with ctl.store.transaction() as st:
        job = st.job(job_id)
        if _over(job):
            return job
        t = lifecycle.released(job, now, exit_code, signal,
                               grace_s=min(2.0, ctl.config.controller.kill_wait_s),
                               alive=batch.alive(ctl, job))
        batch.commit(st, job, t, now)
        job = st.job(job_id)
    log.info("job=%d: allocation released, %s (exit %d:%d)", job_id, job.state, exit_code, signal)
    batch.send(ctl, [t])
    return job


def abandon(ctl: Controller, job_id: int) -> None:
    """The client is gone: a pending allocation is cancelled, a running one ended
    as CANCELLED and whatever it still runs is killed."""
    now = ctl.clock()
    with ctl.store.transaction() as st:
        job = st.job(job_id)
        t = lifecycle.abandon(job, now, alive=batch.alive(ctl, job)) if job is not None else None
        if t is None:
            return
        batch.commit(st, job, t, now)
    batch.send(ctl, [t])


def sweep_orphans(ctl: Controller, started_at: float) -> None:
    """After a controller restart: allocations whose client has not taken its lease
    back within the heartbeat timeout are abandoned (see the module doc)."""
    now = ctl.clock()
    v = timers.view(ctl, now, jobs=False, orphans=True)
    v = dataclasses.replace(v, limits=dataclasses.replace(v.limits, started_at=started_at))
    for c in lifecycle.orphans(v, now):
        log.warning("job=%d: no client holds the allocation since the restart, ending it", c.job_id)
        abandon(ctl, c.job_id)
