"""What agents report about batch scripts and cleanup, turned into job states.

    RUNNING --BatchFinished--> COMPLETED | FAILED | CANCELLED | TIMEOUT
       |                        (kill_reason decides; the exit status otherwise)
       +--> the job stays "completing" (squeue: CG) and keeps its nodes until
            every node of the allocation has said JobCleaned.

The transitions are decided in ``lingjund/lifecycle.py``; this module loads
what they look at, commits what they decide in one transaction, then tells
the agents. Every stop of a running job (time limit, deadline, preemption,
scancel, hang, requeue, a lost node) is ``lifecycle.stop``, carried out by
``commit`` and ``send``: it records why (kill_reason), and the script's
BatchFinished then ends the run as that reason says (``end_run``, deciding
by ``lifecycle.batch_ended``). A job without a batch script (an srun or
salloc allocation) has no script to report its end: ``lifecycle.stop`` ends
it at once, in the same state; ``lifecycle.released`` ends it when its
client releases it.

Each report is idempotent: a result that arrives twice (once on the stream,
once again in the next Register) changes nothing the second time.
"""
from __future__ import annotations

import logging
from lingjun import launchers, slurm
from lingjun.filenames import default_stdout, expand_pattern, resolve_path
from lingjun.v1 import agent_pb2
from lingjund import lifecycle
from lingjund.service import confine, jobenv, quarantine, restarts, topology
from lingjund.service.context import Controller
from lingjund.service.resources import node_mps_per_gpu
from lingjund.store.store import JobRecord, StepRecord

log = logging.getLogger("lingjund.batch")

# What slurmstepd writes into a stopped batch script's stderr after "DUE TO"
# (src/slurmd/slurmstepd/req.c), by why the job was stopped; "" for scancel
# (no "DUE TO"). A stop not in here (a deadline, a hang, a straggler: ours)
# writes no line.
STEPD_CAUSES = {
    slurm.CANCELLED: "",
    slurm.TIMEOUT: "TIME LIMIT",
    slurm.PREEMPTED: "PREEMPTION",
    lifecycle.REQUEUE: "JOB REQUEUE",
    lifecycle.REQUEUE_HOLD: "JOB REQUEUE",
    lifecycle.NODE_LOST: "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS",
}


def output_paths(job: JobRecord) -> tuple[str, str]:
    """The batch script's stdout and stderr files on its node (``job.batch_host``),
    patterns expanded; stderr "" = the same file as stdout."""
    spec = job.spec
    subst = dict(job_id=job.job_id, job_name=job.name, user=job.user, node=job.batch_host,
                 node_index=0, task_id=0, array_job_id=job.array_job_id,
                 array_task_id=job.array_task_id if job.array_task_id >= 0 else None)
    out_pat = spec.stdout_pattern or default_stdout(bool(job.array_job_id))
    stdout = resolve_path(expand_pattern(out_pat, **subst), spec.work_dir)
    stderr = resolve_path(expand_pattern(spec.stderr_pattern, **subst), spec.work_dir) \
        if spec.stderr_pattern else ""
    return stdout, stderr


def launch_message(ctl: Controller, job: JobRecord) -> agent_pb2.ControllerMessage:
    spec = job.spec
    node = job.batch_host
    stdout, stderr = output_paths(job)
    env = jobenv.batch_env(job, ctl.cluster, ctl.address, master_addr=node_address(ctl, node),
                             topology=ctl.config.topology.index)
    env.update(jobenv.checkpoint_env(ctl.config, job))   # checkpoint dir, heartbeat file
    if job.gpu_ids and node in job.nodes:   # the rail NICs beside its GPUs there, for NCCL
        env.update(topology.rail_hint(ctl, node, job.gpu_ids[job.nodes.index(node)], env))
    return agent_pb2.ControllerMessage(launch_batch=agent_pb2.LaunchBatch(
        job_id=job.job_id, script=spec.script, argv=list(spec.argv),
        environment=env,
        work_dir=spec.work_dir, stdout_path=stdout, stderr_path=stderr,
        stdin_path=spec.stdin_path or "/dev/null", uid=spec.uid, gid=spec.gid,
        user=spec.user, append=spec.open_mode == "append", launcher=spec.launcher,
        share=confine.node_share(job, node, node_mps_per_gpu(ctl, node))))


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
                           step_nodes=others, tasks_per_node=[1] * len(others), base_env=base,
                           topology=ctl.config.topology.index)
    for node in others:
        cpus = job.cpus_per_node[job.nodes.index(node)] if job.cpus_per_node else 1
        ctl.agents.send(node, agent_pb2.ControllerMessage(launch_tasks=agent_pb2.LaunchTasks(
            job_id=job.job_id, step_id=launchers.SERVICE_STEP_ID,
            argv=launchers.worker_argv(name, addr, port, cpus), environment=envs[node],
            work_dir=job.spec.work_dir, tasks=[agent_pb2.TaskSpec(rank=0, local_id=0)],
            uid=job.spec.uid, gid=job.spec.gid, share=confine.node_share(job, node, node_mps_per_gpu(ctl, node)))))
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
        # Nodes whose agents are gone clean up when they reconcile at registration.
        end = lifecycle.batch_ended(job, now, end_time=res.end_time or now,
                                    exit_code=res.exit_code, signal=res.signal, error=res.error,
                                    lost=lost, out_of_memory=res.out_of_memory,
                                    alive=alive(ctl, job),
                                    policy=restarts.policy(ctl, st, job, now))
        if end is None:
            return False
        if (end.attempt_state or end.state) in (slurm.FAILED, slurm.NODE_FAIL):
            restarts.avoid(st, job.job_id, quarantine.run_failed(ctl, st, job.job_id, now))
            job = st.job(job.job_id)
        else:
            quarantine.forget_run(ctl, job.job_id)
        commit_run_end(st, job, end, res, now)
    requeued = end.outcome in (lifecycle.REQUEUED, lifecycle.RESTART, lifecycle.CRON)
    log.info("job=%d ended %s (exit %d:%d) on %s%s", job.job_id,
             "and was requeued" if requeued else end.state, res.exit_code,
             res.signal, node, f": {res.error}" if res.error else "")
    cleanup = agent_pb2.ControllerMessage(terminate_job=agent_pb2.TerminateJob(
        job_id=job.job_id, grace_s=min(2.0, ctl.config.controller.kill_wait_s), reason="job ended"))
    for n in end.terminate:
        ctl.agents.send(n, cleanup)
    ctl.wake_scheduler()
    ctl.jobs_changed()
    return True


def commit_run_end(st, job: JobRecord, end: lifecycle.RunEnd, res: agent_pb2.BatchFinished,
                   now: float) -> None:
    """Write the end of ``job``'s batch run that the lifecycle decided
    (``lifecycle.batch_ended``) inside the caller's transaction ``st``: the job
    row, its history (restarts.record_run_end) and the batch step. ``res``:
    its script's result, or what stands for it when the script was lost with
    its node. The caller sends ``end.terminate`` their cleanup after the commit."""
    end_time = res.end_time or now
    restarts.record_run_end(st, job, end, end_time, res.exit_code, res.signal, now)
    st.update_job(job.job_id, **end.fields)
    host = job.batch_host
    st.put_step(StepRecord(
        job_id=job.job_id, step_id="batch", name="batch", state=end.step_state,
        exit_code=res.exit_code, exit_signal=res.signal, nodes=(host,), num_tasks=1,
        num_cpus=job.cpus_per_node[0] if job.cpus_per_node else 1,
        start_time=res.start_time or job.start_time, end_time=end_time,
        max_rss_kb=res.max_rss_kb, ave_rss_kb=res.ave_rss_kb, max_rss_node=host,
        user_cpu_ms=res.user_cpu_ms, system_cpu_ms=res.system_cpu_ms,
        gpus=job.gpus_per_node[0] if job.gpus_per_node else 0,
        mem_mb=max(job.mem_per_node[0], 0) if job.mem_per_node else 0,
        gpu_util_ave=res.gpu_util_ave, gpu_util_max=res.gpu_util_max,
        gpu_mem_ave_kb=res.gpu_mem_ave_kb, gpu_mem_max_kb=res.gpu_mem_max_kb))
    for n in job.nodes:
        st.put_node(n, last_busy_time=now)


# -- carrying out the lifecycle's transitions -------------------------------------------
def alive(ctl: Controller, job: JobRecord) -> frozenset[str]:
    """The nodes of ``job`` whose agents have a stream: those that can clean up now."""
    return frozenset(n for n in job.nodes if ctl.agents.connected(n))


def commit(st, job: JobRecord, t: lifecycle.Transition, now: float) -> None:
    """Write a transition the lifecycle decided for ``job`` (as loaded in the
    caller's transaction ``st``). Send it with ``send`` after the commit."""
    st.update_job(t.job_id, **t.fields)
    if t.ended and job.state == slurm.RUNNING:
        for n in job.nodes:
            st.put_node(n, last_busy_time=now)


def send(ctl: Controller, transitions: list[lifecycle.Transition]) -> None:
    """After the transitions' transaction has committed: tell the nodes."""
    for t in transitions:
        if not t.terminate:
            continue
        cause = STEPD_CAUSES.get(t.fields.get("kill_reason", ""))
        msg = agent_pb2.ControllerMessage(terminate_job=agent_pb2.TerminateJob(
            job_id=t.job_id, grace_s=t.grace_s, reason=t.why, announce=cause is not None,
            cause=cause or ""))
        for n in t.terminate:
            ctl.agents.send(n, msg)
    if any(t.ended for t in transitions):
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
            st.update_job(job.job_id, **lifecycle.RELEASED)
    if not left:
        log.info("job=%d released its nodes", job.job_id)
        ctl.wake_scheduler()
