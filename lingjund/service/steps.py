"""srun steps inside an allocation: launch tasks on the job's nodes, relay
their output and exits back to srun as they happen.

The controller relays task output (agents hold no listening port): agent
stream -> StepRun.queue -> srun's reply stream. A step lives in memory
while srun waits; its accounting row (``ID.0``) is committed when it ends.
If srun goes away first, the step's tasks are killed.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
from dataclasses import dataclass, field

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import errors, jobenv
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


def _layout(job, req: api_pb2.RunStepRequest) -> tuple[tuple[str, ...], list[int]]:
    avail = job.nodes
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


async def run_step(ctl: Controller, req: api_pb2.RunStepRequest):
    """Async generator of StepEvent for one srun."""
    if not req.argv:
        raise errors.InvalidRequest("No command given")
    job = ctl.store.job(req.job_id)
    if job is None:
        raise errors.InvalidJobId()
    if job.state != slurm.RUNNING or job.kill_reason:
        raise errors.AlreadyDone()
    nodes, tasks = _layout(job, req)
    missing = [n for n in nodes if not ctl.agents.connected(n)]
    if missing:
        raise errors.NodeConfigUnavailable(f"Unable to contact node(s) {','.join(missing)}")
    with ctl.store.transaction() as st:
        job = st.job(req.job_id)
        step_id = job.next_step_id
        st.update_job(job.job_id, next_step_id=step_id + 1)
    envs = jobenv.step_env(job, ctl.cluster, ctl.address, step_id=step_id, step_nodes=nodes,
                           tasks_per_node=tasks, base_env=dict(req.environment))
    run = StepRun(job.job_id, step_id, nodes, {})
    ctl.steps[(job.job_id, step_id)] = run
    start = ctl.clock()
    rank = 0
    for i, node in enumerate(nodes):
        specs = []
        for local in range(tasks[i]):
            specs.append(agent_pb2.TaskSpec(rank=rank, local_id=local,
                                            environment=jobenv.task_env(rank, local, envs[node])))
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
                num_cpus=sum(tasks), start_time=start, end_time=ctl.clock(),
                **step_usage(run)))
        yield api_pb2.StepEvent(done=api_pb2.StepDone(exit_code=rc))
    finally:
        ctl.steps.pop((job.job_id, step_id), None)
        if not finished:
            log.info("job=%d step=%d: srun went away, killing its tasks", job.job_id, step_id)
            _kill_step(ctl, run)


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
