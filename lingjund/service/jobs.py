"""Job operations: submit, cancel, read. One function each, one transaction each.

A submission is validated against the partitions and nodes as configured
(never-satisfiable requests are refused at the door, in Slurm's words),
committed, and only then acknowledged. Retrying with the same client token
returns the first job instead of a second one.
"""
from __future__ import annotations

import asyncio
import logging
import math
import operator
import signal as signals
from dataclasses import dataclass
from typing import Mapping

from lingjun import slurm
from lingjun.config import PartitionConfig
from lingjun.filenames import default_stdout, expand_pattern, resolve_path
from lingjun.v1 import agent_pb2, api_pb2
from lingjund import lifecycle
from lingjund.sched import dependency
from lingjund.sched.estimate import estimate_start
from lingjund.service import associations, authz, batch, catalog, errors, mail, preemption, priority
from lingjund.service.context import Controller
from lingjund.service.priority import PRIORITY_BASE  # noqa: F401  (benches import it from here)
from lingjund.service.resources import gpus_per_node, job_request, node_gpu_type, node_shared_gpus
from lingjund.service.views import build_snapshot
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.jobs")


def _hostlist(expr: str) -> list[str]:
    try:
        return slurm.expand_hostlist(expr)
    except ValueError:
        raise errors.InvalidNodeName() from None


def _placement_nodes(ctl: Controller, spec: api_pb2.JobSpec, part) -> catalog.Shapes:
    """The partition's nodes this job may use at all (-w/-x/-C/GPU type), by shape,
    refusing what no node of the cluster can give in Slurm's words (an unknown
    node, a feature or GPU type no node has), and what this partition cannot.

    Without -w/-x/-C/GPU type that is the whole partition, summarised once in the
    catalog: a submission costs the same at 10 nodes and at 10,000."""
    cat = ctl.catalog()
    nodes = ctl.node_layout().nodes_of.get(part.name)
    if nodes is None:
        nodes = tuple(ctl.partition_nodes(part))
    if not (spec.req_nodes or spec.exc_nodes or spec.constraint or spec.gpu_type):
        shapes = cat.partition_shapes.get(part.name)
        return shapes if shapes is not None else cat.shapes(nodes)
    known = cat.capacity        # every configured or registered node has an entry
    required = _hostlist(spec.req_nodes) if spec.req_nodes else []
    excluded = set(_hostlist(spec.exc_nodes)) if spec.exc_nodes else set()
    if any(n not in known for n in required) or any(n not in known for n in excluded):
        raise errors.InvalidNodeName()
    if spec.constraint:
        try:
            wanted = slurm.constraint_features(spec.constraint)
        except ValueError:
            raise errors.InvalidFeature() from None
        if any(f not in cat.all_features for f in wanted):
            raise errors.InvalidFeature()
    if spec.gpu_type and spec.gpu_type not in cat.gpu_types:
        raise errors.InvalidGres()
    members = set(nodes)
    if any(n not in members or n in excluded for n in required):
        raise errors.NodeConfigUnavailable()
    usable = [n for n in nodes if n not in excluded
              and (not spec.constraint or slurm.constraint_matches(spec.constraint,
                                                                   cat.features.get(n, ())))
              and (not spec.gpu_type or cat.gpu_type.get(n, "") == spec.gpu_type)]
    if required and not set(required) <= set(usable):
        raise errors.NodeConfigUnavailable()
    return cat.shapes(usable)


def _validate(ctl: Controller, spec: api_pb2.JobSpec):
    if spec.batch and not spec.script.startswith("#!"):
        raise errors.InvalidRequest("Batch script is empty or lacks #!")
    if spec.mail_type:
        try:
            spec.mail_type = slurm.parse_mail_type(spec.mail_type)    # Slurm's words, in its order
        except ValueError:
            raise errors.InvalidRequest(f"--mail-type={spec.mail_type} invalid") from None
        mail.check_can_mail(ctl.config.controller.mail_prog, spec.mail_type)
    mail.check_mail_user(spec.mail_user)
    part = ctl.partition(spec.partition) if spec.partition else ctl.default_partition()
    if part is None:
        raise errors.InvalidPartition()
    if spec.signal and not 0 < spec.signal < 65536:
        raise errors.InvalidRequest(f"Invalid signal {spec.signal}")
    for field, value in (("min_nodes", spec.min_nodes), ("max_nodes", spec.max_nodes),
                         ("num_tasks", spec.num_tasks), ("ntasks_per_node", spec.ntasks_per_node),
                         ("cpus_per_task", spec.cpus_per_task), ("gpus_per_node", spec.gpus_per_node),
                         ("gpus_per_task", spec.gpus_per_task), ("cpus_per_gpu", spec.cpus_per_gpu),
                         ("shards_per_node", spec.shards_per_node),
                         ("mps_per_node", spec.mps_per_node),
                         ("gpu_mem_limit_mb", spec.gpu_mem_limit_mb),
                         ("switches", spec.switches), ("segment", spec.segment)):
        if value < 0 or value > 1_000_000:
            raise errors.InvalidRequest(f"Invalid {field} value {value}")
    if spec.time_limit_min < -1:
        raise errors.InvalidTimeLimit()
    if spec.switch_wait_s < 0:
        raise errors.InvalidRequest(f"Invalid switch_wait_s value {spec.switch_wait_s}")
    _check_shared_gpus(spec)
    nodes = _placement_nodes(ctl, spec, part)
    # -w nodes count toward -N, as in Slurm.
    min_nodes = max(spec.min_nodes or 1, len(_hostlist(spec.req_nodes)) if spec.req_nodes else 0)
    if spec.num_tasks and not spec.min_nodes and spec.ntasks_per_node:
        min_nodes = max(min_nodes, math.ceil(spec.num_tasks / spec.ntasks_per_node))
    if spec.max_nodes and spec.max_nodes < min_nodes:
        raise errors.NodeConfigUnavailable()
    if spec.segment and (min_nodes % spec.segment or (spec.max_nodes or min_nodes) != min_nodes):
        raise errors.NodeConfigUnavailable()   # --segment: whole segments of a fixed node count
    over = _over_partition_limits(spec, part, min_nodes, nodes)
    if over is not None and ctl.config.controller.enforce_part_limits != "NO":
        raise over
    if nodes.counts:
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
        has_mem = spec.HasField("mem_per_node_mb")
        gpn = gpus_per_node(spec, min_nodes)
        node_cpus = max(per_node_tasks * cpt, gpn * spec.cpus_per_gpu)
        gpu_mem = gpn * spec.mem_per_gpu_mb if spec.HasField("mem_per_gpu_mb") else 0
        fitting = nodes.where(lambda c: node_cpus <= c[0]
                              and (not has_mem or spec.mem_per_node_mb <= c[1])
                              and per_node_tasks * cpt * mem_per_cpu <= c[1]
                              and gpu_mem <= c[1]
                              and gpn <= c[2])
        if fitting.nodes < min(min_nodes, nodes.with_capacity):
            raise errors.NodeConfigUnavailable()
        if spec.shards_per_node or spec.mps_per_node:
            _shared_gpus_fit(ctl, spec, part, min_nodes)
        if over is None and spec.num_tasks and spec.num_tasks * cpt > fitting.top_cpus(max_nodes):
            raise errors.NodeConfigUnavailable()
    return part, min_nodes


def _check_shared_gpus(spec: api_pb2.JobSpec) -> None:
    """Shards and MPS ask for part of one GPU: never together, never beside whole
    GPUs (Slurm refuses both as an invalid gres request); a GPU memory cap only
    with MPS, which is what enforces it."""
    shared = spec.shards_per_node or spec.mps_per_node
    if not shared:
        if spec.gpu_mem_limit_mb:
            raise errors.InvalidGres()
        return
    if ((spec.shards_per_node and spec.mps_per_node) or spec.gpus_per_node or spec.gpus
            or spec.gpus_per_task or spec.cpus_per_gpu or spec.HasField("mem_per_gpu_mb")):
        raise errors.InvalidGres()
    if spec.gpu_mem_limit_mb and not spec.mps_per_node:
        raise errors.InvalidGres()


def _shared_gpus_fit(ctl: Controller, spec: api_pb2.JobSpec, part, min_nodes: int) -> None:
    """Enough of the partition's nodes have ONE GPU with this many shards (MPS) in
    all, or waiting cannot help: "Requested node configuration is not available".
    Only shard and MPS jobs pay for this walk over the partition's nodes."""
    cat = ctl.catalog()
    names = ctl.node_layout().nodes_of.get(part.name)
    if names is None:
        names = tuple(ctl.partition_nodes(part))
    want = spec.shards_per_node or spec.mps_per_node
    fits = 0
    for name in names:
        cap = cat.capacity.get(name)
        if not cap or not cap[2]:
            continue
        shards, mps = node_shared_gpus(ctl, name)
        per_gpu = (shards if spec.shards_per_node else mps) // cap[2]
        if want <= per_gpu:
            fits += 1
            if fits >= min_nodes:
                return
    raise errors.NodeConfigUnavailable()


def _over_partition_limits(spec: api_pb2.JobSpec, part, min_nodes: int,
                           nodes: catalog.Shapes) -> errors.SlurmError | None:
    """The partition limit ``spec`` breaks, as the error EnforcePartLimits=ANY/ALL raises.

    With Slurm's default NO the job is accepted and pends; the scheduling core
    gives the same limit as its reason, checked in this order: PartitionConfig
    for more CPUs than the partition has, PartitionNodeLimit for nodes,
    PartitionTimeLimit for time.
    """
    cpus = (spec.num_tasks or 1) * (spec.cpus_per_task or 1)
    if nodes.counts and cpus > nodes.total_cpus:
        return errors.TooManyCpus()
    most = nodes.nodes if part.max_nodes == -1 else min(nodes.nodes, part.max_nodes)
    if nodes.nodes and min_nodes > most:
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


@dataclass(frozen=True)
class Submission:
    """A submission that passed every check made outside the store, ready to be
    written (``commit``); the ones made inside it (a client token seen before,
    MaxSubmitJobs) run in the transaction that writes it."""
    spec: api_pb2.JobSpec
    token: str | None
    part: PartitionConfig
    min_nodes: int
    array: slurm.ArraySpec | None
    dep_text: str


def prepare(ctl: Controller, request: api_pb2.SubmitJobRequest) -> Submission | api_pb2.SubmitJobResponse:
    """Check a submission (raising Slurm's error); the answer itself when there is
    nothing to write (a retried client token, --test-only)."""
    spec = request.spec
    spec.ClearField("failed_nodes")      # the controller's own, from earlier runs
    token = request.client_token or None
    if token:
        earlier = ctl.store.job_by_token(token)
        if earlier is not None:
            return api_pb2.SubmitJobResponse(job_id=earlier.job_id, duplicate=True, cluster=ctl.cluster)
    authz.require_nice(spec.uid, spec.nice, ctl.config.authz, submit=True)  # spec.uid: by authn
    part, min_nodes = _validate(ctl, spec)
    associations.check_submit(ctl, spec, part.name)   # default account; AccountingStorageEnforce
    array = _array_spec(ctl, spec)
    dep_text = validate_dependency(spec.dependency)
    if spec.deadline and (spec.deadline < ctl.clock()
                          or (spec.begin_time and spec.begin_time > spec.deadline)):
        raise errors.InvalidTimeValue()
    if request.test_only:
        return _will_run(ctl, spec, part)
    return Submission(spec, token, part, min_nodes, array, dep_text)


def _write(ctl: Controller, st, sub: Submission, now: float) -> api_pb2.SubmitJobResponse:
    """Write one submission inside the caller's transaction; a SlurmError is
    raised before anything of it is written."""
    spec, token, part, array = sub.spec, sub.token, sub.part, sub.array
    earlier = st.job_by_token(token) if token else None
    if earlier is not None:
        return api_pb2.SubmitJobResponse(job_id=earlier.job_id, duplicate=True, cluster=ctl.cluster)
    authz.check_submit_limit(ctl, st, spec.uid, len(array.indices) if array else 1)
    associations.check_submit_limits(ctl, st, spec, len(array.indices) if array else 1)
    name = spec.name or "sbatch"
    job_id = st.insert_job(
        client_token=token, name=name, user=spec.user or str(spec.uid), uid=spec.uid,
        partition=part.name, state=slurm.PENDING, reason=slurm.REASON_NONE, priority=0,
        submit_time=now, eligible_time=initial_eligible_time(spec, sub.dep_text, now),
        time_limit_min=effective_time_limit(spec, part),
        exclusive=spec.exclusive, held=spec.hold, spec=spec, dependency=sub.dep_text,
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
    st.update_job(job_id, priority=priority.at_submit(ctl, st.job(job_id), now),
                  reason=slurm.REASON_HELD_USER if spec.hold else slurm.REASON_NONE,
                  **output_paths(spec, job_id, name, array_fields.get("array_job_id", 0),
                                 array_fields.get("array_task_id", -1)),
                  **array_fields)
    return api_pb2.SubmitJobResponse(job_id=job_id, cluster=ctl.cluster)


def commit(ctl: Controller, subs: list[Submission]) -> list[api_pb2.SubmitJobResponse | Exception]:
    """Write submissions in one transaction (one fsync): each one's answer, or the
    error that refused it alone (MaxSubmitJobs). Nothing is answered before the
    commit. Should the transaction itself fail, each is tried again in one of
    its own, so that one bad submission cannot take the others down with it."""
    now = ctl.clock()
    results: list = []
    try:
        with ctl.store.transaction() as st:
            for sub in subs:
                try:
                    results.append(_write(ctl, st, sub, now))
                except errors.SlurmError as e:
                    results.append(e)
    except Exception as e:
        if len(subs) == 1:
            results = [e]
        else:
            log.warning("%d submissions written together failed (%s); writing them one by one",
                        len(subs), e)
            results = [commit(ctl, [sub])[0] for sub in subs]
    for sub, r in zip(subs, results):
        if isinstance(r, api_pb2.SubmitJobResponse) and not r.duplicate:
            log.info("job=%d submitted by %s: %s, %d node(s), partition %s%s",
                     r.job_id, sub.spec.user, sub.spec.name or "sbatch", sub.min_nodes,
                     sub.part.name, f", array {sub.spec.array}" if sub.array is not None else "")
    if any(isinstance(r, api_pb2.SubmitJobResponse) and not r.duplicate for r in results):
        ctl.wake_scheduler()
    return results


def submit(ctl: Controller, request: api_pb2.SubmitJobRequest) -> api_pb2.SubmitJobResponse:
    """One submission, checked, committed, then answered."""
    sub = prepare(ctl, request)
    if isinstance(sub, api_pb2.SubmitJobResponse):
        return sub
    result = commit(ctl, [sub])[0]
    if isinstance(result, Exception):
        raise result
    return result


class GroupCommit:
    """Submissions that arrive together are written together.

    Each RPC checks its submission, queues it and waits; the first to queue
    asks the event loop to write everything queued GATHER_S later, in one
    transaction (a request takes several turns of the loop from the socket
    to its handler, so "the next turn" would gather only one). A storm of
    them shares its fsyncs. Each caller is answered only after the commit
    that holds its job (``commit``).

    A submission that comes alone (none other arrived in the last QUIET_S)
    is written on the loop's next turn instead: nothing would join it, and
    the wait (2 ms and the timer's slack) was half of a lone SubmitJob's
    round trip. A command's start alone takes longer than QUIET_S, so one
    client submitting one job after another never looks busy; the first of
    a storm goes alone, the rest gather.
    """

    GATHER_S = 0.002
    QUIET_S = 0.005

    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self._queue: list[tuple[Submission, asyncio.Future]] = []
        self._flush_pending = False
        self._last_arrival = float("-inf")      # loop time

    def _schedule_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """The next flush: on the next turn for a lone submission, else GATHER_S on."""
        now = loop.time()
        lone = now - self._last_arrival > self.QUIET_S
        self._last_arrival = now
        if self._flush_pending:
            return
        self._flush_pending = True
        if lone:
            loop.call_soon(self._flush)
        else:
            loop.call_later(self.GATHER_S, self._flush)

    async def submit(self, request: api_pb2.SubmitJobRequest) -> api_pb2.SubmitJobResponse:
        sub = prepare(self.ctl, request)
        if isinstance(sub, api_pb2.SubmitJobResponse):
            return sub
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._queue.append((sub, done))
        self._schedule_flush(loop)
        return await done

    async def submit_many(self, requests) -> list[api_pb2.SubmitJobResponse | Exception]:
        """Several submissions of one caller: each checked alone, all written in the
        next group commit; each one's answer or the error that refused it alone."""
        loop = asyncio.get_running_loop()
        answers: list = []
        for request in requests:
            try:
                sub = prepare(self.ctl, request)
            except errors.SlurmError as e:
                answers.append(e)
                continue
            if isinstance(sub, api_pb2.SubmitJobResponse):
                answers.append(sub)
                continue
            done = loop.create_future()
            self._queue.append((sub, done))
            answers.append(done)
        if any(isinstance(a, asyncio.Future) for a in answers):
            self._schedule_flush(loop)
        out = []
        for a in answers:
            if isinstance(a, asyncio.Future):
                try:
                    a = await a
                except Exception as e:      # refused alone, or its commit failed
                    a = e
            out.append(a)
        return out

    def _flush(self) -> None:
        self._flush_pending = False
        batch, self._queue = self._queue, []
        try:
            results = commit(self.ctl, [sub for sub, _ in batch])
        except Exception as e:     # a bug: every caller hears of it, none waits forever
            results = [e] * len(batch)
        if len(batch) > 1:
            log.debug("%d submissions in one commit", len(batch))
        for (_, done), r in zip(batch, results):
            if done.done():         # the caller went away; its job stands
                continue
            if isinstance(r, Exception):
                done.set_exception(r)
            else:
                done.set_result(r)


def _will_run(ctl: Controller, spec: api_pb2.JobSpec, part) -> api_pb2.SubmitJobResponse:
    """--test-only: where and when the scheduling core would start this job; submits nothing."""
    now = ctl.clock()
    job_id = ctl.store.next_job_id()
    request = job_request(job_id, spec, part.name, priority=0, submit_time=now,
                          time_limit_min=effective_time_limit(spec, part), exclusive=spec.exclusive,
                          held=False, begin_time=now,
                          max_switch_wait_s=ctl.config.topology.max_switch_wait_s)
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
    stops: list[lifecycle.Transition] = []
    to_signal: list[JobRecord] = []
    done: set[int] = set()
    grace = ctl.config.controller.kill_wait_s
    by = str(req.requester_uid)

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
        if job.state == slurm.PENDING and req.signal:
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=False,
                                                error="Job is pending execution"))
            return
        if job.state == slurm.RUNNING and req.signal:
            to_signal.append(job)
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))
            return
        t = lifecycle.cancel(job, now, by=by, grace_s=grace, alive=batch.alive(ctl, job))
        if t is None:
            results.append(api_pb2.CancelResult(job_id=job.job_id, ok=False,
                                                error=errors.AlreadyDone.message))
            return
        batch.commit(st, job, t, now)
        if job.state == slurm.RUNNING:
            stops.append(t)
        results.append(api_pb2.CancelResult(job_id=job.job_id, ok=True))

    with ctl.store.transaction() as st:
        for job in targets:
            cancel_row(st, st.job(job.job_id))
        for sel in req.array_tasks:
            _cancel_array_tasks(st, req, sel.array_job_id, sel.task_ids, now, results, cancel_row,
                                ctl.config.authz)
    for t in stops:
        log.info("job=%d%s cancelled by uid %d", t.job_id, " (allocation)" if t.ended else "",
                 req.requester_uid)
    batch.send(ctl, stops)
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
    cancelled = lifecycle.never_started(slurm.CANCELLED, now, cancelled_by=str(req.requester_uid))
    for task in split:
        job_id = st.split_array_task(meta, task, **cancelled)
        st.update_job(job_id, **output_paths(meta.spec, job_id, meta.name, array_job_id, task))
        results.append(api_pb2.CancelResult(job_id=job_id, ok=True,
                                            array_id=f"{array_job_id}_{task}"))
    st.update_job(meta.job_id, array_task_str=slurm.fold_indices(pending - set(split)))
    log.info("array=%d: %d pending task(s) cancelled by uid %d (%s)", array_job_id, len(split),
             req.requester_uid, slurm.fold_indices(split))


# -- reading -----------------------------------------------------------------------
def _pending_node_count(ctl: Controller, job: JobRecord,
                        biggest_cpus: Mapping[str, int] | None = None) -> int:
    """Nodes a job not yet placed will need, as Slurm estimates them for squeue.

    ``-n`` without ``-N`` counts the nodes its CPUs fill on the partition's
    largest node (``-n 9`` on 2-CPU nodes: 5, golden squeue_O_fields).
    ``biggest_cpus``: those CPUs per partition, when the caller has them
    (a worker thread, which must not read the controller's store).
    """
    spec = job.spec
    if spec.min_nodes or not spec.num_tasks:
        return spec.min_nodes or 1
    if biggest_cpus is not None:
        biggest = biggest_cpus.get(job.partition, 0)
    else:
        shapes = ctl.catalog().partition_shapes.get(job.partition)
        biggest = shapes.biggest_cpus if shapes is not None else 0
    if not biggest:
        return 1
    return max(1, math.ceil(spec.num_tasks * (spec.cpus_per_task or 1) / biggest))


def _node_allocs(ctl: Controller, job: JobRecord, info: api_pb2.JobInfo) -> None:
    """What the job holds on each of its nodes (scontrol show job -d)."""
    shared = job.spec.shards_per_node or job.spec.mps_per_node
    for i, node in enumerate(job.nodes):
        ids = job.gpu_ids[i] if i < len(job.gpu_ids) else ()
        gpus = job.gpus_per_node[i] if i < len(job.gpus_per_node) else 0
        info.node_allocs.append(api_pb2.JobNodeAlloc(
            node=node, cpus=job.cpus_per_node[i] if i < len(job.cpus_per_node) else 0,
            mem_mb=job.mem_per_node[i] if i < len(job.mem_per_node) else 0,
            gpu_ids=ids or range(gpus),
            gpu_type=node_gpu_type(ctl, node) if gpus and not shared else ""))


def job_info(ctl: Controller, job: JobRecord, steps=None, now: float | None = None,
             biggest_cpus: Mapping[str, int] | None = None) -> api_pb2.JobInfo:
    """The job as the commands show it. ``biggest_cpus`` (see
    _pending_node_count) keeps this off the store: history is built in a
    worker thread."""
    spec = job.spec
    state = job.state
    if job.completing:
        state = slurm.COMPLETING
    cpn = job.cpus_per_node
    info = api_pb2.JobInfo(
        job_id=job.job_id, name=job.name, user=job.user, uid=job.uid, gid=spec.gid,
        group=spec.group or str(spec.gid), state=state, reason=job.reason,
        partition=job.partition,
        num_nodes=len(job.nodes) if job.nodes else _pending_node_count(ctl, job, biggest_cpus),
        # 0 when -N was not given: scontrol shows NumNodes=1, not 1-1, as Slurm does
        max_nodes=spec.max_nodes,
        num_cpus=sum(cpn) if cpn else max(spec.num_tasks, spec.min_nodes or 1) * (spec.cpus_per_task or 1),
        num_tasks=sum(job.tasks_per_node) if job.tasks_per_node else (spec.num_tasks or (spec.min_nodes or 1) * (spec.ntasks_per_node or 1)),
        cpus_per_task=spec.cpus_per_task or 1, ntasks_per_node=spec.ntasks_per_node,
        mem_per_node_mb=spec.mem_per_node_mb if spec.HasField("mem_per_node_mb") else -1,
        gpus_per_node=spec.gpus_per_node, gpus=spec.gpus,
        shards_per_node=spec.shards_per_node, mps_per_node=spec.mps_per_node,
        gpu_mem_limit_mb=spec.gpu_mem_limit_mb,
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
    if job.sched_start and job.state == slurm.PENDING:
        info.sched_start_time = int(job.sched_start)
        info.sched_nodes = slurm.compress_hostlist(list(job.sched_nodes))
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
            user_cpu_ms=s.user_cpu_ms, system_cpu_ms=s.system_cpu_ms, gpus=s.gpus,
            mem_mb=s.mem_mb, gpu_util_ave=s.gpu_util_ave, gpu_util_max=s.gpu_util_max,
            gpu_mem_ave_kb=s.gpu_mem_ave_kb, gpu_mem_max_kb=s.gpu_mem_max_kb))
        # Slurm's derived exit code: the highest of the srun steps', an OOM
        # step's 0:125 (SIG_OOM) taken over any lower one
        if s.step_id != "batch" and (s.exit_code > derived_code or (
                s.exit_signal == slurm.OOM_SIGNAL and not derived_code)):
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


def _selected(ctl: Controller, req: api_pb2.GetJobsRequest, now: float) -> list[JobRecord]:
    """The live jobs a GetJobs request names: -j, -t (or the active ones),
    -u, -p, -n, -A and -w, each from the live state."""
    st = ctl.store
    recent = now - ctl.config.controller.min_job_age_s
    if req.job_ids:
        # squeue -j A: the array's tasks as long as squeue shows finished jobs (MinJobAge)
        jobs = st.jobs(job_ids=req.job_ids, with_array_tasks=True, tasks_ended_after=recent)
        if not jobs:
            raise errors.InvalidJobId()
    elif req.all_states or req.states:
        jobs = st.jobs(ended_after=recent)
    else:
        jobs = st.jobs(ended_after=recent)
        jobs = [j for j in jobs if j.state in slurm.ACTIVE_STATES or j.completing]
    if not (req.users or req.partitions or req.names or req.states or req.accounts or req.nodes):
        return jobs
    users, partitions, names = set(req.users), set(req.partitions), set(req.names)
    states, accounts, nodes = set(req.states), set(req.accounts), set(req.nodes)

    def keep(j: JobRecord) -> bool:
        if users and j.user not in users and str(j.uid) not in users:
            return False
        if partitions and j.partition not in partitions:
            return False
        if names and j.name not in names:
            return False
        if states:
            shown = slurm.COMPLETING if j.completing else j.state
            if shown not in states and j.state not in states:
                return False
        if accounts and (j.spec.account or j.user) not in accounts:
            return False
        if nodes and nodes.isdisjoint(j.nodes):
            return False
        return True
    return [j for j in jobs if keep(j)]


def get_jobs(ctl: Controller, req: api_pb2.GetJobsRequest) -> api_pb2.GetJobsResponse:
    """squeue and scontrol show job, from the live state (sacct's history is
    service/accounting.py's)."""
    if req.job_fields:
        return api_pb2.GetJobsResponse.FromString(encoded_jobs(ctl, req))
    now = ctl.clock()
    jobs = _selected(ctl, req, now)
    if req.with_steps:
        steps = ctl.store.steps([j.job_id for j in jobs])
        return api_pb2.GetJobsResponse(
            jobs=[job_info(ctl, j, steps.get(j.job_id), now) for j in jobs], now=int(now))
    reply = api_pb2.GetJobsResponse(now=int(now))
    _fill_infos(ctl, reply.jobs, jobs, now)
    if req.squeue_order:
        reply.jobs.sort(key=slurm.squeue_order_key)
        reply.squeue_order = True
    return reply


JOB_INFO_FIELDS = frozenset(api_pb2.JobInfo.DESCRIPTOR.fields_by_name)
# how many field sets (squeue formats) keep their jobs' encodings at once
# (100,000 jobs: about 30 MB each)
KEPT_VIEWS = 4


def encoded_jobs(ctl: Controller, req: api_pb2.GetJobsRequest) -> bytes:
    """A GetJobsResponse, encoded, whose jobs carry only ``req.job_fields``
    (squeue's columns): the reply is a fraction of the full one to build,
    send and parse.

    Each job's element of the reply (field 1's tag, length and the cut-down
    JobInfo) is kept encoded in ``ctl.job_views`` while its record, the
    configuration and the node catalog are the same objects (as
    ``_fill_infos`` keeps whole JobInfos), together with its squeue order
    key; the wire form of a repeated field is its elements' encodings one
    after another, so the reply is those bytes joined, in squeue's order
    when asked, then ``now``. A cut-down job has no ``now`` of its own.
    """
    fields = tuple(sorted(set(req.job_fields)))
    unknown = [f for f in fields if f not in JOB_INFO_FIELDS]
    if unknown:
        raise errors.InvalidRequest(f"Invalid job_fields: {unknown[0]}")
    now = ctl.clock()
    jobs = _selected(ctl, req, now)
    views = ctl.job_views
    kept = views.pop(fields, None)
    if kept is None:
        kept = {}
        while len(views) >= KEPT_VIEWS:
            del views[next(iter(views))]
    views[fields] = kept            # the most recently used last
    live = ctl.store.live.jobs
    config, cat = ctl.config, ctl.catalog()
    elements = []
    for job in jobs:
        k = kept.get(job.job_id)
        if k is None or k[0] is not job or k[1] is not config or k[2] is not cat:
            k = _view(ctl, job, fields, now, config, cat)
            if live.get(job.job_id) is job:
                kept[job.job_id] = k
        elements.append(k)
    if req.squeue_order:
        elements.sort(key=operator.itemgetter(3))
    if len(kept) > 2 * len(live) + 1000:
        for i in [i for i, k in kept.items() if live.get(i) is not k[0]]:
            del kept[i]
    tail = api_pb2.GetJobsResponse(now=int(now), squeue_order=req.squeue_order)
    return b"".join([k[4] for k in elements] + [tail.SerializeToString()])


def _view(ctl: Controller, job: JobRecord, fields: tuple[str, ...], now: float,
          config, cat) -> tuple:
    """(record, config, catalog, squeue order key, reply element) of one job."""
    full = ctl.job_infos.get(job.job_id)
    if full is not None and full[0] is job and full[1] is config and full[2] is cat:
        info = api_pb2.JobInfo.FromString(full[3])
    else:
        info = job_info(ctl, job, None, now)
    cut = api_pb2.JobInfo(**{f: getattr(info, f) for f in fields if f != "now"})
    element = api_pb2.GetJobsResponse(jobs=[cut]).SerializeToString()
    return job, config, cat, slurm.squeue_order_key(info), element


def _fill_infos(ctl: Controller, out, jobs: list[JobRecord], now: float) -> None:
    """Append the JobInfo of each of ``jobs`` (no steps) to ``out`` (a repeated field).

    Each live job's JobInfo is kept encoded in ``ctl.job_infos`` for as long as
    its record is the same object: the live state replaces a record whenever
    the job changes (records are frozen), so the JobInfo built from one stays
    right while the record, the configuration and the node catalog (squeue's
    node estimate) are the same objects; only ``now`` differs, set on each
    copy. Building 100,000 JobInfo messages from their records was most of
    ``squeue``'s time in the controller; decoding kept bytes costs a fraction.
    Jobs that left the live state are dropped once they outnumber the live ones.
    """
    kept, live = ctl.job_infos, ctl.store.live.jobs
    config, cat = ctl.config, ctl.catalog()
    stamp = int(now)
    for job in jobs:
        k = kept.get(job.job_id)
        if k is not None and k[0] is job and k[1] is config and k[2] is cat:
            info = out.add()
            info.MergeFromString(k[3])
            info.now = stamp
            continue
        info = job_info(ctl, job, None, now)
        out.append(info)
        if live.get(job.job_id) is job:
            info.now = 0
            kept[job.job_id] = (job, config, cat, info.SerializeToString())
    if len(kept) > 2 * len(live) + 1000:
        for i in [i for i, k in kept.items() if live.get(i) is not k[0]]:
            del kept[i]
