"""srun steps inside an allocation: launch tasks on the job's nodes, relay
their output and exits back to srun as they happen.

The controller relays task output (agents hold no listening port): agent
stream -> StepRun.queue -> srun's reply stream. The tasks run under a
supervisor on each node that writes their output to files, and the agent
sends it with each chunk's offset in its task's stream, so the relay
survives either end going away:

    running_steps row   committed before any task starts; at a restart
                        ``recover`` follows the step again, waiting for srun
    agent registers     RegisterReply.resume_steps: relay from these offsets
                        (a step it does not hold has lost its tasks here)
    srun reattaches     RunStep(attach, printed offsets, exits seen): the
                        agents resend from there (ResumeStep)
    chunk at offset     passed on only where it continues what srun has;
                        repeats are dropped, a gap waits for the resend

When the step ends its accounting row (``ID.0``) replaces the running row
and the nodes drop its files (StepForget). If srun goes away (its stream
ends while the controller runs), or does not come back within the heartbeat
timeout after a restart, the step's tasks are killed and it is CANCELLED.
Tasks whose job ended or whose node is DOWN end as "node lost".

CPUs inside the allocation (Slurm 22.05's step rules): a step holds, on each
of its nodes, all the job's CPUs there, or with ``exact`` (--exclusive, -c)
only tasks x cpus-per-task. Steps do not share what they hold: a step that
asks more than is free waits, saying so once ("Requested nodes are busy"),
until another step of the job ends. An ``overlap`` step (--overlap) holds
nothing and never waits. In a 2-CPU allocation on one node:

    srun -n1 sleep 9 &      holds both CPUs
    srun -n1 hostname       waits until the sleep ends
    srun --overlap hostname runs at once

GPUs inside the allocation, the same way: a step holds, on each of its
nodes, the GPUs it asked for (--gres=gpu:N / --gpus-per-node per node,
-G spread over its nodes, --gpus-per-task times its tasks there), chosen
from the job's GPUs there that no other live step of the job holds; with no
GPU option it holds all of the job's GPUs there, as Slurm's step does
(--gres=none: none). Asking more than the job has on a node is refused
("Invalid generic resource (gres) specification"); more than is free now
waits ("Requested nodes are busy"). An --overlap step holds none: it sees
the lowest it asked for (or all). In a job holding GPUs 0-3 on node1:

    srun --exact -n1 --gpus=1 a &   holds 0
    srun --exact -n1 --gpus=1 b &   holds 1
    srun --gpus=4 c                 waits until a and b end
    srun --gpus=5 d                 refused

Which of the step's GPUs each task sees is jobenv.task_gpus's
(--gpus-per-task, --gpu-bind).
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
from dataclasses import dataclass, field
from typing import AsyncIterator

from lingjun import slurm
from lingjun.filenames import expand_pattern, resolve_path
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import authz, confine, errors, jobenv, topology
from lingjund.service.context import Controller
from lingjund.service.resources import node_mps_per_gpu
from lingjund.store.store import RunningStepRecord, StepRecord

# A task the OOM killer took in its job's cgroup: its agent reports signal 125
# (Slurm's 0:125, and srun's exit code 253).
OOM_SIGNAL = 125

log = logging.getLogger("lingjund.steps")


@dataclass(eq=False)
class StepRun:
    """A step while it runs, whether or not an srun follows it right now."""
    job_id: int
    step_id: int
    nodes: tuple[str, ...]
    rank_node: dict[int, str]
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    exits: dict[int, tuple[int, int]] = field(default_factory=dict)
    # rank -> the task's AgentTaskExit, for the step's accounting (MaxRSS...)
    usage: dict[int, agent_pb2.AgentTaskExit] = field(default_factory=dict)
    cpus: dict[str, int] = field(default_factory=dict)   # CPUs held per node (none with --overlap)
    gpus: dict[str, tuple[int, ...]] = field(default_factory=dict)  # GPU indices held per node
    name: str = ""
    num_tasks: int = 0
    start: float = 0.0
    kill_on_bad_exit: bool = False
    memory: dict[str, int] = field(default_factory=dict)  # MB per node its own --mem gives (none: the job's)
    # (rank, stream) -> the next byte the client wants; output elsewhere is dropped
    offsets: dict[tuple[int, int], int] = field(default_factory=dict)
    # ranks whose exit the following client has already seen (it reattached)
    client_seen: set[int] = field(default_factory=set)
    follower: int = 0          # which RunStep stream follows it; 0 = none yet
    killed: bool = False       # its tasks were killed on purpose (kill-on-bad-exit)
    # sattach clients: each gets the output from when it attached; None = the step ended,
    # False = it fell ATTACH_LIMIT chunks behind and was dropped
    attached: list = field(default_factory=list)

BUSY = "Requested nodes are busy"
RECHECK_S = 2.0   # a step waiting on its tasks looks for lost ones this often
ATTACH_LIMIT = 10_000   # output chunks an sattach client may have unread before it is dropped
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


def job_gpus_on(job, node: str) -> tuple[int, ...]:
    """The GPU indices the job holds on ``node`` (the lowest n when only a count is known).

    None for a shard or MPS job: its GPU is shared already, and every step of
    the job sees it (jobenv.shared_gpu_env) without holding it."""
    if job.spec.shards_per_node or job.spec.mps_per_node:
        return ()
    i = job.nodes.index(node)
    ids = job.gpu_ids[i] if i < len(job.gpu_ids) else ()
    if ids:
        return tuple(ids)
    return tuple(range(job.gpus_per_node[i] if i < len(job.gpus_per_node) else 0))


def gpus_asked(job, req: api_pb2.RunStepRequest, nodes: tuple[str, ...],
               tasks: list[int]) -> dict[str, int]:
    """How many GPUs the step asks on each of its nodes (see the module doc).

    Refused (InvalidGres) when that is more than the job holds on a node."""
    asked = {}
    spread = jobenv.step_layout(nodes, req.gpus) if req.gpus else None
    for i, (node, n) in enumerate(zip(nodes, tasks)):
        have = len(job_gpus_on(job, node))
        if not req.gpus_given:
            want = have
        elif req.gpus_per_node:
            want = req.gpus_per_node
        elif spread is not None:
            want = spread[i]
        else:
            want = req.gpus_per_task * n
        if want > have:
            raise errors.InvalidGres()
        asked[node] = want
    return asked


def held_gpus(runs, job_id: int) -> dict[str, set[int]]:
    """GPU indices the job's live steps hold, per node."""
    held: dict[str, set[int]] = {}
    for run in runs:
        if run.job_id == job_id:
            for node, ids in run.gpus.items():
                held.setdefault(node, set()).update(ids)
    return held


def choose_step_gpus(job, asked: dict[str, int], held: dict[str, set[int]],
                     overlap: bool = False) -> dict[str, tuple[int, ...]] | None:
    """Which of the job's GPUs the step gets on each node: the lowest that no
    other step holds; None when some node has too few free now. An --overlap
    step takes the lowest whether held or not."""
    out = {}
    for node, n in asked.items():
        mine = job_gpus_on(job, node)
        free = mine if overlap else tuple(g for g in mine if g not in held.get(node, ()))
        if len(free) < n:
            return None
        out[node] = free[:n]
    return out


def cpus_asked(job, req: api_pb2.RunStepRequest, nodes: tuple[str, ...],
               tasks: list[int], gpus: dict[str, int] | None = None) -> dict[str, int]:
    """CPUs the step holds per node (see the module doc); {} for --overlap.

    With --cpus-per-gpu an exact step holds at least its GPUs there x that."""
    if req.overlap:
        return {}
    asked = {}
    for node, n in zip(nodes, tasks):
        have = job.cpus_per_node[job.nodes.index(node)] if job.cpus_per_node else 0
        if req.exact:
            want = n * max(req.cpus_per_task, 1)
            if req.cpus_per_gpu and gpus:
                want = max(want, gpus.get(node, 0) * req.cpus_per_gpu)
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


def step_memory(job, req: api_pb2.RunStepRequest, nodes: tuple[str, ...],
                cpus: dict[str, int]) -> dict[str, int]:
    """MB per node the step's own --mem / --mem-per-cpu give it inside the
    job's memory there (its cgroup below the job's holds it to that); {} when
    neither is given: the job's limit alone holds it. --mem=0 is all of the
    job's. More than the job has on a node is refused with Slurm's words.

    >>> from types import SimpleNamespace as N
    >>> job = N(nodes=["n1", "n2"], mem_per_node=[1000, 1000])
    >>> step_memory(job, api_pb2.RunStepRequest(mem_per_node_mb=300), ("n1",), {"n1": 2})
    {'n1': 300}
    >>> step_memory(job, api_pb2.RunStepRequest(mem_per_cpu_mb=100), ("n1", "n2"), {"n1": 2, "n2": 1})
    {'n1': 200, 'n2': 100}
    """
    if not (req.HasField("mem_per_node_mb") or req.HasField("mem_per_cpu_mb")):
        return {}
    out: dict[str, int] = {}
    for node in nodes:
        i = job.nodes.index(node)
        held = job.mem_per_node[i] if i < len(job.mem_per_node) else 0
        if req.HasField("mem_per_node_mb"):
            want = req.mem_per_node_mb or held
        else:
            want = req.mem_per_cpu_mb * max(1, cpus.get(node, 0))
        if held > 0 and want > held:
            raise errors.InvalidTaskMemory()
        if want > 0:
            out[node] = want
    return out


async def run_step(ctl: Controller, req: api_pb2.RunStepRequest):
    """Async generator of StepEvent for one srun (or one srun taking a step back)."""
    if req.attach:
        async for ev in _attach(ctl, req):
            yield ev
        return
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
    gpu_counts = gpus_asked(job, req, nodes, tasks)
    asked = cpus_asked(job, req, nodes, tasks, gpu_counts)
    memory = step_memory(job, req, nodes, asked)
    jobenv.check_gpu_bind(req.gpu_bind)
    said_busy = False
    while True:
        gpus = choose_step_gpus(job, gpu_counts, held_gpus(ctl.steps.values(), job.job_id),
                                overlap=req.overlap)
        if gpus is not None and fits(job, held_cpus(ctl.steps.values(), job.job_id), asked):
            break
        if not said_busy:
            said_busy = True
            yield api_pb2.StepEvent(waiting=api_pb2.StepWaiting(reason=BUSY))
        await ctl.wait_jobs_changed(2.0)
        job = ctl.store.job(req.job_id)
        if job.state != slurm.RUNNING or job.kill_reason:
            raise errors.AlreadyDone()
    # No await from the check above to here: no other step can take these CPUs between.
    envs = jobenv.step_env(job, ctl.cluster, ctl.address, step_id=job.next_step_id,
                           step_nodes=nodes, tasks_per_node=tasks,
                           base_env=dict(req.environment), cpus_per_task=req.cpus_per_task,
                           step_gpus=gpus if any(job.gpus_per_node) else None,
                           topology=ctl.config.topology.index)
    if any(job.gpus_per_node):     # the rail NICs beside the step's GPUs, per node, for NCCL
        for node in nodes:
            envs[node].update(topology.rail_hint(ctl, node, gpus.get(node, ()), envs[node]))
    step_id = job.next_step_id
    run = StepRun(job.job_id, step_id, nodes, {}, cpus=asked,
                  gpus={} if req.overlap else {n: ids for n, ids in gpus.items() if ids},
                  name=req.name or os.path.basename(req.argv[0]), num_tasks=sum(tasks),
                  start=ctl.clock(), kill_on_bad_exit=req.kill_on_bad_exit, memory=memory)
    launches = []
    rank = 0
    for i, node in enumerate(nodes):
        specs = []
        per_task = None
        if any(job.gpus_per_node):
            try:
                per_task = jobenv.task_gpus(gpus.get(node, ()), tasks[i], req.gpus_per_task,
                                            req.gpu_bind)
            except ValueError:
                raise errors.InvalidRequest(f"Invalid --gpu-bind argument: {req.gpu_bind}") from None
        for local in range(tasks[i]):
            out, err = _output_paths(job, req, step_id, node, i, rank)
            env = jobenv.task_env(rank, local, envs[node])
            if per_task is not None:
                env.update(jobenv.task_gpu_env(per_task[local]))
            specs.append(agent_pb2.TaskSpec(rank=rank, local_id=local, environment=env,
                                            stdout_path=out, stderr_path=err))
            run.rank_node[rank] = node
            rank += 1
        launches.append((node, agent_pb2.ControllerMessage(launch_tasks=agent_pb2.LaunchTasks(
            job_id=job.job_id, step_id=step_id, argv=list(req.argv), environment=envs[node],
            work_dir=req.work_dir or job.spec.work_dir, tasks=specs,
            uid=job.spec.uid, gid=job.spec.gid,
            share=confine.node_share(job, node, node_mps_per_gpu(ctl, node)),
            step_memory_bytes=memory.get(node, 0) * confine.MB))))
    # The step is durable before any task starts: a restarted controller
    # follows it again (recover), and srun can take it back (attach).
    with ctl.store.transaction() as st:
        st.update_job(job.job_id, next_step_id=step_id + 1)
        st.put_running_step(_running_record(run))
    ctl.steps[(job.job_id, step_id)] = run
    for node, msg in launches:
        ctl.agents.send(node, msg)
    log.info("job=%d step=%d launched: %d task(s) on %s", job.job_id, step_id, rank,
             slurm.compress_hostlist(list(nodes)))
    async for ev in _follow(ctl, run):
        yield ev


def _running_record(run: StepRun) -> RunningStepRecord:
    return RunningStepRecord(
        job_id=run.job_id, step_id=run.step_id, name=run.name, nodes=run.nodes,
        rank_node=dict(run.rank_node), cpus=dict(run.cpus), num_tasks=run.num_tasks,
        num_cpus=sum(run.cpus.values()) or run.num_tasks, start_time=run.start,
        kill_on_bad_exit=run.kill_on_bad_exit, gpus=dict(run.gpus))


def _resume_msg(run: StepRun, node: str) -> agent_pb2.StepResume:
    ranks = {r for r, n in run.rank_node.items() if n == node}
    return agent_pb2.StepResume(job_id=run.job_id, step_id=run.step_id, offsets=[
        agent_pb2.StreamOffset(rank=r, stream=st, offset=off)
        for (r, st), off in sorted(run.offsets.items()) if r in ranks])


async def _attach(ctl: Controller, req: api_pb2.RunStepRequest):
    """srun takes its step back after losing the controller: from the output it
    has printed on, and the exits it has not seen, each exactly once."""
    job = ctl.store.job(req.job_id)
    if job is None:
        raise errors.InvalidJobId()
    authz.require_owner_or_root(req.requester_uid, job.uid)
    run = ctl.steps.get((req.job_id, req.attach_step_id))
    if run is None:
        # Recorded before srun came back (the controller went away between
        # the step's end and srun hearing of it): its end is all there is left.
        rec = next((r for r in ctl.store.steps([req.job_id]).get(req.job_id, [])
                    if r.step_id == str(req.attach_step_id)), None)
        if rec is None:
            raise errors.AlreadyDone()
        yield api_pb2.StepEvent(started=api_pb2.StepStarted(
            job_id=rec.job_id, step_id=req.attach_step_id, node_names=list(rec.nodes),
            num_tasks=rec.num_tasks))
        yield api_pb2.StepEvent(done=api_pb2.StepDone(
            exit_code=128 + rec.exit_signal if rec.exit_signal else rec.exit_code))
        return
    run.queue = asyncio.Queue()      # a fresh stream: whoever read the old one is gone
    run.offsets = {(o.rank, o.stream): o.offset for o in req.printed}
    run.client_seen = set(req.exited_ranks)
    # Exits the client has not seen come again from the agents, after the
    # output before them; exits it has seen are kept (the step's result).
    for rank in list(run.exits):
        if rank not in run.client_seen:
            del run.exits[rank]
    for node in run.nodes:
        ctl.agents.send(node, agent_pb2.ControllerMessage(resume_step=_resume_msg(run, node)))
    log.info("job=%d step=%d: srun reattached (%d exit(s) seen)", run.job_id, run.step_id,
             len(run.client_seen))
    async for ev in _follow(ctl, run):
        yield ev


async def _follow(ctl: Controller, run: StepRun):
    """The step's events for the one srun that follows it, then its end."""
    run.follower += 1
    me = run.follower
    queue = run.queue
    finished = False
    try:
        yield api_pb2.StepEvent(started=api_pb2.StepStarted(
            job_id=run.job_id, step_id=run.step_id, node_names=list(run.nodes),
            num_tasks=run.num_tasks))
        # Done once this client has every exit: its own queue's, or seen before
        # it reattached. (Not run.exits: an exit is recorded as it arrives, and
        # the queue may still hold it, and output before it, when the last
        # one comes.)
        delivered = set(run.client_seen)
        while len(delivered) < run.num_tasks:
            try:
                ev = await asyncio.wait_for(queue.get(), RECHECK_S)
            except TimeoutError:
                if run.follower != me:
                    return        # another srun took the step over
                _end_lost_tasks(ctl, run)
                continue
            if ev.WhichOneof("event") == "task_exit":
                te = ev.task_exit
                delivered.add(te.rank)
                if run.kill_on_bad_exit and (te.exit_code or te.signal) and not run.killed:
                    run.killed = True
                    _kill_step(ctl, run)
            yield ev
        finished = True
        rc, state, worst = step_outcome(run)
        _record(ctl, run, state, worst)
        yield api_pb2.StepEvent(done=api_pb2.StepDone(exit_code=rc))
    finally:
        if run.follower == me and not finished:
            if ctl.stopping:
                pass      # the controller stops: the step runs on, a restart follows it again
            else:
                log.info("job=%d step=%d: srun went away, killing its tasks", run.job_id,
                         run.step_id)
                _cancel(ctl, run)


def step_outcome(run: StepRun) -> tuple[int, str, tuple[int, int]]:
    """srun's exit code (highest task code, 128+signal for a signalled one), the
    step's state for sacct, and its worst exit_code:signal."""
    codes = [128 + sig if sig else code for code, sig in run.exits.values()]
    rc = max(codes) if codes else 0
    worst = max(run.exits.values(), key=lambda cs: (cs[0], cs[1]), default=(0, 0))
    state = slurm.COMPLETED if rc == 0 else (
        slurm.OUT_OF_MEMORY if any(s == OOM_SIGNAL for _, s in run.exits.values()) else
        slurm.CANCELLED if any(s for _, s in run.exits.values()) else slurm.FAILED)
    return rc, state, worst


def _record(ctl: Controller, run: StepRun, state: str, worst: tuple[int, int],
            usage: bool = True) -> None:
    """The step ended: its accounting row replaces its running row, and its
    nodes may drop its files."""
    with ctl.store.transaction() as st:
        st.put_step(StepRecord(
            job_id=run.job_id, step_id=str(run.step_id), name=run.name, state=state,
            exit_code=worst[0], exit_signal=worst[1], nodes=run.nodes, num_tasks=run.num_tasks,
            num_cpus=sum(run.cpus.values()) or run.num_tasks, start_time=run.start,
            end_time=ctl.clock(), gpus=sum(len(ids) for ids in run.gpus.values()),
            mem_mb=sum(run.memory.values()), **(step_usage(run) if usage else {})))
        st.delete_running_step(run.job_id, run.step_id)
    if ctl.steps.get((run.job_id, run.step_id)) is run:
        del ctl.steps[(run.job_id, run.step_id)]
    for q in run.attached:
        q.put_nowait(None)
    ctl.jobs_changed()  # its CPUs are free: a waiting step may go
    forget = agent_pb2.ControllerMessage(forget_step=agent_pb2.StepForget(
        job_id=run.job_id, step_id=run.step_id))
    for node in run.nodes:
        ctl.agents.send(node, forget)


def _cancel(ctl: Controller, run: StepRun) -> None:
    """Nobody follows the step any more: kill its tasks; sacct shows it
    CANCELLED, as Slurm does for a step whose srun was interrupted."""
    _kill_step(ctl, run)
    _record(ctl, run, slurm.CANCELLED, (0, int(signal.SIGKILL)), usage=False)


def _end_lost_tasks(ctl: Controller, run: StepRun) -> None:
    """Tasks that will never report: their job ended, or their node is DOWN."""
    job = ctl.store.job(run.job_id)
    over = job is None or job.state != slurm.RUNNING
    down = set() if over else {n for n in run.nodes if (rec := ctl.store.node(n)) is not None
                               and rec.down}
    for rank, node in run.rank_node.items():
        if rank not in run.exits and (over or node in down):
            _exit_lost(run, rank, node)


def _exit_lost(run: StepRun, rank: int, node: str) -> None:
    run.exits[rank] = (0, int(signal.SIGKILL))
    if rank in run.client_seen:
        return
    run.queue.put_nowait(api_pb2.StepEvent(task_exit=api_pb2.TaskExit(
        rank=rank, node=node, exit_code=0, signal=int(signal.SIGKILL), error="node lost")))


def recover(ctl: Controller) -> None:
    """At start: the steps that ran when the controller stopped, followed again
    (agents resume relaying when they register; srun reattaches)."""
    for r in ctl.store.running_steps():
        run = StepRun(r.job_id, r.step_id, r.nodes, dict(r.rank_node), cpus=dict(r.cpus),
                      name=r.name, num_tasks=r.num_tasks, start=r.start_time,
                      kill_on_bad_exit=r.kill_on_bad_exit, gpus=dict(r.gpus))
        ctl.steps[(r.job_id, r.step_id)] = run
        log.info("job=%d step=%d: still running on %s, waiting for its srun", r.job_id,
                 r.step_id, slurm.compress_hostlist(list(r.nodes)))


def sweep_unfollowed(ctl: Controller, started_at: float) -> None:
    """After a restart: steps whose srun has not come back within the heartbeat
    timeout are ended, as if their srun had gone away."""
    if ctl.clock() - started_at < ctl.config.controller.heartbeat_timeout_s:
        return
    for run in list(ctl.steps.values()):
        if run.follower != 0:
            continue
        if len(run.exits) == run.num_tasks:
            _, state, worst = step_outcome(run)
            _record(ctl, run, state, worst)
            continue
        log.warning("job=%d step=%d: no srun came back for it, killing its tasks",
                    run.job_id, run.step_id)
        _cancel(ctl, run)


def resume_for(ctl: Controller, node: str, held: set[tuple[int, int]]
               ) -> list[agent_pb2.StepResume]:
    """At an agent's registration: where to resume each step it should hold.
    A task of a step it does not hold will never report: it is lost."""
    out = []
    for run in list(ctl.steps.values()):
        if node not in run.nodes:
            continue
        if (run.job_id, run.step_id) in held:
            out.append(_resume_msg(run, node))
            continue
        for rank, n in run.rank_node.items():
            if n == node and rank not in run.exits:
                log.warning("job=%d step=%d task %d: node %s no longer has it", run.job_id,
                            run.step_id, rank, node)
                _exit_lost(run, rank, node)
    return out


def step_usage(run: StepRun) -> dict:
    """A step's accounting from its tasks' reports, as sacct shows it: the
    highest peak RSS and where it was, the mean of the tasks' means, CPU
    summed; its GPUs' sampled utilization and memory, the mean of the
    reports' means and the highest peak (each task reports its node's)."""
    reports = run.usage
    if not reports:
        return {}
    top_rank = max(reports, key=lambda r: (reports[r].max_rss_kb, -r))
    n = len(reports)
    return dict(
        max_rss_kb=reports[top_rank].max_rss_kb,
        max_rss_node=run.rank_node.get(top_rank, ""), max_rss_task=top_rank,
        ave_rss_kb=sum(t.ave_rss_kb for t in reports.values()) // n,
        user_cpu_ms=sum(t.user_cpu_ms for t in reports.values()),
        system_cpu_ms=sum(t.system_cpu_ms for t in reports.values()),
        gpu_util_ave=sum(t.gpu_util_ave for t in reports.values()) // n,
        gpu_util_max=max(t.gpu_util_max for t in reports.values()),
        gpu_mem_ave_kb=sum(t.gpu_mem_ave_kb for t in reports.values()) // n,
        gpu_mem_max_kb=max(t.gpu_mem_max_kb for t in reports.values()))


def _kill_step(ctl: Controller, run: StepRun) -> None:
    msg = agent_pb2.ControllerMessage(signal_job=agent_pb2.SignalJob(
        job_id=run.job_id, step_id=run.step_id, signal=int(signal.SIGKILL)))
    for node in run.nodes:
        ctl.agents.send(node, msg)


def task_output(ctl: Controller, node: str, msg: agent_pb2.AgentTaskOutput) -> None:
    """Output at an offset: only what continues what the client has is passed
    on (a repeat after a reconnect is dropped; a gap waits for the resend)."""
    run = ctl.steps.get((msg.job_id, msg.step_id))
    if run is None or run.rank_node.get(msg.rank) != node:
        return
    key = (msg.rank, msg.stream)
    want = run.offsets.get(key, 0)
    end = msg.offset + len(msg.data)
    if msg.offset > want or end <= want:
        return
    run.offsets[key] = end
    out = api_pb2.TaskOutput(rank=msg.rank, stream=msg.stream, data=msg.data[want - msg.offset:])
    run.queue.put_nowait(api_pb2.StepEvent(output=out))
    for q in list(run.attached):
        if q.qsize() >= ATTACH_LIMIT:
            run.attached.remove(q)
            q.put_nowait(False)
        else:
            q.put_nowait(out)


async def attach(ctl: Controller, req: api_pb2.AttachStepRequest) -> AsyncIterator[api_pb2.TaskOutput]:
    """sattach: the step's task output from now until it ends. The caller
    must own the job (or be an operator)."""
    job = ctl.store.job(req.job_id)
    if job is None:
        raise errors.InvalidJobId()
    authz.require(req.requester_uid, job.uid, ctl.config.authz)
    step_id = req.step_id
    if step_id < 0:                 # the job's newest running step
        running = [s for (j, s) in ctl.steps if j == req.job_id]
        if not running:
            raise errors.InvalidJobId(f"Job {req.job_id} has no running step")
        step_id = max(running)
    run = ctl.steps.get((req.job_id, step_id))
    if run is None:
        if step_id < job.next_step_id:
            raise errors.AlreadyDone("Job/step already completing or completed")
        raise errors.InvalidJobId()         # not started (yet)
    q: asyncio.Queue = asyncio.Queue()
    run.attached.append(q)
    try:
        while True:
            item = await q.get()
            if item is None:
                return
            if item is False:
                raise errors.WatcherTooSlow("sattach fell behind the step's output and was dropped")
            yield item
    finally:
        if q in run.attached:
            run.attached.remove(q)


def task_exit(ctl: Controller, node: str, msg: agent_pb2.AgentTaskExit) -> None:
    run = ctl.steps.get((msg.job_id, msg.step_id))
    if run is None or run.rank_node.get(msg.rank) != node or msg.rank in run.exits:
        return
    run.usage[msg.rank] = msg
    run.exits[msg.rank] = (msg.exit_code, msg.signal)
    if msg.rank in run.client_seen:
        return
    run.queue.put_nowait(api_pb2.StepEvent(task_exit=api_pb2.TaskExit(
        rank=msg.rank, node=node, exit_code=msg.exit_code, signal=msg.signal, error=msg.error)))
