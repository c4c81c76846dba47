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
from lingjund.sched import dependency
from lingjund.service import authz, batch, errors, faulttol, preemption
from lingjund.service.context import Controller
from lingjund.service.views import (build_snapshot, gpus_per_node, job_request,  # noqa: F401
                                    node_capacity, node_features, node_gpu_type)
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.jobs")

# priority/basic: the first job gets the highest priority, each later one one less
# (Slurm prints 4294901759 for job 1).
PRIORITY_BASE = 4294901760


def _hostlist(expr: str) -> list[str]:
    try:
        return slurm.expand_hostlist(expr)
    except ValueError:
        raise errors.InvalidNodeName() from None


def _placement_nodes(ctl: Controller, spec: api_pb2.JobSpec, nodes: list[str]) -> list[str]:
    """The partition's nodes this job may use at all (-w/-x/-C/GPU type), refusing
    what no node of the cluster can give in Slurm's words (an unknown node, a
    feature or GPU type no node has), and what this partition cannot."""
    known = set(ctl.known_nodes())
    required = _hostlist(spec.req_nodes) if spec.req_nodes else []
    excluded = set(_hostlist(spec.exc_nodes)) if spec.exc_nodes else set()
    if any(n not in known for n in required) or any(n not in known for n in excluded):
        raise errors.InvalidNodeName()
    if spec.constraint:
        try:
            wanted = slurm.constraint_features(spec.constraint)
        except ValueError:
            raise errors.InvalidFeature() from None
        have = {f for n in known for f in node_features(ctl, n)}
        if any(f not in have for f in wanted):
            raise errors.InvalidFeature()
    if spec.gpu_type and not any(node_gpu_type(ctl, n) == spec.gpu_type for n in known):
        raise errors.InvalidGres()
    if any(n not in nodes or n in excluded for n in required):
        raise errors.NodeConfigUnavailable()
    usable = [n for n in nodes if n not in excluded
              and (not spec.constraint or slurm.constraint_matches(spec.constraint,
                                                                   node_features(ctl, n)))
              and (not spec.gpu_type or node_gpu_type(ctl, n) == spec.gpu_type)]
    if any(n not in usable for n in required):
        raise errors.NodeConfigUnavailable()
    return usable


def _validate(ctl: Controller, spec: api_pb2.JobSpec):
    if spec.batch and not spec.script.startswith("#!"):
        raise errors.InvalidRequest("Batch script is empty or lacks #!")
    part = ctl.partition(spec.partition) if spec.partition else ctl.default_partition()
    if part is None:
        raise errors.InvalidPartition()
    if spec.signal and not 0 < spec.signal < 65536:
        raise errors.InvalidRequest(f"Invalid signal {spec.signal}")
    for field, value in (("min_nodes", spec.min_nodes), ("max_nodes", spec.max_nodes),
                         ("num_tasks", spec.num_tasks), ("ntasks_per_node", spec.ntasks_per_node),
                         ("cpus_per_task", spec.cpus_per_task), ("gpus_per_node", spec.gpus_per_node)):
        if value < 0 or value > 1_000_000:
            raise errors.InvalidRequest(f"Invalid {field} value {value}")
    if spec.time_limit_min < -1:
        raise errors.InvalidTimeLimit()
    nodes = _placement_nodes(ctl, spec, ctl.partition_nodes(part))
    # -w nodes count toward -N, as in Slurm.
    min_nodes = max(spec.min_nodes or 1, len(_hostlist(spec.req_nodes)) if spec.req_nodes else 0)
    if spec.num_tasks and not spec.min_nodes and spec.ntasks_per_node:
        min_nodes = max(min_nodes, math.ceil(spec.num_tasks / spec.ntasks_per_node))
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
        mem_per_cpu = spec.mem_per_cpu_mb if spec.HasField("mem_per_cpu_mb") else 0
        fitting = [c for c in caps
                   if per_node_tasks * cpt <= c[0]
                   and (not spec.HasField("mem_per_node_mb") or spec.mem_per_node_mb <= c[1])
                   and per_node_tasks * cpt * mem_per_cpu <= c[1]
                   and gpus_per_node(spec, min_nodes) <= c[2]]
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


def _array_spec(ctl: Controller, spec: api_pb2.JobSpec) -> slurm.ArraySpec | None:
    """--array checked against MaxArraySize, before anything is created."""
    if not spec.array:
        return None
    if not spec.batch:
        raise errors.InvalidArraySpec()
    try:
        return slurm.parse_array_spec(spec.array, ctl.config.controller.max_array_size)
    except ValueError:
        raise errors.InvalidArraySpec() from None


def output_paths(spec: api_pb2.JobSpec, job_id: int, name: str, array_job_id: int = 0,
                 array_task_id: int = -1) -> dict[str, str]:
    """stdout_path/stderr_path with what is known: an array's meta record shows
    %a as 4294967294 (NO_VAL), as Slurm's scontrol does; a task, its index."""
    out = spec.stdout_pattern or default_stdout(bool(array_job_id))
    err = spec.stderr_pattern or out
    subst = dict(job_id=job_id, job_name=name, user=spec.user, array_job_id=array_job_id,
                 array_task_id=array_task_id if array_task_id >= 0 else None)
    return {"stdout_path": resolve_path(expand_pattern(out, **subst), spec.work_dir),
            "stderr_path": resolve_path(expand_pattern(err, **subst), spec.work_dir)}


def split_task(st, meta: JobRecord, task_id: int, **fields) -> int:
    """Take task ``task_id`` out of ``meta``'s pending remainder into a row of its
    own (Slurm's job_array_split): a new job id, unless it is the last task
    left, when the meta record itself becomes that task and keeps the array's
    id. Returns the task's job id; the caller's transaction commits both rows."""
    left = [t for t in slurm.unfold_indices(meta.array_task_str) if t != task_id]
    if not left:
        paths = output_paths(meta.spec, meta.job_id, meta.name, meta.array_job_id, task_id)
        st.update_job(meta.job_id, array_task_id=task_id, array_task_str="", **paths, **fields)
        return meta.job_id
    job_id = st.split_array_task(meta, task_id, **fields)
    st.update_job(job_id, **output_paths(meta.spec, job_id, meta.name, meta.array_job_id, task_id))
    st.update_job(meta.job_id, array_task_str=slurm.fold_indices(left))
    return job_id


def validate_dependency(text: str) -> str:
    """The dependency as the store keeps it, or Slurm's "Job dependency problem"."""
    if not text.strip():
        return ""
    try:
        return dependency.parse(text).text()
    except ValueError:
        raise errors.DependencyProblem() from None


def initial_eligible_time(spec: api_pb2.JobSpec, dep_text: str, now: float) -> float:
    """--begin when given; else now, unless a hold or a dependency keeps the
    job from being eligible at all yet (Slurm shows EligibleTime=Unknown)."""
    if spec.begin_time:
        return max(float(spec.begin_time), now)
    return 0.0 if (spec.hold or dep_text) else now


def submit(ctl: Controller, request: api_pb2.SubmitJobRequest) -> api_pb2.SubmitJobResponse:
    spec = request.spec
    token = request.client_token or None
    if token:
        earlier = ctl.store.job_by_token(token)
        if earlier is not None:
            return api_pb2.SubmitJobResponse(job_id=earlier.job_id, duplicate=True, cluster=ctl.cluster)
    authz.require_nice(spec.uid, spec.nice, ctl.config.authz)   # spec.uid: the caller's, by authn
    part, min_nodes = _validate(ctl, spec)
    array = _array_spec(ctl, spec)
    dep_text = validate_dependency(spec.dependency)
    if spec.deadline and (spec.deadline < ctl.clock()
                          or (spec.begin_time and spec.begin_time > spec.deadline)):
        raise errors.InvalidTimeValue()
    if request.test_only:
        return _will_run(ctl, spec, part)
    now = ctl.clock()
    name = spec.name or "sbatch"
    with ctl.store.transaction() as st:
        earlier = st.job_by_token(token) if token else None
        if earlier is not None:
            return api_pb2.SubmitJobResponse(job_id=earlier.job_id, duplicate=True, cluster=ctl.cluster)
        authz.check_submit_limit(ctl, st, spec.uid, len(array.indices) if array else 1)
        job_id = st.insert_job(
            client_token=token, name=name, user=spec.user or str(spec.uid), uid=spec.uid,
            partition=part.name, state=slurm.PENDING, reason=slurm.REASON_NONE, priority=0,
            submit_time=now, eligible_time=initial_eligible_time(spec, dep_text, now),
            time_limit_min=effective_time_limit(spec, part),
            exclusive=spec.exclusive, held=spec.hold, spec=spec, dependency=dep_text,
            deadline=float(spec.deadline))
        array_fields = {}
        if array is not None:
            # One row for the whole array (Slurm's meta record): the tasks are
            # split off into rows of their own only as they start. A lone task
            # is that task from the start.
            lone = len(array.indices) == 1
            array_fields = dict(
                array_job_id=job_id, array_task_id=array.indices[0] if lone else -1,
                array_task_str="" if lone else slurm.fold_indices(array.indices),
                array_max_running=array.max_running)
        st.update_job(job_id, priority=max(PRIORITY_BASE - job_id, 1),
                      reason=slurm.REASON_HELD_USER if spec.hold else slurm.REASON_NONE,
                      **output_paths(spec, job_id, name, array_fields.get("array_job_id", 0),
                                     array_fields.get("array_task_id", -1)),
                      **array_fields)
    log.info("job=%d submitted by %s: %s, %d node(s), partition %s%s",
             job_id, spec.user, name, min_nodes, part.name,
             f", array {spec.array}" if array is not None else "")
    ctl.wake_scheduler()
    return api_pb2.SubmitJobResponse(job_id=job_id, cluster=ctl.cluster)


def _will_run(ctl: Controller, spec: api_pb2.JobSpec, part) -> api_pb2.SubmitJobResponse:
    """--test-only: where and when the scheduling core would start this job; submits nothing."""
    from lingjund.sched.estimate import estimate_start
    now = ctl.clock()
    job_id = ctl.store.next_job_id()
    request = job_request(job_id, spec, part.name, priority=0, submit_time=now,
                          time_limit_min=effective_time_limit(spec, part), exclusive=spec.exclusive,
                          held=False, begin_time=now)
    found = estimate_start(build_snapshot(ctl, now), request, now)
    if found is None:
        raise errors.NodeConfigUnavailable()
    when, start = found
    return api_pb2.SubmitJobResponse(
        job_id=job_id, cluster=ctl.cluster, test_start_time=int(when),
        test_cpus=sum(start.cpus_per_node), test_nodes=slurm.compress_hostlist(list(start.nodes)),
        test_partition=part.name)


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
    """Cancel (or signal) jobs by id, by array task, or by filter; one answer per job.

    An id naming an array takes every task of it, pending and running. A
    pending task named alone ("scancel 12_2") is split off the array into a
    row of its own and recorded CANCELLED, as Slurm does; the rest stay pending.
    """
    results: list[api_pb2.CancelResult] = []
    if req.signal and req.signal not in signals.valid_signals():
        raise errors.InvalidRequest(f"Invalid signal {req.signal}")
    targets: list[JobRecord] = []
    if req.job_ids:
        found = ctl.store.jobs(job_ids=req.job_ids, with_array_tasks=True)
        for jid in req.job_ids:
            named = [j for j in found if jid in (j.job_id, j.array_job_id)]
            if not named:
                results.append(api_pb2.CancelResult(job_id=jid, ok=False,
                                                    error=errors.InvalidJobId.message))
            targets += [j for j in named if _matches(j, req)]
    elif not req.array_tasks:
        if not (req.user or req.name or req.partitions or req.states):
            raise errors.InvalidRequest("No job identification provided")
        targets = [j for j in ctl.store.jobs(states=slurm.ACTIVE_STATES) if _matches(j, req)]
    now = ctl.clock()
    stops: list[batch.Stop] = []
    to_signal: list[JobRecord] = []
    done: set[int] = set()

    def cancel_row(st, job: JobRecord) -> None:
        if job.job_id in done:      # "scancel 12 12_1" answers once per job
            return
        done.add(job.job_id)
        if not authz.allowed(req.requester_uid, job.uid, ctl.config.authz):
            # Slurm's job_signal(): the owner or an operator only
            log.warning("job=%d: cancel refused to uid %d (owner uid %d)",
                        job.job_id, req.requester_uid, job.uid)
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=False,
                                                error=errors.AccessDenied.message))
            return
        if job.state == slurm.PENDING:
            if req.signal:
                results.append(api_pb2.CancelResult(job_id=job.job_id, ok=False,
                                                    error="Job is pending execution"))
                return
            st.update_job(job.job_id, state=slurm.CANCELLED, end_time=now, start_time=now,
                          cancelled_by=str(req.requester_uid))
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))
        elif job.state == slurm.RUNNING and req.signal:
            to_signal.append(job)
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))
        elif job.state == slurm.RUNNING:
            if not job.kill_reason or job.kill_reason == slurm.PREEMPTED:  # scancel beats preemption
                stops.append(batch.stop_running(ctl, st, job, slurm.CANCELLED, now, "cancelled",
                                                exit_signal=int(signals.SIGTERM),
                                                cancelled_by=str(req.requester_uid)))
            else:   # already being stopped: tell its nodes again
                stops.append(batch.Stop(job.job_id, tuple(job.nodes),
                                        ctl.config.controller.kill_wait_s, "cancelled"))
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))
        else:
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=False,
                                                error=errors.AlreadyDone.message))

    with ctl.store.transaction() as st:
        for job in targets:
            cancel_row(st, st.job(job.job_id))
        for sel in req.array_tasks:
            _cancel_array_tasks(st, req, sel.array_job_id, sel.task_ids, now, results, cancel_row,
                                ctl.config.authz)
    for s in stops:
        log.info("job=%d%s cancelled by uid %d", s.job_id, " (allocation)" if s.ended else "",
                 req.requester_uid)
    batch.send_stops(ctl, stops)
    for job in to_signal:
        msg = agent_pb2.ControllerMessage(signal_job=agent_pb2.SignalJob(
            job_id=job.job_id, signal=req.signal, batch_only=req.batch_only, step_id=-1))
        for node in ([job.batch_host] if req.batch_only else job.nodes):
            ctl.agents.send(node, msg)
    if any(r.ok for r in results):
        ctl.wake_scheduler()
        ctl.jobs_changed()
    return api_pb2.CancelJobsResponse(results=results)


def _cancel_array_tasks(st, req: api_pb2.CancelJobsRequest, array_job_id: int, tasks,
                        now: float, results: list, cancel_row, authz_cfg) -> None:
    """scancel "A_T" / "A_[1-3]": each task's own row, or split off the pending remainder.

    Naming every task still pending cancels the remainder as one row (as
    "scancel A" would), so "scancel 12_[1-10000]" costs one update, not 10,000.
    """
    rows = [r for r in st.array_jobs(array_job_id) if _matches(r, req)]
    own = {r.array_task_id: r for r in rows if r.array_task_id >= 0}
    meta = next((r for r in rows if r.job_id == array_job_id and r.array_task_str
                 and r.state == slurm.PENDING), None)
    pending = set(slurm.unfold_indices(meta.array_task_str)) if meta else set()
    split: list[int] = []
    for task in sorted(set(tasks)):
        if task in own:
            cancel_row(st, own[task])
        elif task in pending:
            split.append(task)
        else:
            results.append(api_pb2.CancelResult(job_id=array_job_id, ok=False,
                                                array_id=f"{array_job_id}_{task}",
                                                error=errors.InvalidJobId.message))
    if not split:
        return
    if not authz.allowed(req.requester_uid, meta.uid, authz_cfg):
        results.extend(api_pb2.CancelResult(job_id=array_job_id, ok=False,
                                            array_id=f"{array_job_id}_{t}",
                                            error=errors.AccessDenied.message) for t in split)
        return
    if req.signal:
        results.append(api_pb2.CancelResult(job_id=array_job_id, ok=False,
                                            array_id=f"{array_job_id}_{split[0]}",
                                            error="Job is pending execution"))
        return
    if set(split) == pending:
        cancel_row(st, meta)
        return
    cancelled = dict(state=slurm.CANCELLED, start_time=now, end_time=now,
                     cancelled_by=str(req.requester_uid))
    for task in split:
        job_id = st.split_array_task(meta, task, **cancelled)
        st.update_job(job_id, **output_paths(meta.spec, job_id, meta.name, array_job_id, task))
        results.append(api_pb2.CancelResult(job_id=job_id, ok=True,
                                            array_id=f"{array_job_id}_{task}"))
    st.update_job(meta.job_id, array_task_str=slurm.fold_indices(pending - set(split)))
    log.info("array=%d: %d pending task(s) cancelled by uid %d (%s)", array_job_id, len(split),
             req.requester_uid, slurm.fold_indices(split))


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


def _node_allocs(ctl: Controller, job: JobRecord, info: api_pb2.JobInfo) -> None:
    """What the job holds on each of its nodes (scontrol show job -d)."""
    for i, node in enumerate(job.nodes):
        ids = job.gpu_ids[i] if i < len(job.gpu_ids) else ()
        gpus = job.gpus_per_node[i] if i < len(job.gpus_per_node) else 0
        info.node_allocs.append(api_pb2.JobNodeAlloc(
            node=node, cpus=job.cpus_per_node[i] if i < len(job.cpus_per_node) else 0,
            mem_mb=job.mem_per_node[i] if i < len(job.mem_per_node) else 0,
            gpu_ids=ids or range(gpus),
            gpu_type=node_gpu_type(ctl, node) if gpus else ""))


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
        now=int(now if now is not None else ctl.clock()), nice=spec.nice, hold=job.held,
        req_nodes=spec.req_nodes, exc_nodes=spec.exc_nodes, features=spec.constraint,
        mem_per_cpu_mb=spec.mem_per_cpu_mb if spec.HasField("mem_per_cpu_mb") else 0,
        gpu_type=spec.gpu_type, mail_type=spec.mail_type,
        # Slurm mails the submitting user when --mail-type comes without --mail-user.
        mail_user=spec.mail_user or (job.user if spec.mail_type else ""),
        signal_spec=_signal_spec(spec),
        array_job_id=job.array_job_id, array_task_id=job.array_task_id,
        array_task_str=slurm.array_task_text(job.array_task_str, job.array_max_running)
        if job.array_task_str else "",
        array_max_running=job.array_max_running,
        dependency=job.dependency, deadline=int(job.deadline),
        max_restarts=spec.max_restarts if spec.HasField("max_restarts") else -1,
        hang_timeout_s=spec.hang_timeout_s)
    _preempt_fields(ctl, job, info)
    if job.nodes and (state in (slurm.RUNNING, slurm.COMPLETING)):
        _node_allocs(ctl, job, info)
    derived_code, derived_sig = 0, 0
    # sacct lists ID.batch before ID.0 even though the batch step ends last (golden sacct_steps).
    for s in sorted(steps or (), key=lambda s: s.step_id != "batch"):
        info.steps.append(api_pb2.StepInfo(
            step_id=s.step_id, name=s.name, state=s.state, exit_code=s.exit_code,
            exit_signal=s.exit_signal, nodes=slurm.compress_hostlist(list(s.nodes)),
            num_tasks=s.num_tasks, num_cpus=s.num_cpus, start_time=int(s.start_time),
            end_time=int(s.end_time), max_rss_kb=s.max_rss_kb, ave_rss_kb=s.ave_rss_kb,
            max_rss_node=s.max_rss_node, max_rss_task=s.max_rss_task,
            user_cpu_ms=s.user_cpu_ms, system_cpu_ms=s.system_cpu_ms))
        if s.step_id != "batch" and s.exit_code > derived_code:
            derived_code, derived_sig = s.exit_code, s.exit_signal
    info.derived_exit_code, info.derived_exit_signal = derived_code, derived_sig
    return info


def _preempt_fields(ctl: Controller, job: JobRecord, info: api_pb2.JobInfo) -> None:
    """PreemptEligibleTime, PreemptTime and who preempted it last."""
    info.preempt_eligible_time = int(preemption.eligible_time(ctl, job))
    info.preempt_time = int(job.preempt_time)
    info.preempted_by = job.preempted_by


def _signal_spec(spec: api_pb2.JobSpec) -> str:
    """--signal as given back: "B:10@50"; "" when none."""
    if not spec.signal:
        return ""
    prefix = f"{spec.signal_flags}:" if spec.signal_flags else ""
    return f"{prefix}{spec.signal}@{spec.signal_time_s}"


def get_jobs(ctl: Controller, req: api_pb2.GetJobsRequest, accounting: bool = False) -> api_pb2.GetJobsResponse:
    now = ctl.clock()
    st = ctl.store
    if req.job_ids:
        # squeue -j A: the array's tasks as long as squeue shows finished jobs
        # (MinJobAge); sacct: every task ever
        jobs = st.jobs(job_ids=req.job_ids, with_array_tasks=True,
                       tasks_ended_after=None if accounting
                       else now - ctl.config.controller.min_job_age_s)
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
    infos = [job_info(ctl, j, steps.get(j.job_id), now) for j in jobs]
    if accounting:      # earlier runs, for sacct -D
        runs = st.attempts([j.job_id for j in jobs if j.restarts])
        for info in infos:
            info.attempts.extend(faulttol.attempt_msgs(runs.get(info.job_id, [])))
    return api_pb2.GetJobsResponse(jobs=infos, now=int(now))
