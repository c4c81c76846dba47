"""srun steps inside an allocation: launch tasks on the job's nodes, relay
their output and exits back to srun as they happen.

The controller relays task output (agents hold no listening port): agent
stream -> StepRun.queue -> srun's reply stream. A step lives in memory
while srun waits; its accounting row (``ID.0``) is committed when it ends.
If srun goes away first, the step's tasks are killed.

CPUs inside the allocation (Slurm 22.05's step rules): a step holds, on each
of its nodes, all the job's CPUs there, or with ``exact`` (--exclusive, -c)
only tasks x cpus-per-task. Steps do not share what they hold: a step that
asks more than is free waits, saying so once ("Requested nodes are busy"),
until another step of the job ends. An ``overlap`` step (--overlap) holds
nothing and never waits. In a 2-CPU allocation on one node:

    srun -n1 sleep 9 &      holds both CPUs
    srun -n1 hostname       waits until the sleep ends
    srun --overlap hostname runs at once
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
from dataclasses import dataclass, field

from lingjun import slurm
from lingjun.filenames import expand_pattern, resolve_path
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import authz, errors, jobenv
from lingjund.service.context import Controller
from lingjund.store.store import StepRecord

log = logging.getLogger("lingjund.steps")


@dataclass(eq=False)
class StepRun:
    job_id: int
    step_id: int
    nodes: tuple[str, ...]
    rank_node: dict[int, str]
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    exits: dict[int, tuple[int, int]] = field(default_factory=dict)
    # rank -> the task's AgentTaskExit, for the step's accounting (MaxRSS...)
    usage: dict[int, agent_pb2.AgentTaskExit] = field(default_factory=dict)
    cpus: dict[str, int] = field(default_factory=dict)   # CPUs held per node (none with --overlap)

BUSY = "Requested nodes are busy"
PER_TASK_LETTERS = ("%t", "%n", "%N")   # output patterns the nodes write, one file each


def _layout(job, req: api_pb2.RunStepRequest) -> tuple[tuple[str, ...], list[int]]:
    avail = job.nodes
    if req.node_names:  # -w: those nodes of the allocation, in the allocation's order
        wanted = set(req.node_names)
        if not wanted <= set(avail) or (req.num_nodes and req.num_nodes < len(wanted)):
            raise errors.NodeConfigUnavailable()
        if not req.num_nodes:
            avail = tuple(n for n in avail if n in wanted)
        else:
            avail = tuple(n for n in avail if n in wanted) + tuple(n for n in avail if n not in wanted)
    n_nodes = req.num_nodes
    if n_nodes > len(avail) or n_nodes < 0 or req.num_tasks < 0 or req.ntasks_per_node < 0:
        raise errors.NodeConfigUnavailable()
    if not n_nodes:
        if req.num_tasks:
            n_nodes = min(req.num_tasks, len(avail))
        else:
            n_nodes = len(avail)
    nodes = avail[:n_nodes]
    if req.num_tasks:
        if req.num_tasks < n_nodes:
            raise errors.NodeConfigUnavailable()
        tasks = jobenv.step_layout(nodes, req.num_tasks)
    elif req.ntasks_per_node:
        tasks = [req.ntasks_per_node] * n_nodes
    else:
        tasks = [1] * n_nodes
    if sum(tasks) > 100_000:
        raise errors.NodeConfigUnavailable()
    return nodes, tasks


def cpus_asked(job, req: api_pb2.RunStepRequest, nodes: tuple[str, ...],
               tasks: list[int]) -> dict[str, int]:
    """CPUs the step holds per node (see the module doc); {} for --overlap."""
    if req.overlap:
        return {}
    asked = {}
    for node, n in zip(nodes, tasks):
        have = job.cpus_per_node[job.nodes.index(node)] if job.cpus_per_node else 0
        if req.exact:
            want = n * max(req.cpus_per_task, 1)
            if have and want > have:
                raise errors.NodeConfigUnavailable("More processors requested than permitted")
            asked[node] = want
        else:
            asked[node] = have
    return asked


def held_cpus(runs, job_id: int) -> dict[str, int]:
    """CPUs the job's live steps hold, per node."""
    held: dict[str, int] = {}
    for run in runs:
        if run.job_id == job_id:
            for node, n in run.cpus.items():
                held[node] = held.get(node, 0) + n
    return held


def fits(job, held: dict[str, int], asked: dict[str, int]) -> bool:
    """Whether a step asking ``asked`` fits beside steps holding ``held``. A step
    alone always fits (it was checked against the allocation when asked)."""
    for node, want in asked.items():
        have = job.cpus_per_node[job.nodes.index(node)] if job.cpus_per_node else want
        if held.get(node, 0) and held[node] + want > have:
            return False
    return True


def _output_paths(job, req: api_pb2.RunStepRequest, step_id: int, node: str, node_index: int,
                  rank: int) -> tuple[str, str]:
    """-o/-e with %t, %n or %N: the file this task writes on its node ("" = streamed)."""
    def one(pattern: str) -> str:
        if not pattern or not any(p in pattern for p in PER_TASK_LETTERS):
            return ""
        return resolve_path(expand_pattern(
            pattern, job_id=job.job_id, job_name=job.name, user=job.user, node=node,
            array_job_id=job.array_job_id,
            array_task_id=job.array_task_id if job.array_task_id >= 0 else None,
            step_id=step_id, task_id=rank, node_index=node_index), req.work_dir or job.spec.work_dir)
    out = one(req.stdout_pattern)
    # stderr goes with stdout unless -e says otherwise, as in Slurm
    return out, one(req.stderr_pattern) if req.stderr_pattern else out


async def run_step(ctl: Controller, req: api_pb2.RunStepRequest):
    """Async generator of StepEvent for one srun."""
    if not req.argv:
        raise errors.InvalidRequest("No command given")
    job = ctl.store.job(req.job_id)
    if job is None:
        raise errors.InvalidJobId()
    authz.require_owner_or_root(req.requester_uid, job.uid)
    if job.state != slurm.RUNNING or job.kill_reason:
        raise errors.AlreadyDone()
    nodes, tasks = _layout(job, req)
    missing = [n for n in nodes if not ctl.agents.connected(n)]
    if missing:
        raise errors.NodeConfigUnavailable(f"Unable to contact node(s) {','.join(missing)}")
    asked = cpus_asked(job, req, nodes, tasks)
    said_busy = False
    while not fits(job, held_cpus(ctl.steps.values(), job.job_id), asked):
        if not said_busy:
            said_busy = True
            yield api_pb2.StepEvent(waiting=api_pb2.StepWaiting(reason=BUSY))
        await ctl.wait_jobs_changed(2.0)
        job = ctl.store.job(req.job_id)
        if job.state != slurm.RUNNING or job.kill_reason:
            raise errors.AlreadyDone()
    # No await from the check above to here: no other step can take these CPUs between.
    with ctl.store.transaction() as st:
        job = st.job(req.job_id)
        step_id = job.next_step_id
        st.update_job(job.job_id, next_step_id=step_id + 1)
    envs = jobenv.step_env(job, ctl.cluster, ctl.address, step_id=step_id, step_nodes=nodes,
                           tasks_per_node=tasks, base_env=dict(req.environment),
                           cpus_per_task=req.cpus_per_task)
    run = StepRun(job.job_id, step_id, nodes, {}, cpus=asked)
    ctl.steps[(job.job_id, step_id)] = run
    start = ctl.clock()
    rank = 0
    for i, node in enumerate(nodes):
        specs = []
        for local in range(tasks[i]):
            out, err = _output_paths(job, req, step_id, node, i, rank)
            specs.append(agent_pb2.TaskSpec(rank=rank, local_id=local,
                                            environment=jobenv.task_env(rank, local, envs[node]),
                                            stdout_path=out, stderr_path=err))
            run.rank_node[rank] = node
            rank += 1
        ctl.agents.send(node, agent_pb2.ControllerMessage(launch_tasks=agent_pb2.LaunchTasks(
            job_id=job.job_id, step_id=step_id, argv=list(req.argv), environment=envs[node],
            work_dir=req.work_dir or job.spec.work_dir, tasks=specs,
            uid=job.spec.uid, gid=job.spec.gid)))
    log.info("job=%d step=%d launched: %d task(s) on %s", job.job_id, step_id, rank,
             slurm.compress_hostlist(list(nodes)))
    name = req.name or os.path.basename(req.argv[0])
    finished = False
    killed = False
    try:
        yield api_pb2.StepEvent(started=api_pb2.StepStarted(
            job_id=job.job_id, step_id=step_id, node_names=list(nodes), num_tasks=rank))
        while len(run.exits) < rank:
            ev = await run.queue.get()
            if ev.WhichOneof("event") == "task_exit":
                te = ev.task_exit
                run.exits[te.rank] = (te.exit_code, te.signal)
                if req.kill_on_bad_exit and (te.exit_code or te.signal) and not killed:
                    killed = True
                    _kill_step(ctl, run)
            yield ev
        finished = True
        codes = [128 + sig if sig else code for code, sig in run.exits.values()]
        rc = max(codes) if codes else 0
        worst = max(run.exits.values(), key=lambda cs: (cs[0], cs[1]))
        state = slurm.COMPLETED if rc == 0 else (
            slurm.CANCELLED if any(s for _, s in run.exits.values()) else slurm.FAILED)
        with ctl.store.transaction() as st:
            st.put_step(StepRecord(
                job_id=job.job_id, step_id=str(step_id), name=name, state=state,
                exit_code=worst[0], exit_signal=worst[1], nodes=nodes, num_tasks=rank,
                num_cpus=sum(asked.values()) or sum(tasks), start_time=start, end_time=ctl.clock(),
                **step_usage(run)))
        yield api_pb2.StepEvent(done=api_pb2.StepDone(exit_code=rc))
    finally:
        ctl.steps.pop((job.job_id, step_id), None)
        ctl.jobs_changed()  # its CPUs are free: a waiting step may go
        if not finished:
            log.info("job=%d step=%d: srun went away, killing its tasks", job.job_id, step_id)
            _kill_step(ctl, run)
            # sacct shows the step, as Slurm does for a step whose srun was interrupted
            with ctl.store.transaction() as st:
                st.put_step(StepRecord(
                    job_id=job.job_id, step_id=str(step_id), name=name, state=slurm.CANCELLED,
                    exit_code=0, exit_signal=int(signal.SIGKILL), nodes=nodes, num_tasks=rank,
                    num_cpus=sum(asked.values()) or sum(tasks), start_time=start,
                    end_time=ctl.clock()))


def step_usage(run: StepRun) -> dict:
    """A step's accounting from its tasks' reports, as sacct shows it: the
    highest peak RSS and where it was, the mean of the tasks' means, CPU summed."""
    reports = run.usage
    if not reports:
        return {}
    top_rank = max(reports, key=lambda r: (reports[r].max_rss_kb, -r))
    return dict(
        max_rss_kb=reports[top_rank].max_rss_kb,
        max_rss_node=run.rank_node.get(top_rank, ""), max_rss_task=top_rank,
        ave_rss_kb=sum(t.ave_rss_kb for t in reports.values()) // len(reports),
        user_cpu_ms=sum(t.user_cpu_ms for t in reports.values()),
        system_cpu_ms=sum(t.system_cpu_ms for t in reports.values()))


def _kill_step(ctl: Controller, run: StepRun) -> None:
    msg = agent_pb2.ControllerMessage(signal_job=agent_pb2.SignalJob(
        job_id=run.job_id, step_id=run.step_id, signal=int(signal.SIGKILL)))
    for node in run.nodes:
        ctl.agents.send(node, msg)


def task_output(ctl: Controller, node: str, msg: agent_pb2.AgentTaskOutput) -> None:
    run = ctl.steps.get((msg.job_id, msg.step_id))
    if run is not None:
        run.queue.put_nowait(api_pb2.StepEvent(output=api_pb2.TaskOutput(
            rank=msg.rank, stream=msg.stream, data=msg.data)))


def task_exit(ctl: Controller, node: str, msg: agent_pb2.AgentTaskExit) -> None:
    run = ctl.steps.get((msg.job_id, msg.step_id))
    if run is not None and run.rank_node.get(msg.rank) == node:
        run.usage[msg.rank] = msg
        run.queue.put_nowait(api_pb2.StepEvent(task_exit=api_pb2.TaskExit(
            rank=msg.rank, node=node, exit_code=msg.exit_code, signal=msg.signal, error=msg.error)))


def node_lost(ctl: Controller, node: str) -> None:
    """Tasks on a node whose stream closed will not report: end them as lost."""
    for run in list(ctl.steps.values()):
        for rank, n in run.rank_node.items():
            if n == node and rank not in run.exits:
                run.queue.put_nowait(api_pb2.StepEvent(task_exit=api_pb2.TaskExit(
                    rank=rank, node=node, exit_code=0, signal=int(signal.SIGKILL),
                    error="node lost")))
