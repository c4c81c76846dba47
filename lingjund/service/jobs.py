"""Job operations: submit, cancel, read. One function each, one transaction each.

A submission is validated against the partitions and nodes as configured
(never-satisfiable requests are refused at the door, in Slurm's words),
committed, and only then acknowledged. Retrying with the same client token
returns the first job instead of a second one.
"""
from __future__ import annotations

import logging
import math
import signal as signals

from lingjun import slurm
from lingjun.filenames import default_stdout, expand_pattern, resolve_path
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import errors
from lingjund.service.context import Controller
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.jobs")

# priority/basic: the first job gets the highest priority, each later one one less
# (Slurm prints 4294901759 for job 1).
PRIORITY_BASE = 4294901760


def node_capacity(ctl: Controller, name: str) -> tuple[int, int, int] | None:
    """(cpus, memory_mb, gpus) of a node: configured values, else what it reported."""
    cfg = ctl.config.node(name)
    rec = ctl.store.node(name)
    inv = rec.inventory if rec else None
    cpus = (cfg.cpus if cfg and cfg.cpus else 0) or (inv.cpus if inv else 0)
    mem = (cfg.memory_mb if cfg and cfg.memory_mb else 0) or (inv.real_memory_mb if inv else 0)
    gpus = (cfg.gpus if cfg else 0) or (inv.gpus if inv else 0)
    if not cpus:
        return None
    return cpus, mem, gpus


def _validate(ctl: Controller, spec: api_pb2.JobSpec):
    if not spec.script.startswith("#!"):
        raise errors.InvalidRequest("Batch script is empty or lacks #!")
    part = ctl.partition(spec.partition) if spec.partition else ctl.default_partition()
    if part is None:
        raise errors.InvalidPartition()
    for field, value in (("min_nodes", spec.min_nodes), ("max_nodes", spec.max_nodes),
                         ("num_tasks", spec.num_tasks), ("ntasks_per_node", spec.ntasks_per_node),
                         ("cpus_per_task", spec.cpus_per_task), ("gpus_per_node", spec.gpus_per_node)):
        if value < 0 or value > 1_000_000:
            raise errors.InvalidRequest(f"Invalid {field} value {value}")
    if spec.time_limit_min < -1:
        raise errors.InvalidTimeLimit()
    nodes = ctl.partition_nodes(part)
    min_nodes = spec.min_nodes or 1
    if spec.num_tasks and not spec.min_nodes and spec.ntasks_per_node:
        min_nodes = math.ceil(spec.num_tasks / spec.ntasks_per_node)
    if spec.max_nodes and spec.max_nodes < min_nodes:
        raise errors.NodeConfigUnavailable()
    caps = [c for c in (node_capacity(ctl, n) for n in nodes) if c]
    over = _over_partition_limits(spec, part, min_nodes, nodes, caps)
    if over is not None and ctl.config.controller.enforce_part_limits != "NO":
        raise over
    if caps:
        # The shape of one node's share must exist somewhere: that no amount of
        # waiting cures, whatever EnforcePartLimits says. How many such nodes
        # the partition has is a partition limit (above).
        cpt = spec.cpus_per_task or 1
        max_nodes = spec.max_nodes or min_nodes
        if spec.num_tasks and not spec.min_nodes:
            max_nodes = spec.num_tasks  # -n alone: as many nodes as it takes
        if spec.ntasks_per_node:
            per_node_tasks = spec.ntasks_per_node
        elif spec.num_tasks:
            per_node_tasks = math.ceil(spec.num_tasks / max_nodes)
        else:
            per_node_tasks = 1
        fitting = [c for c in caps
                   if per_node_tasks * cpt <= c[0]
                   and (not spec.HasField("mem_per_node_mb") or spec.mem_per_node_mb <= c[1])
                   and spec.gpus_per_node <= c[2]]
        if len(fitting) < min(min_nodes, len(caps)):
            raise errors.NodeConfigUnavailable()
        if over is None and spec.num_tasks and \
                spec.num_tasks * cpt > sum(sorted((c[0] for c in fitting), reverse=True)[:max_nodes]):
            raise errors.NodeConfigUnavailable()
    return part, min_nodes


def _over_partition_limits(spec: api_pb2.JobSpec, part, min_nodes: int, nodes: list[str],
                           caps: list[tuple[int, int, int]]) -> errors.SlurmError | None:
    """The partition limit ``spec`` breaks, as the error EnforcePartLimits=ANY/ALL raises.

    With Slurm's default NO the job is accepted and pends; the scheduling core
    gives the same limit as its reason, checked in this order: PartitionConfig
    for more CPUs than the partition has, PartitionNodeLimit for nodes,
    PartitionTimeLimit for time.
    """
    cpus = (spec.num_tasks or 1) * (spec.cpus_per_task or 1)
    if caps and cpus > sum(c[0] for c in caps):
        return errors.TooManyCpus()
    most = len(nodes) if part.max_nodes == -1 else min(len(nodes), part.max_nodes)
    if nodes and min_nodes > most:
        return errors.InvalidNodeCount()
    if spec.max_nodes and spec.max_nodes < part.min_nodes:
        return errors.InvalidNodeCount()
    if (spec.time_limit_min > 0 and part.max_time_min != -1
            and spec.time_limit_min > part.max_time_min):
        return errors.InvalidTimeLimit()
    return None


def effective_time_limit(spec: api_pb2.JobSpec, part) -> int:
    if spec.time_limit_min:
        return spec.time_limit_min
    if part.default_time_min != -1:
        return part.default_time_min
    return part.max_time_min


def submit(ctl: Controller, request: api_pb2.SubmitJobRequest) -> api_pb2.SubmitJobResponse:
    spec = request.spec
    token = request.client_token or None
    if token:
        earlier = ctl.store.job_by_token(token)
        if earlier is not None:
            return api_pb2.SubmitJobResponse(job_id=earlier.job_id, duplicate=True, cluster=ctl.cluster)
    part, min_nodes = _validate(ctl, spec)
    if request.test_only:
        return api_pb2.SubmitJobResponse(job_id=0, cluster=ctl.cluster)
    now = ctl.clock()
    name = spec.name or "sbatch"
    with ctl.store.transaction() as st:
        earlier = st.job_by_token(token) if token else None
        if earlier is not None:
            return api_pb2.SubmitJobResponse(job_id=earlier.job_id, duplicate=True, cluster=ctl.cluster)
        job_id = st.insert_job(
            client_token=token, name=name, user=spec.user or str(spec.uid), uid=spec.uid,
            partition=part.name, state=slurm.PENDING, reason=slurm.REASON_NONE, priority=0,
            submit_time=now, eligible_time=now, time_limit_min=effective_time_limit(spec, part),
            exclusive=spec.exclusive, held=spec.hold, spec=spec)
        out = spec.stdout_pattern or default_stdout(False)
        err = spec.stderr_pattern or out
        subst = dict(job_id=job_id, job_name=name, user=spec.user)
        st.update_job(job_id, priority=max(PRIORITY_BASE - job_id, 1),
                      reason=slurm.REASON_HELD_USER if spec.hold else slurm.REASON_NONE,
                      stdout_path=resolve_path(expand_pattern(out, **subst), spec.work_dir),
                      stderr_path=resolve_path(expand_pattern(err, **subst), spec.work_dir))
    log.info("job=%d submitted by %s: %s, %d node(s), partition %s",
             job_id, spec.user, name, min_nodes, part.name)
    ctl.wake_scheduler()
    return api_pb2.SubmitJobResponse(job_id=job_id, cluster=ctl.cluster)


def terminate_on_nodes(ctl: Controller, job: JobRecord, reason: str) -> None:
    msg = agent_pb2.ControllerMessage(terminate_job=agent_pb2.TerminateJob(
        job_id=job.job_id, grace_s=ctl.config.controller.kill_wait_s, reason=reason))
    for node in job.nodes:
        ctl.agents.send(node, msg)


def _matches(job: JobRecord, req: api_pb2.CancelJobsRequest) -> bool:
    if req.user and job.user != req.user:
        return False
    if req.name and job.name != req.name:
        return False
    if req.partitions and job.partition not in req.partitions:
        return False
    if req.states and job.state not in req.states:
        return False
    return True


def cancel(ctl: Controller, req: api_pb2.CancelJobsRequest) -> api_pb2.CancelJobsResponse:
    results: list[api_pb2.CancelResult] = []
    if req.signal and req.signal not in signals.valid_signals():
        raise errors.InvalidRequest(f"Invalid signal {req.signal}")
    if req.job_ids:
        found = {j.job_id: j for j in ctl.store.jobs(job_ids=req.job_ids)}
        targets = []
        for jid in req.job_ids:
            job = found.get(jid)
            if job is None:
                results.append(api_pb2.CancelResult(job_id=jid, ok=False,
                                                    error=errors.InvalidJobId.message))
            elif _matches(job, req):
                targets.append(job)
    else:
        if not (req.user or req.name or req.partitions or req.states):
            raise errors.InvalidRequest("No job identification provided")
        targets = [j for j in ctl.store.jobs(states=slurm.ACTIVE_STATES) if _matches(j, req)]
    now = ctl.clock()
    to_terminate: list[JobRecord] = []
    to_signal: list[JobRecord] = []
    with ctl.store.transaction() as st:
        for job in targets:
            job = st.job(job.job_id)
            if job.state == slurm.PENDING:
                if req.signal:
                    results.append(api_pb2.CancelResult(job_id=job.job_id, ok=False,
                                                        error="Job is pending execution"))
                    continue
                st.update_job(job.job_id, state=slurm.CANCELLED, end_time=now, start_time=now,
                              cancelled_by=str(req.requester_uid))
                results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))
            elif job.state == slurm.RUNNING and req.signal:
                to_signal.append(job)
                results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))
            elif job.state == slurm.RUNNING:
                if not job.kill_reason:
                    st.update_job(job.job_id, kill_reason=slurm.CANCELLED,
                                  cancelled_by=str(req.requester_uid))
                to_terminate.append(job)
                results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))
            else:
                results.append(api_pb2.CancelResult(job_id=job.job_id, ok=False,
                                                    error=errors.AlreadyDone.message))
    for job in to_terminate:
        log.info("job=%d cancelled by uid %d", job.job_id, req.requester_uid)
        terminate_on_nodes(ctl, job, "cancelled")
    for job in to_signal:
        msg = agent_pb2.ControllerMessage(signal_job=agent_pb2.SignalJob(
            job_id=job.job_id, signal=req.signal, batch_only=req.batch_only, step_id=-1))
        for node in ([job.batch_host] if req.batch_only else job.nodes):
            ctl.agents.send(node, msg)
    if any(r.ok for r in results):
        ctl.wake_scheduler()
    return api_pb2.CancelJobsResponse(results=results)


# -- reading -----------------------------------------------------------------------
def _pending_node_count(ctl: Controller, job: JobRecord) -> int:
    """Nodes a job not yet placed will need, as Slurm estimates them for squeue.

    ``-n`` without ``-N`` counts the nodes its CPUs fill on the partition's
    largest node (``-n 9`` on 2-CPU nodes: 5, golden squeue_O_fields).
    """
    spec = job.spec
    if spec.min_nodes or not spec.num_tasks:
        return spec.min_nodes or 1
    part = ctl.partition(job.partition)
    caps = [c for c in (node_capacity(ctl, n) for n in ctl.partition_nodes(part))] if part else []
    biggest = max((c[0] for c in caps if c), default=0)
    if not biggest:
        return 1
    return max(1, math.ceil(spec.num_tasks * (spec.cpus_per_task or 1) / biggest))


def job_info(ctl: Controller, job: JobRecord, steps=None, now: float | None = None) -> api_pb2.JobInfo:
    spec = job.spec
    state = job.state
    if job.completing:
        state = slurm.COMPLETING
    cpn = job.cpus_per_node
    info = api_pb2.JobInfo(
        job_id=job.job_id, name=job.name, user=job.user, uid=job.uid, gid=spec.gid,
        group=spec.group or str(spec.gid), state=state, reason=job.reason,
        partition=job.partition,
        num_nodes=len(job.nodes) if job.nodes else _pending_node_count(ctl, job),
        # 0 when -N was not given: scontrol shows NumNodes=1, not 1-1, as Slurm does
        max_nodes=spec.max_nodes,
        num_cpus=sum(cpn) if cpn else max(spec.num_tasks, spec.min_nodes or 1) * (spec.cpus_per_task or 1),
        num_tasks=sum(job.tasks_per_node) if job.tasks_per_node else (spec.num_tasks or (spec.min_nodes or 1) * (spec.ntasks_per_node or 1)),
        cpus_per_task=spec.cpus_per_task or 1, ntasks_per_node=spec.ntasks_per_node,
        mem_per_node_mb=spec.mem_per_node_mb if spec.HasField("mem_per_node_mb") else -1,
        gpus_per_node=spec.gpus_per_node, gpus=spec.gpus,
        time_limit_min=job.time_limit_min, submit_time=int(job.submit_time),
        eligible_time=int(job.eligible_time), start_time=int(job.start_time),
        end_time=int(job.end_time),
        nodes=slurm.compress_hostlist(list(job.nodes)) if job.nodes else "",
        node_names=list(job.nodes), batch_host=job.batch_host,
        exit_code=job.exit_code, exit_signal=job.exit_signal,
        work_dir=spec.work_dir, stdout_path=job.stdout_path, stderr_path=job.stderr_path,
        stdin_path=spec.stdin_path or "/dev/null", command=spec.command,
        priority=0 if job.held else job.priority, restarts=job.restarts,
        requeue=spec.requeue if spec.HasField("requeue") else ctl.config.controller.job_requeue,
        exclusive=job.exclusive, comment=spec.comment, account=spec.account or job.user,
        qos=spec.qos or "normal", batch=spec.batch, submit_host=spec.submit_host,
        cancelled_by=job.cancelled_by, cpus_per_node=cpn[0] if cpn else 0,
        now=int(now if now is not None else ctl.clock()), nice=spec.nice, hold=job.held)
    derived_code, derived_sig = 0, 0
    # sacct lists ID.batch before ID.0 even though the batch step ends last (golden sacct_steps).
    for s in sorted(steps or (), key=lambda s: s.step_id != "batch"):
        info.steps.append(api_pb2.StepInfo(
            step_id=s.step_id, name=s.name, state=s.state, exit_code=s.exit_code,
            exit_signal=s.exit_signal, nodes=slurm.compress_hostlist(list(s.nodes)),
            num_tasks=s.num_tasks, num_cpus=s.num_cpus, start_time=int(s.start_time),
            end_time=int(s.end_time), max_rss_kb=s.max_rss_kb))
        if s.step_id != "batch" and s.exit_code > derived_code:
            derived_code, derived_sig = s.exit_code, s.exit_signal
    info.derived_exit_code, info.derived_exit_signal = derived_code, derived_sig
    return info


def get_jobs(ctl: Controller, req: api_pb2.GetJobsRequest, accounting: bool = False) -> api_pb2.GetJobsResponse:
    now = ctl.clock()
    st = ctl.store
    if req.job_ids:
        jobs = st.jobs(job_ids=req.job_ids)
        if not jobs:
            raise errors.InvalidJobId()
    elif accounting or req.all_states or req.states:
        jobs = st.jobs() if accounting else st.jobs(ended_after=now - ctl.config.controller.min_job_age_s)
    else:
        jobs = st.jobs(ended_after=now - ctl.config.controller.min_job_age_s)
        jobs = [j for j in jobs if j.state in slurm.ACTIVE_STATES or j.completing]
    def keep(j: JobRecord) -> bool:
        if req.users and j.user not in req.users and str(j.uid) not in req.users:
            return False
        if req.partitions and j.partition not in req.partitions:
            return False
        if req.names and j.name not in req.names:
            return False
        if req.states:
            shown = slurm.COMPLETING if j.completing else j.state
            if shown not in req.states and j.state not in req.states:
                return False
        return True
    jobs = [j for j in jobs if keep(j)]
    steps = st.steps([j.job_id for j in jobs]) if (req.with_steps or accounting) else {}
    return api_pb2.GetJobsResponse(
        jobs=[job_info(ctl, j, steps.get(j.job_id), now) for j in jobs], now=int(now))
