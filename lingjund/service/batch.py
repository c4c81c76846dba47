"""What agents report about batch scripts and cleanup, turned into job states.

    RUNNING --BatchFinished--> COMPLETED | FAILED | CANCELLED | TIMEOUT
       |                        (kill_reason decides; the exit status otherwise)
       +--> the job stays "completing" (squeue: CG) and keeps its nodes until
            every node of the allocation has said JobCleaned.

Every stop of a running job (time limit, deadline, preemption, scancel,
hang, requeue, a lost node) is one call, ``stop_running``: it records why
(kill_reason), and the script's BatchFinished then ends the run as that
reason says (``lifecycle.end_state``). A job without a batch script (an srun or
salloc allocation) has no script to report its end: ``stop_running`` ends it
at once, in the same state; ``finish_allocation`` also ends it when its
client releases it.

Each report is idempotent: a result that arrives twice (once on the stream,
once again in the next Register) changes nothing the second time.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from lingjun import launchers, slurm
from lingjun.filenames import default_stdout, expand_pattern, resolve_path
from lingjun.v1 import agent_pb2
from lingjund import lifecycle
from lingjund.service import confine, jobenv, restarts
from lingjund.service.context import Controller
from lingjund.lifecycle import HANG, REQUEUE, REQUEUE_HOLD, requeue_fields
from lingjund.store.store import JobRecord, StepRecord

log = logging.getLogger("lingjund.batch")


def launch_message(ctl: Controller, job: JobRecord) -> agent_pb2.ControllerMessage:
    spec = job.spec
    node = job.batch_host
    subst = dict(job_id=job.job_id, job_name=job.name, user=job.user, node=node,
                 node_index=0, task_id=0, array_job_id=job.array_job_id,
                 array_task_id=job.array_task_id if job.array_task_id >= 0 else None)
    out_pat = spec.stdout_pattern or default_stdout(bool(job.array_job_id))
    stdout = resolve_path(expand_pattern(out_pat, **subst), spec.work_dir)
    stderr = resolve_path(expand_pattern(spec.stderr_pattern, **subst), spec.work_dir) \
        if spec.stderr_pattern else ""
    env = jobenv.batch_env(job, ctl.cluster, ctl.address, master_addr=node_address(ctl, node))
    env.update(jobenv.checkpoint_env(ctl.config, job))   # checkpoint dir, heartbeat file
    return agent_pb2.ControllerMessage(launch_batch=agent_pb2.LaunchBatch(
        job_id=job.job_id, script=spec.script, argv=list(spec.argv),
        environment=env,
        work_dir=spec.work_dir, stdout_path=stdout, stderr_path=stderr,
        stdin_path=spec.stdin_path or "/dev/null", uid=spec.uid, gid=spec.gid,
        user=spec.user, append=spec.open_mode == "append", launcher=spec.launcher,
        share=confine.node_share(job, node)))


def node_address(ctl: Controller, node: str) -> str:
    """The address the node's agent registered: what other nodes reach it at."""
    rec = ctl.store.node(node)
    return (rec.inventory.address if rec is not None else "") or "127.0.0.1"


def batch_started(ctl: Controller, node: str, msg: agent_pb2.BatchStarted) -> None:
    with ctl.store.transaction() as st:
        job = st.job(msg.job_id)
        if job is None or job.state != slurm.RUNNING or job.batch_host != node:
            return
        first_report = not job.launched
        st.update_job(job.job_id, launched=True)
    if first_report and msg.launcher_port and job.spec.launcher in launchers.LAUNCHERS:
        start_launcher_workers(ctl, job, msg.launcher_port)


def start_launcher_workers(ctl: Controller, job: JobRecord, port: int) -> None:
    """--launcher services on the job's other nodes (Ray's workers), as the
    job's hidden service step: they end with the job, like its other processes."""
    name = job.spec.launcher
    if not launchers.get(name).worker or len(job.nodes) < 2:
        return
    addr = node_address(ctl, job.batch_host)
    base = dict(job.spec.environment)
    base.update(launchers.port_environment(name, addr, port))
    base["MASTER_ADDR"] = addr
    others = job.nodes[1:]
    envs = jobenv.step_env(job, ctl.cluster, ctl.address, step_id=launchers.SERVICE_STEP_ID,
                           step_nodes=others, tasks_per_node=[1] * len(others), base_env=base)
    for node in others:
        cpus = job.cpus_per_node[job.nodes.index(node)] if job.cpus_per_node else 1
        ctl.agents.send(node, agent_pb2.ControllerMessage(launch_tasks=agent_pb2.LaunchTasks(
            job_id=job.job_id, step_id=launchers.SERVICE_STEP_ID,
            argv=launchers.worker_argv(name, addr, port, cpus), environment=envs[node],
            work_dir=job.spec.work_dir, tasks=[agent_pb2.TaskSpec(rank=0, local_id=0)],
            uid=job.spec.uid, gid=job.spec.gid, share=confine.node_share(job, node))))
    log.info("job=%d: %s workers started on %s (head %s:%d)", job.job_id, name,
             slurm.compress_hostlist(list(others)), addr, port)


def record_batch_finished(ctl: Controller, node: str, res: agent_pb2.BatchFinished,
                          lost: bool = False) -> bool:
    """Record a batch script's end; False when it was already recorded."""
    now = ctl.clock()
    with ctl.store.transaction() as st:
        job = st.job(res.job_id)
        if job is None or job.state != slurm.RUNNING or job.batch_host != node:
            return False
        state, reason = lifecycle.end_state(job.kill_reason, exit_code=res.exit_code,
                                            signal=res.signal, error=res.error, lost=lost,
                                            out_of_memory=res.out_of_memory)
        # Nodes whose agents are gone clean up when they reconcile at registration.
        completing = tuple(n for n in job.nodes if ctl.agents.connected(n))
        requeue = (job.kill_reason in (REQUEUE, REQUEUE_HOLD)
                   or job.kill_reason == slurm.PREEMPTED and job.preempt_requeue) and not lost
        # keep the attempt; restart per the job's policy (restarts.py)
        backoff = restarts.after_run(ctl, st, job, state, res.end_time or now, res.exit_code,
                                     res.signal, now, requeued=requeue,
                                     cause=HANG if job.kill_reason == HANG else "")
        requeue = requeue or backoff is not None
        if requeue:
            # scontrol requeue: the same job pends again (its nodes stay listed
            # until they have cleaned up), as job_mgr.c's _job_requeue_op.
            st.update_job(job.job_id, completing=completing,
                          **requeue_fields(job, now, max(
                              ctl.config.controller.requeue_delay_s if backoff is None
                              else backoff, restarts.fence_wait_s(ctl, st, job, now)),
                                           hold=job.kill_reason == REQUEUE_HOLD,
                                           release_nodes=not completing))
        else:
            st.update_job(job.job_id, state=state, reason=reason, end_time=res.end_time or now,
                          exit_code=res.exit_code, exit_signal=res.signal, completing=completing)
        if requeue and backoff is None:
            step_state = slurm.REQUEUED
        elif state in (slurm.CANCELLED, slurm.TIMEOUT, slurm.DEADLINE, slurm.PREEMPTED):
            step_state = slurm.CANCELLED
        elif state in (slurm.NODE_FAIL, slurm.OUT_OF_MEMORY):
            step_state = state
        else:
            step_state = slurm.COMPLETED if res.exit_code == 0 and res.signal == 0 else slurm.FAILED
        st.put_step(StepRecord(
            job_id=job.job_id, step_id="batch", name="batch", state=step_state,
            exit_code=res.exit_code, exit_signal=res.signal, nodes=(node,), num_tasks=1,
            num_cpus=job.cpus_per_node[0] if job.cpus_per_node else 1,
            start_time=res.start_time or job.start_time, end_time=res.end_time or now,
            max_rss_kb=res.max_rss_kb, ave_rss_kb=res.ave_rss_kb, max_rss_node=node,
            user_cpu_ms=res.user_cpu_ms, system_cpu_ms=res.system_cpu_ms))
        for n in job.nodes:
            st.put_node(n, last_busy_time=now)
    log.info("job=%d ended %s (exit %d:%d) on %s%s", job.job_id,
             "and was requeued" if requeue else state, res.exit_code,
             res.signal, node, f": {res.error}" if res.error else "")
    cleanup = agent_pb2.ControllerMessage(terminate_job=agent_pb2.TerminateJob(
        job_id=job.job_id, grace_s=min(2.0, ctl.config.controller.kill_wait_s), reason="job ended"))
    for n in completing:
        ctl.agents.send(n, cleanup)
    ctl.wake_scheduler()
    ctl.jobs_changed()
    return True


def finish_allocation(ctl: Controller, st, job, state: str, reason: str, now: float, *,
                      exit_code: int = 0, exit_signal: int = 0) -> tuple[str, ...]:
    """End a RUNNING allocation (no batch script) inside the caller's transaction
    ``st``; returns the nodes that must now clean up (``send_cleanup``).

    The job keeps its nodes as "completing" until each says JobCleaned, as a
    batch job does, so nothing new lands on a node where a task still dies.
    """
    completing = tuple(n for n in job.nodes if ctl.agents.connected(n))
    st.update_job(job.job_id, state=state, reason=reason, end_time=now, exit_code=exit_code,
                  exit_signal=exit_signal, completing=completing)
    for n in job.nodes:
        st.put_node(n, last_busy_time=now)
    return completing


# -- stopping a running job ----------------------------------------------------------
@dataclass(frozen=True)
class Stop:
    """What is left to do for a stopped job once its transaction has committed."""
    job_id: int
    nodes: tuple[str, ...]      # told to end what the job runs there
    grace_s: float              # SIGTERM, then SIGKILL this much later
    why: str
    ended: bool = False         # an allocation, ended in the transaction


def stop_running(ctl: Controller, st, job: JobRecord, kill_reason: str, now: float, why: str, *,
                 exit_signal: int = 0, grace_s: float | None = None, **fields) -> Stop:
    """Stop a RUNNING job inside the caller's transaction ``st``: the one
    transition of every stopper (time limit, deadline, the end of preemption's
    grace time, scancel, hang, requeue, a lost node, an srun/salloc gone away).

    ``kill_reason`` says why and decides how the run ends (``lifecycle.end_state``).
    A batch job's script is killed and its BatchFinished ends the run
    (``record_batch_finished``). An allocation (srun/salloc) has no script to
    report its end: it ends here, in the state the same kill_reason gives a
    batch job, and its client learns it from the allocation stream.
    ``fields`` are more columns of the job row (cancelled_by, preempt_killed).
    Pass the result to ``send_stops`` after the commit.
    """
    st.update_job(job.job_id, kill_reason=kill_reason, **fields)
    grace = ctl.config.controller.kill_wait_s if grace_s is None else grace_s
    if job.spec.batch:
        return Stop(job.job_id, tuple(job.nodes), grace, why)
    state, reason = lifecycle.end_state(kill_reason, signal=exit_signal)
    nodes = finish_allocation(ctl, st, job, state, reason, now, exit_signal=exit_signal)
    return Stop(job.job_id, nodes, grace, why, ended=True)


def send_stops(ctl: Controller, stops: list[Stop]) -> None:
    """After ``stop_running``'s transaction has committed: tell the nodes."""
    for s in stops:
        msg = agent_pb2.ControllerMessage(terminate_job=agent_pb2.TerminateJob(
            job_id=s.job_id, grace_s=s.grace_s, reason=s.why))
        for n in s.nodes:
            ctl.agents.send(n, msg)
    if any(s.ended for s in stops):
        ctl.wake_scheduler()
        ctl.jobs_changed()


def send_cleanup(ctl: Controller, job_id: int, nodes: tuple[str, ...], grace_s: float,
                 reason: str) -> None:
    """After ``finish_allocation`` has committed: end what still runs there."""
    msg = agent_pb2.ControllerMessage(terminate_job=agent_pb2.TerminateJob(
        job_id=job_id, grace_s=grace_s, reason=reason))
    for n in nodes:
        ctl.agents.send(n, msg)
    ctl.wake_scheduler()
    ctl.jobs_changed()


def job_cleaned(ctl: Controller, node: str, msg: agent_pb2.JobCleaned) -> None:
    with ctl.store.transaction() as st:
        job = st.job(msg.job_id)
        if job is None or job.state == slurm.RUNNING or node not in job.completing:
            return
        left = tuple(n for n in job.completing if n != node)
        st.update_job(job.job_id, completing=left)
        if not left and job.state == slurm.PENDING:
            # A requeued job: its last run has let go of every node.
            st.update_job(job.job_id, nodes=(), cpus_per_node=(), mem_per_node=(),
                          gpus_per_node=(), gpu_ids=(), tasks_per_node=(), batch_host="")
    if not left:
        log.info("job=%d released its nodes", job.job_id)
        ctl.wake_scheduler()
