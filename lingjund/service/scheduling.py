"""A scheduling pass: snapshot the store, ask the pure core, commit its plan.

Decide, then commit: the core sees a frozen snapshot; the plan is applied in
one transaction that re-checks each job is still PENDING (a cancel may have
raced the pass), and only after the commit are launches sent to agents.
Time limits are enforced here too, on the same timer.
"""
from __future__ import annotations

import logging

from lingjun import slurm
from lingjun.filenames import default_stdout, expand_pattern, resolve_path
from lingjun.v1 import agent_pb2
from lingjund.sched.cycle import schedule
from lingjund.sched.snapshot import (JobRequest, NodeView, PartitionView, Plan,
                                     RunningJob, Snapshot)
from lingjund.service import jobenv
from lingjund.service.context import Controller
from lingjund.service.jobs import node_capacity, terminate_on_nodes
from lingjund.store.store import JobRecord

log = logging.getLogger("lingjund.sched")


def allocations(holding: list[JobRecord]) -> dict[str, dict]:
    """node -> {cpus, mem, gpus, jobs, exclusive} held by running/completing jobs."""
    out: dict[str, dict] = {}
    for job in holding:
        for i, node in enumerate(job.nodes):
            a = out.setdefault(node, {"cpus": 0, "mem": 0, "gpus": 0, "jobs": [], "exclusive": False})
            a["cpus"] += job.cpus_per_node[i] if i < len(job.cpus_per_node) else 0
            a["mem"] += job.mem_per_node[i] if i < len(job.mem_per_node) else 0
            a["gpus"] += job.gpus_per_node[i] if i < len(job.gpus_per_node) else 0
            a["jobs"].append(job.job_id)
            a["exclusive"] |= job.exclusive
    return out


def build_snapshot(ctl: Controller, now: float) -> Snapshot:
    st = ctl.store
    holding = st.holding_jobs()
    alloc = allocations(holding)
    records = st.nodes()
    parts = ctl.partitions()
    node_views = []
    for name in ctl.known_nodes():
        cap = node_capacity(ctl, name)
        rec = records.get(name)
        if cap is None:
            continue
        a = alloc.get(name, {"cpus": 0, "mem": 0, "gpus": 0, "jobs": [], "exclusive": False})
        cfg = ctl.config.node(name)
        node_views.append(NodeView(
            name=name, cpus=cap[0], memory_mb=cap[1], gpus=cap[2],
            alloc_cpus=a["cpus"], alloc_memory_mb=a["mem"], alloc_gpus=a["gpus"],
            exclusive=a["exclusive"], running_jobs=len(a["jobs"]),
            schedulable=bool(rec and rec.registered and not rec.drain and not rec.down
                             and ctl.agents.connected(name)),
            partitions=tuple(p.name for p in parts if p.nodes is None or name in p.nodes),
            weight=cfg.weight if cfg else 1,
            features=cfg.features if cfg else ()))
    part_views = tuple(PartitionView(
        name=p.name, nodes=tuple(ctl.partition_nodes(p)), default=p.default, state=p.state,
        max_time_min=p.max_time_min, default_time_min=p.default_time_min,
        max_nodes=p.max_nodes, min_nodes=p.min_nodes, priority_tier=p.priority_tier,
        total_cpus=sum(v.cpus for v in node_views if p.name in v.partitions))
        for p in parts)
    pending = []
    for job in st.jobs(states=[slurm.PENDING]):
        spec = job.spec
        pending.append(JobRequest(
            job_id=job.job_id, priority=job.priority, submit_time=job.submit_time,
            partition=job.partition, min_nodes=spec.min_nodes or 1,
            # -n without -N: Slurm spreads the tasks over as many nodes as it takes
            max_nodes=spec.max_nodes or (spec.num_tasks if spec.num_tasks and not spec.min_nodes else 0),
            num_tasks=spec.num_tasks, ntasks_per_node=spec.ntasks_per_node,
            cpus_per_task=spec.cpus_per_task or 1,
            mem_per_node_mb=spec.mem_per_node_mb if spec.HasField("mem_per_node_mb") else None,
            gpus_per_node=spec.gpus_per_node, exclusive=job.exclusive,
            time_limit_min=job.time_limit_min, held=job.held, begin_time=job.eligible_time))
    running = tuple(RunningJob(
        job_id=j.job_id, nodes=j.nodes, exclusive=j.exclusive,
        end_time=(j.start_time + j.time_limit_min * 60) if j.time_limit_min > 0 else 0.0)
        for j in holding)
    return Snapshot(nodes=tuple(node_views), partitions=part_views,
                    pending=tuple(pending), running=running)


def launch_message(ctl: Controller, job: JobRecord) -> agent_pb2.ControllerMessage:
    spec = job.spec
    node = job.batch_host
    subst = dict(job_id=job.job_id, job_name=job.name, user=job.user, node=node,
                 node_index=0, task_id=0)
    out_pat = spec.stdout_pattern or default_stdout(False)
    stdout = resolve_path(expand_pattern(out_pat, **subst), spec.work_dir)
    stderr = resolve_path(expand_pattern(spec.stderr_pattern, **subst), spec.work_dir) \
        if spec.stderr_pattern else ""
    return agent_pb2.ControllerMessage(launch_batch=agent_pb2.LaunchBatch(
        job_id=job.job_id, script=spec.script, argv=list(spec.argv),
        environment=jobenv.batch_env(job, ctl.cluster, ctl.address),
        work_dir=spec.work_dir, stdout_path=stdout, stderr_path=stderr,
        stdin_path=spec.stdin_path or "/dev/null", uid=spec.uid, gid=spec.gid,
        user=spec.user, append=spec.open_mode == "append"))


def apply_plan(ctl: Controller, plan: Plan, now: float) -> list[JobRecord]:
    started: list[JobRecord] = []
    with ctl.store.transaction() as st:
        for s in plan.starts:
            job = st.job(s.job_id)
            if job is None or job.state != slurm.PENDING:
                continue  # changed since the snapshot: skip, the next pass sees it
            end = now + job.time_limit_min * 60 if job.time_limit_min > 0 else 0
            st.update_job(job.job_id, state=slurm.RUNNING, reason=slurm.REASON_NONE,
                          start_time=now, end_time=end, nodes=s.nodes,
                          cpus_per_node=s.cpus_per_node, mem_per_node=s.mem_per_node_mb,
                          gpus_per_node=s.gpus_per_node, tasks_per_node=s.tasks_per_node,
                          batch_host=s.nodes[0], launched=False)
            started.append(st.job(job.job_id))
        for job_id, reason in plan.reasons.items():
            job = st.job(job_id)
            if job is not None and job.state == slurm.PENDING and job.reason != reason:
                st.update_job(job_id, reason=reason)
    return started


def run_pass(ctl: Controller) -> int:
    """One pass; returns the number of jobs started."""
    now = ctl.clock()
    enforce_time_limits(ctl, now)
    snap = build_snapshot(ctl, now)
    if not snap.pending:
        return 0
    plan = schedule(snap, now)
    started = apply_plan(ctl, plan, now)
    for job in started:
        log.info("job=%d started on %s", job.job_id, slurm.compress_hostlist(list(job.nodes)))
        ctl.agents.send(job.batch_host, launch_message(ctl, job))
    return len(started)


def enforce_time_limits(ctl: Controller, now: float) -> None:
    over = [j for j in ctl.store.jobs(states=[slurm.RUNNING])
            if j.time_limit_min > 0 and not j.kill_reason and j.end_time and now >= j.end_time]
    if not over:
        return
    with ctl.store.transaction() as st:
        for job in over:
            st.update_job(job.job_id, kill_reason=slurm.TIMEOUT)
    for job in over:
        log.info("job=%d reached its time limit of %d min", job.job_id, job.time_limit_min)
        terminate_on_nodes(ctl, job, "time limit")


def next_deadline(ctl: Controller) -> float | None:
    ends = [j.end_time for j in ctl.store.jobs(states=[slurm.RUNNING])
            if j.end_time and not j.kill_reason]
    return min(ends) if ends else None
