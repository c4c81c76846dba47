"""A scheduling pass: snapshot the store, ask the pure core, commit its plan.

Decide, then commit: the core sees a frozen snapshot; the plan is applied in
one transaction that re-checks each job is still PENDING (a cancel may have
raced the pass), and only after the commit are launches sent to agents.
A pass starts by carrying out the job timers that are due (time limits,
--signal warnings, deadlines, grace times: ``timers.enforce``, decided in
``lingjund/lifecycle.py``), as slurmctld checks time limits before it schedules.
"""
from __future__ import annotations

import logging

from lingjun import slurm
from lingjund.sched.cycle import schedule
from lingjund.sched.snapshot import (UNLIMITED, JobRequest, NodeView, PartitionView, Plan,
                                     RunningJob, Snapshot, Start)
from lingjund.service import batch, dependencies, faulttol, health, preemption, timers
from lingjund.service.context import Controller
from lingjund.service.jobs import (gpus_per_node, node_capacity, node_features, node_gpu_type,
                                   split_task)
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


def build_snapshot(ctl: Controller, now: float,
                   dependency_reasons: dict[int, str] | None = None) -> Snapshot:
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
            features=node_features(ctl, name), gpu_type=node_gpu_type(ctl, name, rec)))
    part_views = tuple(PartitionView(
        name=p.name, nodes=tuple(ctl.partition_nodes(p)), default=p.default, state=p.state,
        max_time_min=p.max_time_min, default_time_min=p.default_time_min,
        max_nodes=p.max_nodes, min_nodes=p.min_nodes, priority_tier=p.priority_tier,
        total_cpus=sum(v.cpus for v in node_views if p.name in v.partitions),
        preempt_mode=ctl.config.preempt_mode(p))
        for p in parts)
    running_tasks: dict[int, int] = {}
    for j in holding:
        if j.array_job_id and j.state == slurm.RUNNING:
            running_tasks[j.array_job_id] = running_tasks.get(j.array_job_id, 0) + 1
    pending = []
    dependency_reasons = dependency_reasons or {}
    for job in st.jobs(states=[slurm.PENDING]):
        if job.completing:
            continue    # requeued, its last run still cleaning up its nodes
        array: dict = {}
        if job.array_task_str:       # an array's pending remainder: one request for all
            slots = UNLIMITED
            if job.array_max_running:
                slots = max(0, job.array_max_running - running_tasks.get(job.array_job_id, 0))
            array = dict(array_tasks=tuple(slurm.unfold_indices(job.array_task_str)),
                         array_slots=slots)
        pending.append(job_request(
            job.job_id, job.spec, job.partition, priority=job.priority,
            submit_time=job.submit_time, time_limit_min=job.time_limit_min,
            exclusive=job.exclusive, held=job.held, begin_time=job.eligible_time,
            hold_admin=job.hold_admin, dependency=dependency_reasons.get(job.job_id, ""),
            **array))
    running = tuple(RunningJob(
        job_id=j.job_id, nodes=j.nodes, exclusive=j.exclusive,
        end_time=(j.start_time + j.time_limit_min * 60) if j.time_limit_min > 0 else 0.0,
        cpus_per_node=j.cpus_per_node, mem_per_node_mb=j.mem_per_node,
        gpus_per_node=j.gpus_per_node, partition=j.partition, priority=j.priority,
        start_time=j.start_time, stopping=j.state != slurm.RUNNING or bool(j.kill_reason))
        for j in holding)
    return Snapshot(nodes=tuple(node_views), partitions=part_views,
                    pending=tuple(pending), running=running,
                    preempt_exempt_s=ctl.config.preempt.exempt_time_s)


def job_request(job_id: int, spec, partition: str, *, priority: int, submit_time: float,
                time_limit_min: int, exclusive: bool, held: bool, begin_time: float,
                hold_admin: bool = False, dependency: str = "",
                array_tasks: tuple[int, ...] = (), array_slots: int = UNLIMITED) -> JobRequest:
    """What the scheduling core needs of one job (pending, or a --test-only probe)."""
    min_nodes = spec.min_nodes or 1
    return JobRequest(
        job_id=job_id, priority=priority, submit_time=submit_time,
        partition=partition, min_nodes=min_nodes,
        # -n without -N: Slurm spreads the tasks over as many nodes as it takes
        max_nodes=spec.max_nodes or (spec.num_tasks if spec.num_tasks and not spec.min_nodes else 0),
        num_tasks=spec.num_tasks, ntasks_per_node=spec.ntasks_per_node,
        cpus_per_task=spec.cpus_per_task or 1,
        mem_per_node_mb=spec.mem_per_node_mb if spec.HasField("mem_per_node_mb") else None,
        gpus_per_node=gpus_per_node(spec, min_nodes), exclusive=exclusive,
        time_limit_min=time_limit_min, held=held, begin_time=begin_time,
        req_nodes=tuple(slurm.expand_hostlist(spec.req_nodes)),
        exc_nodes=tuple(slurm.expand_hostlist(spec.exc_nodes)),
        constraint=spec.constraint, gpu_type=spec.gpu_type,
        mem_per_cpu_mb=spec.mem_per_cpu_mb if spec.HasField("mem_per_cpu_mb") else None,
        hold_admin=hold_admin, dependency=dependency,
        array_tasks=array_tasks, array_slots=array_slots)


def _running_fields(job: JobRecord, s: Start, now: float) -> dict:
    end = now + job.time_limit_min * 60 if job.time_limit_min > 0 else 0
    return dict(state=slurm.RUNNING, reason=slurm.REASON_NONE,
                start_time=now, end_time=end, nodes=s.nodes,
                cpus_per_node=s.cpus_per_node, mem_per_node=s.mem_per_node_mb,
                gpus_per_node=s.gpus_per_node, tasks_per_node=s.tasks_per_node,
                batch_host=s.nodes[0], launched=False, warn_signal_sent=False)


def apply_plan(ctl: Controller, plan: Plan, now: float) -> list[JobRecord]:
    started: list[JobRecord] = []
    with ctl.store.transaction() as st:
        for s in plan.starts:
            job = st.job(s.job_id)
            if job is None or job.state != slurm.PENDING:
                continue  # changed since the snapshot: skip, the next pass sees it
            if s.array_task_id >= 0 and job.array_task_str:
                if s.array_task_id not in slurm.unfold_indices(job.array_task_str):
                    continue  # cancelled since the snapshot
                task_job = split_task(st, job, s.array_task_id, **_running_fields(job, s, now))
                started.append(st.job(task_job))
                continue
            st.update_job(job.job_id, **_running_fields(job, s, now))
            started.append(st.job(job.job_id))
        for job_id, reason in plan.reasons.items():
            job = st.job(job_id)
            if job is not None and job.state == slurm.PENDING and job.reason != reason:
                st.update_job(job_id, reason=reason)
    return started


def run_pass(ctl: Controller) -> int:
    """One pass; returns the number of jobs started."""
    now = ctl.clock()
    timers.enforce(ctl, now)       # time limits, --signal, deadlines, grace times
    waiting = dependencies.settle(ctl, now)
    snap = build_snapshot(ctl, now, waiting)
    if not snap.pending:
        return 0
    plan = schedule(snap, now, preemption.profile(ctl))
    started = apply_plan(ctl, plan, now)
    if preemption.preempt(ctl, plan.preemptions, now):
        timers.enforce(ctl, now)       # GraceTime=0: stop them now
    for job in started:
        task = f" (array {job.array_job_id}_{job.array_task_id})" if job.array_job_id else ""
        log.info("job=%d%s started on %s", job.job_id, task,
                 slurm.compress_hostlist(list(job.nodes)))
        if health.wants_prolog(ctl, job):
            health.start_prolog(ctl, job)       # the script follows the prolog
        elif job.spec.batch:
            ctl.agents.send(job.batch_host, batch.launch_message(ctl, job))
        # an allocation (srun/salloc) has no script: its client runs steps once told
    if started:
        faulttol.after_starts(ctl, started)
        ctl.jobs_changed()
    return len(started)
