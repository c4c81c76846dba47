"""What a job asks for and what a node has, as the scheduling core counts them.

``job_request`` turns a job's spec and record fields into the core's
``JobRequest`` (``gpus_per_node``: -G and --gpus-per-task spread over the
nodes); ``node_capacity`` and the other ``node_*`` read a node's CPUs,
memory, GPUs, shared GPUs, features and GPU type from the configuration,
else from what its agent reported. No cache and no decision: plain
functions over one job or one node.

They live below the operations that need them, each of which keeps its own
business: ``views`` (the pass's kept views), ``priority`` (a job's factors at
submission and for sprio), ``associations`` (a job's GPUs against its
limits), ``catalog``, ``jobs``, ``nodes``, ``batch`` and ``steps``. When
they were part of ``views``, which asks ``priority`` for each pending
job's request, ``priority`` could import them only inside its functions
(DESIGN.md: shared steps are functions of the layer below).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lingjun import slurm
from lingjund.sched.snapshot import UNLIMITED, JobRequest
from lingjund.store.records import NodeRecord

if TYPE_CHECKING:
    from lingjund.service.context import Controller


def job_request(job_id: int, spec, partition: str, *, priority: int, submit_time: float,
                time_limit_min: int, exclusive: bool, held: bool, begin_time: float,
                hold_admin: bool = False, dependency: str = "",
                array_tasks: tuple[int, ...] = (), array_slots: int = UNLIMITED,
                max_switch_wait_s: float = 300.0,
                priority_set: bool = False, user: str = "", fairshare: float = 1.0,
                qos_factor: float = 0.0, assoc_factor: float = 0.0,
                restarts: int = 0) -> JobRequest:
    """What the scheduling core needs of one job (pending, or a --test-only probe).
    A --switches job waits for its leaves from when it is eligible, for its own
    @max-time or else the cluster's ``max_switch_wait_s``."""
    user = user or spec.user or str(spec.uid)
    min_nodes = spec.min_nodes or 1
    switches_until = math.inf
    if spec.switches:
        wait = spec.switch_wait_s if spec.HasField("switch_wait_s") else max_switch_wait_s
        switches_until = max(submit_time, begin_time) + wait
    return JobRequest(
        job_id=job_id, priority=priority, submit_time=submit_time,
        partition=partition, min_nodes=min_nodes,
        # -n without -N: Slurm spreads the tasks over as many nodes as it takes
        max_nodes=spec.max_nodes or (spec.num_tasks if spec.num_tasks and not spec.min_nodes else 0),
        num_tasks=spec.num_tasks, ntasks_per_node=spec.ntasks_per_node,
        cpus_per_task=spec.cpus_per_task or 1,
        mem_per_node_mb=spec.mem_per_node_mb if spec.HasField("mem_per_node_mb") else None,
        gpus_per_node=gpus_per_node(spec, min_nodes), exclusive=exclusive,
        shards_per_node=spec.shards_per_node, mps_per_node=spec.mps_per_node,
        time_limit_min=time_limit_min, held=held, begin_time=begin_time,
        req_nodes=tuple(slurm.expand_hostlist(spec.req_nodes)),
        # -x, and where its earlier runs failed (restarts.avoid)
        exc_nodes=tuple(slurm.expand_hostlist(spec.exc_nodes))
        + tuple(slurm.expand_hostlist(spec.failed_nodes)),
        constraint=spec.constraint, gpu_type=spec.gpu_type,
        mem_per_cpu_mb=spec.mem_per_cpu_mb if spec.HasField("mem_per_cpu_mb") else None,
        cpus_per_gpu=spec.cpus_per_gpu,
        mem_per_gpu_mb=spec.mem_per_gpu_mb if spec.HasField("mem_per_gpu_mb") else None,
        hold_admin=hold_admin, dependency=dependency,
        array_tasks=array_tasks, array_slots=array_slots,
        switches=spec.switches, switches_until=switches_until, segment=spec.segment,
        nice=spec.nice, priority_set=priority_set, user=user, account=spec.account or user,
        qos=spec.qos or "normal", fairshare=fairshare, qos_factor=qos_factor,
        assoc_factor=assoc_factor, expedite=spec.requeue_expedite and restarts > 0)


def gpus_per_node(spec, nodes: int) -> int:
    """GPUs each node must give: --gpus-per-node / --gres, else -G spread over the
    nodes, else --gpus-per-task times the most tasks a node runs (-n 5 on 2
    nodes with --gpus-per-task=1: 3 per node)."""
    if spec.gpus_per_node:
        return spec.gpus_per_node
    if spec.gpus:
        return math.ceil(spec.gpus / max(1, nodes))
    if spec.gpus_per_task:
        tasks = spec.ntasks_per_node or math.ceil((spec.num_tasks or 1) / max(1, nodes))
        return spec.gpus_per_task * tasks
    return 0


def node_capacity(ctl: Controller, name: str, rec: NodeRecord | None = None
                  ) -> tuple[int, int, int] | None:
    """(cpus, memory_mb, gpus) of a node: configured values, else what it reported."""
    cfg = ctl.config.node(name)
    rec = rec or ctl.store.node(name)
    inv = rec.inventory if rec else None
    cpus = (cfg.cpus if cfg and cfg.cpus else 0) or (inv.cpus if inv else 0)
    mem = (cfg.memory_mb if cfg and cfg.memory_mb else 0) or (inv.real_memory_mb if inv else 0)
    gpus = (cfg.gpus if cfg else 0) or (inv.gpus if inv else 0)
    if not cpus:
        return None
    return cpus, mem, gpus


def node_shared_gpus(ctl: Controller, name: str) -> tuple[int, int]:
    """(shards, mps) a node shares out over its GPUs (config [[nodes]] shards, mps)."""
    cfg = ctl.config.node(name)
    return (cfg.shards, cfg.mps) if cfg else (0, 0)


def node_mps_per_gpu(ctl: Controller, name: str) -> int:
    """A node's MPS count per GPU (its mps spread evenly over its GPUs); 0 = none."""
    mps = node_shared_gpus(ctl, name)[1]
    if not mps:
        return 0
    cap = node_capacity(ctl, name)
    return mps // cap[2] if cap and cap[2] else 0


def node_features(ctl: Controller, name: str) -> tuple[str, ...]:
    """A node's features (config [[nodes]] features): sinfo %f, -C."""
    cfg = ctl.config.node(name)
    return cfg.features if cfg else ()


def node_gpu_type(ctl: Controller, name: str, rec=None) -> str:
    """A node's GPU type: configured, else what its agent reported ("" = untyped).

    ``rec`` is the node's store record when the caller already has it."""
    cfg = ctl.config.node(name)
    if cfg and cfg.gpu_type:
        return cfg.gpu_type
    typed = next((g.type for g in cfg.gpu if g.type), "") if cfg else ""
    if typed:
        return typed
    rec = rec or ctl.store.node(name)
    return rec.inventory.gpu_type if rec else ""
