"""SlurmApi servicer: decode, validate sizes, call one service function, map errors.

No scheduling logic here. A ``SlurmError`` becomes its gRPC status (status.py) with
Slurm's message as the details; anything else is a bug, logged with its
traceback and answered INTERNAL without taking the server down.
"""
from __future__ import annotations

import functools
import inspect
import logging
import socket

import grpc

from lingjun import launchers, slurm
from lingjun.v1 import api_pb2, api_pb2_grpc
from lingjund.service import (accounting, allocations, authz, crontab, errors, faulttol, health, jobctl,
                              joboutput, jobs, network, nodes, priority, steps, topology, watch)
from lingjund.service import associations
from lingjund.service.context import Controller
from lingjund.store import store
from lingjund.transport import validate
from lingjund.transport import status

log = logging.getLogger("lingjund.api")

MAX_ENV_ENTRIES = 10_000
MAX_CRONTAB_ENTRIES = 1000       # entries of one user's crontab
MAX_IDS = 100_000


def _check_submit(req: api_pb2.SubmitJobRequest) -> None:
    spec = req.spec
    if not spec.batch:
        # SubmitJob makes batch jobs only (srun and salloc allocate through
        # Allocate, which holds the allocation while its client lives): a
        # client that left `batch` unset but sent a script means a batch job;
        # without a script there is nothing to run, and it is refused.
        if not spec.script:
            raise errors.InvalidRequest("Batch script is empty or lacks #!")
        spec.batch = True
    if len(spec.environment) > MAX_ENV_ENTRIES:
        raise errors.InvalidRequest("Too many environment variables")
    if len(spec.dependency) > 100_000:
        raise errors.InvalidRequest("Job dependency problem")
    if len(req.client_token) > 200:
        raise errors.InvalidRequest("client token is too long")
    for path in (spec.work_dir, spec.stdout_pattern, spec.stderr_pattern, spec.stdin_path):
        if "\0" in path or len(path) > 4096:
            raise errors.InvalidRequest("Invalid path")
    if not spec.work_dir.startswith("/"):
        raise errors.InvalidRequest("The working directory must be an absolute path")
    if (spec.HasField("max_restarts") and spec.max_restarts < 0) or spec.hang_timeout_s < 0:
        raise errors.InvalidRequest("Invalid --max-restarts or --hang-timeout value")
    if spec.launcher and spec.launcher not in launchers.LAUNCHERS:
        raise errors.InvalidRequest(f"Invalid --launcher argument: {spec.launcher}")


def unary(fn):
    @functools.wraps(fn)
    async def wrapper(self, request, context):
        try:
            validate.check(request, self.ctl.config.authz)     # every field bounded
            reply = fn(self, request, context)
            if inspect.isawaitable(reply):
                reply = await reply
            return reply
        except errors.SlurmError as e:
            await status.abort(context, e)
        except grpc.aio.AbortError:
            raise
        except Exception as e:
            if store.is_full(e):
                await _no_space(context, fn.__name__, e)
            log.exception("%s failed", fn.__name__)
            await status.abort_with(context, status.rich_status(
                grpc.StatusCode.INTERNAL, "Unexpected error in lingjund (see its log)", status.INTERNAL))
    return wrapper


async def _no_space(context, what: str, e: BaseException) -> None:
    """The caller sees why (Slurm's words), not only our log, which may sit on
    the same full disk; nothing was written, and the next call may succeed."""
    log.error("%s refused: no space left for the state store (%s); writes resume once space returns",
              what, e)
    err = errors.NoSpace()
    await status.abort(context, err)


def _refused(what: str, e: Exception) -> api_pb2.SubmitJobsResult:
    """One refused job of a batch, in the words and with the Slurm error name
    its own call would have got."""
    if isinstance(e, errors.SlurmError):
        return api_pb2.SubmitJobsResult(error=str(e), reason=status.reason_of(e))
    if store.is_full(e):
        log.error("%s: a job refused: no space left for the state store (%s)", what, e)
        return _refused(what, errors.NoSpace())
    log.error("%s: a job failed", what, exc_info=e)
    return api_pb2.SubmitJobsResult(error="Unexpected error in lingjund (see its log)",
                                    reason=status.INTERNAL)


class SlurmApiServicer(api_pb2_grpc.SlurmApiServicer):
    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.submissions = jobs.GroupCommit(ctl)
        self.watchers = watch.Hub()
        ctl.store.listen_changes(self.watchers.publish)

    @unary
    def SubmitJob(self, request, context):
        _check_submit(request)
        return self.submissions.submit(request)    # answered once its commit is done

    @unary
    async def SubmitJobs(self, request, context):
        """Each job checked and answered alone; one refused never fails the others."""
        results = [None] * len(request.jobs)
        accepted = []
        for i, job in enumerate(request.jobs):
            try:
                _check_submit(job)
            except errors.SlurmError as e:
                results[i] = _refused("SubmitJobs", e)
                continue
            accepted.append(i)
        answers = await self.submissions.submit_many([request.jobs[i] for i in accepted])
        for i, a in zip(accepted, answers):
            results[i] = (api_pb2.SubmitJobsResult(job=a) if isinstance(a, api_pb2.SubmitJobResponse)
                          else _refused("SubmitJobs", a))
        return api_pb2.SubmitJobsResponse(results=results)

    @unary
    def GetJobs(self, request, context):
        if len(request.job_ids) > MAX_IDS:
            raise errors.InvalidRequest("Too many job ids")
        if request.job_fields:
            # squeue: the reply assembled from kept encodings, sent as it is
            # (server.py's serializer passes bytes through)
            return jobs.encoded_jobs(self.ctl, request)
        return jobs.get_jobs(self.ctl, request)

    async def GetAccounting(self, request, context):
        """sacct: pages of history, each read and encoded by a history reader
        process; they are yielded as bytes (the handler's serializer, set in
        server.py, passes them through)."""
        try:
            validate.check(request, self.ctl.config.authz)
            if len(request.job_ids) > MAX_IDS:
                raise errors.InvalidRequest("Too many job ids")
        except errors.SlurmError as e:
            await status.abort(context, e)
        gen = accounting.pages(self.ctl, request)
        try:
            async for page in gen:
                yield page
        except errors.SlurmError as e:
            await status.abort(context, e)
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("GetAccounting failed")
            await status.abort_with(context, status.rich_status(
                grpc.StatusCode.INTERNAL, "Unexpected error in lingjund (see its log)", status.INTERNAL))
        finally:
            await gen.aclose()

    @unary
    def CancelJobs(self, request, context):
        if len(request.job_ids) + sum(len(s.task_ids) for s in request.array_tasks) > MAX_IDS:
            raise errors.InvalidRequest("Too many job ids")
        return jobs.cancel(self.ctl, request)

    @unary
    def UpdateJob(self, request, context):
        if len(request.dependency) > 100_000 or len(request.comment) > 100_000:
            raise errors.InvalidRequest("Request too large")
        jobctl.update_job(self.ctl, request)
        return api_pb2.UpdateJobResponse()

    @unary
    def TopJobs(self, request, context):
        if len(request.job_ids) > MAX_IDS:
            raise errors.InvalidRequest("Too many job ids")
        jobctl.top_jobs(self.ctl, request)
        return api_pb2.UpdateJobResponse()

    @unary
    def GetPriorityFactors(self, request, context):
        return priority.factors_reply(self.ctl, request)

    @unary
    def HoldJobs(self, request, context):
        if len(request.job_ids) > MAX_IDS:
            raise errors.InvalidRequest("Too many job ids")
        return jobctl.hold_jobs(self.ctl, request)

    @unary
    def RequeueJobs(self, request, context):
        if len(request.job_ids) > MAX_IDS:
            raise errors.InvalidRequest("Too many job ids")
        return jobctl.requeue_jobs(self.ctl, request)

    @unary
    def GetNodes(self, request, context):
        return nodes.node_infos(self.ctl, request)

    @unary
    def UpdateNode(self, request, context):
        nodes.update_node(self.ctl, request)
        return api_pb2.UpdateNodeResponse()

    @unary
    def NetReconfigure(self, request, context):
        return network.reconfigure(self.ctl, request)

    @unary
    def GetBatchScript(self, request, context):
        return authz.batch_script(self.ctl, request)

    @unary
    def GetJobEvents(self, request, context):
        return faulttol.get_events(self.ctl, request)

    @unary
    def GetSanityResults(self, request, context):
        return health.sanity_results(self.ctl, request)

    @unary
    def SetCrontab(self, request, context):
        if len(request.entries) > MAX_CRONTAB_ENTRIES or len(request.text) > 1_000_000:
            raise errors.InvalidRequest("crontab too large")
        return crontab.set_crontab(self.ctl, request)

    @unary
    def GetCrontab(self, request, context):
        return crontab.get_crontab(self.ctl, request)

    @unary
    def AcctMgr(self, request, context):
        return associations.acctmgr(self.ctl, request)

    @unary
    def GetAssociations(self, request, context):
        return associations.get_associations(self.ctl, request)

    @unary
    def GetPartitions(self, request, context):
        return nodes.partition_infos(self.ctl, request)

    @unary
    def Ping(self, request, context):
        return api_pb2.PingResponse(cluster=self.ctl.cluster, controller_host=socket.gethostname(),
                                    now=int(self.ctl.clock()), version="lingjun-0.1.0")

    @unary
    def GetConfig(self, request, context):
        c = self.ctl.config
        cc = c.controller
        exempt = int(c.preempt.exempt_time_s)
        return api_pb2.GetConfigResponse(settings={
            "ClusterName": c.cluster_name, "SlurmctldHost": cc.connect_address,
            "SlurmctldPort": cc.listen.rsplit(":", 1)[-1], "StateSaveLocation": cc.state_dir,
            "KillWait": f"{int(cc.kill_wait_s)} sec", "SlurmdTimeout": f"{int(cc.heartbeat_timeout_s)} sec",
            "JobRequeue": str(int(cc.job_requeue)), "EnforcePartLimits": cc.enforce_part_limits,
            "MinJobAge": f"{int(cc.min_job_age_s)} sec",
            "MaxArraySize": str(cc.max_array_size),
            "SchedulerType": "sched/builtin", **priority.config_settings(self.ctl),
            "PreemptType": f"preempt/{c.preempt.type}", "PreemptMode": c.preempt.mode,
            "PreemptExemptTime": f"{exempt // 3600:02d}:{exempt % 3600 // 60:02d}:{exempt % 60:02d}",
            "SelectType": "select/cons_tres", "SLURM_VERSION": "22.05 (lingjun-0.1.0)",
            "SLURM_CONF": c.path or "(defaults)", "MailProg": cc.mail_prog or "(null)",
            # Slurm 22.05's name for no topology is topology/none
            "TopologyPlugin": ("topology/none" if c.topology.plugin == "topology/default"
                               else c.topology.plugin), "TopologyParam": "(null)",
            "AccountingStorageEnforce": ",".join(c.accounting.enforce) or "none",
            "PriorityDecayHalfLife": slurm.format_time_limit(
                slurm.parse_time_limit(c.accounting.priority_decay_half_life), "scontrol"),
            "PriorityUsageResetPeriod": c.accounting.priority_usage_reset_period},
            topology=topology.switches(c.topology.index))

    async def _stream(self, name: str, request, context, gen):
        """A server stream: the request validated, then ``gen``'s messages; a
        SlurmError ends it with its status."""
        await self._valid(request, context)
        try:
            async for msg in gen:
                yield msg
        except errors.SlurmError as e:
            await status.abort(context, e)
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("%s failed", name)
            await status.abort_with(context, status.rich_status(
                grpc.StatusCode.INTERNAL, "Unexpected error in lingjund (see its log)", status.INTERNAL))
        finally:
            await gen.aclose()

    async def _valid(self, request, context) -> None:
        """Abort the call with Slurm's words unless ``request`` is well formed."""
        try:
            validate.check(request, self.ctl.config.authz)
        except errors.SlurmError as e:
            await status.abort(context, e)

    async def _few_ids(self, request, context) -> None:
        if len(request.job_ids) > MAX_IDS or len(request.nodes) > MAX_IDS:
            await status.abort(context, errors.InvalidRequest("Too many job ids"))

    async def WatchJobs(self, request, context):
        """Each committed change of a job after a cursor, as it commits (service/watch.py)."""
        await self._few_ids(request, context)
        async for ev in self._stream("WatchJobs", request, context,
                                     watch.watch(self.ctl, self.watchers, request, jobs=True)):
            yield ev

    async def WatchNodes(self, request, context):
        await self._few_ids(request, context)
        async for ev in self._stream("WatchNodes", request, context,
                                     watch.watch(self.ctl, self.watchers, request, jobs=False)):
            yield ev

    async def AttachStep(self, request, context):
        """sattach: a running step's task output from now on."""
        async for out in self._stream("AttachStep", request, context,
                                      steps.attach(self.ctl, request)):
            yield out

    async def ReadJobOutput(self, request, context):
        """lingjun logs: a job's batch output, from the agent of its batch node."""
        async for chunk in self._stream("ReadJobOutput", request, context,
                                        joboutput.read(self.ctl, request)):
            yield chunk

    async def RunStep(self, request, context):
        await self._valid(request, context)
        gen = steps.run_step(self.ctl, request)
        try:
            async for ev in gen:
                yield ev
        except errors.SlurmError as e:
            await status.abort(context, e)
        except store.StoreFull as e:
            await _no_space(context, "allocation", e)
        finally:
            await gen.aclose()

    async def Allocate(self, request_iterator, context):
        gen = allocations.allocate(self.ctl, validate.each(request_iterator, self.ctl.config.authz))
        try:
            async for ev in gen:
                yield ev
        except errors.SlurmError as e:
            await status.abort(context, e)
        except store.StoreFull as e:
            await _no_space(context, "allocation", e)
        finally:
            await gen.aclose()
