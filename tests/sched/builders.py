"""Keyword builders for scheduling-core tests: a node, a job, a partition, a cluster.

Defaults describe the common case (a 4-CPU, 16 GB idle node; a one-node,
one-CPU job in partition ``debug``) so each test spells out only what it is
about.
"""
from __future__ import annotations

from lingjun.slurm import compress_hostlist, expand_hostlist
from lingjund.sched.snapshot import (JobRequest, NodeView, PartitionView, Plan,
                                     Snapshot)


def node(name: str, cpus: int = 4, mem: int = 16000, gpus: int = 0, *,
         alloc_cpus: int = 0, alloc_mem: int = 0, alloc_gpus: int = 0,
         jobs: int | None = None, **kw) -> NodeView:
    """A node; ``jobs`` defaults to 1 when anything is allocated, else 0."""
    if jobs is None:
        jobs = 1 if (alloc_cpus or alloc_mem or alloc_gpus or kw.get("exclusive")) else 0
    return NodeView(name=name, cpus=cpus, memory_mb=mem, gpus=gpus,
                    alloc_cpus=alloc_cpus, alloc_memory_mb=alloc_mem, alloc_gpus=alloc_gpus,
                    running_jobs=jobs, **kw)


def busy(name: str, cpus: int = 4, **kw) -> NodeView:
    """A node whose CPUs are all taken by one running job."""
    return node(name, cpus, alloc_cpus=cpus, **kw)


def job(job_id: int, *, prio: int = 100, nodes: int = 1, submit: float | None = None,
        part: str = "debug", cpus: int = 1, mem: int | None = None, gpus: int = 0,
        **kw) -> JobRequest:
    """A pending job; ``submit`` defaults to the job id, so ids read as FIFO order."""
    return JobRequest(job_id=job_id, priority=prio,
                      submit_time=float(job_id if submit is None else submit),
                      partition=part, min_nodes=nodes, cpus_per_task=cpus,
                      mem_per_node_mb=mem, gpus_per_node=gpus, **kw)


def partition(name: str = "debug", nodes: str | tuple[str, ...] = (), **kw) -> PartitionView:
    names = tuple(expand_hostlist(nodes)) if isinstance(nodes, str) else tuple(nodes)
    return PartitionView(name=name, nodes=names, **kw)


def cluster(nodes, jobs, partitions=None) -> Snapshot:
    """A snapshot; without ``partitions`` one UP partition ``debug`` holds every node."""
    nodes = tuple(nodes)
    if partitions is None:
        partitions = (partition("debug", tuple(n.name for n in nodes), default=True),)
    in_part = {n.name: tuple(p.name for p in partitions if n.name in p.nodes) for n in nodes}
    nodes = tuple(n if n.partitions else NodeView(**{**n.__dict__, "partitions": in_part[n.name]})
                  for n in nodes)
    return Snapshot(nodes=nodes, partitions=tuple(partitions), pending=tuple(jobs))


def outcomes(plan: Plan) -> dict[int, str]:
    """job id -> hostlist it starts on ("node[1-2]"), or its pending reason."""
    out = {s.job_id: compress_hostlist(s.nodes) for s in plan.starts}
    out.update(plan.reasons)
    return out
