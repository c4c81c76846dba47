"""What the scheduling core sees and what it hands back.

The core (``lingjund.sched.cycle.schedule``) is a pure function: a frozen
``Snapshot`` of the cluster plus ``now`` in, a ``Plan`` out. No SQLite, no
gRPC, no clock. The service layer builds the snapshot from the store, calls
the core, and commits the plan in one transaction.

Units: CPUs are counts, memory is MB, times are Unix seconds, time limits
are minutes with ``UNLIMITED`` (-1) for none.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

UNLIMITED = -1


@dataclass(frozen=True)
class NodeView:
    """One node as the scheduler may use it right now."""

    name: str
    cpus: int
    memory_mb: int
    gpus: int = 0
    alloc_cpus: int = 0
    alloc_memory_mb: int = 0
    alloc_gpus: int = 0
    # Some running job holds this node exclusively (nothing else may start).
    exclusive: bool = False
    # Number of jobs with an allocation here (an exclusive job needs 0).
    running_jobs: int = 0
    # Registered, responding, not DRAIN, not DOWN: new work may start here.
    schedulable: bool = True
    partitions: tuple[str, ...] = ()
    weight: int = 1
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class PartitionView:
    name: str
    nodes: tuple[str, ...]
    default: bool = False
    state: str = "UP"                 # UP, DOWN, DRAIN, INACTIVE
    max_time_min: int = UNLIMITED
    default_time_min: int = UNLIMITED
    max_nodes: int = UNLIMITED
    min_nodes: int = 0
    priority_tier: int = 1
    total_cpus: int = 0               # CPUs of all its nodes; 0 = not known (no check)


@dataclass(frozen=True)
class JobRequest:
    """A pending job: what it asks for, and where it stands in the queue."""

    job_id: int
    priority: int
    submit_time: float
    partition: str
    min_nodes: int = 1
    max_nodes: int = 0                # 0 = min_nodes
    num_tasks: int = 0                # 0 = not given
    ntasks_per_node: int = 0          # 0 = not given
    cpus_per_task: int = 1
    mem_per_node_mb: int | None = None  # None = not given (not reserved); 0 = whole node
    gpus_per_node: int = 0
    exclusive: bool = False
    time_limit_min: int = UNLIMITED   # effective limit (partition default applied)
    held: bool = False
    begin_time: float = 0.0


@dataclass(frozen=True)
class RunningJob:
    job_id: int
    nodes: tuple[str, ...]
    end_time: float = 0.0             # expected end (start + limit); 0 = unlimited
    exclusive: bool = False


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[NodeView, ...]
    partitions: tuple[PartitionView, ...]
    pending: tuple[JobRequest, ...]
    running: tuple[RunningJob, ...] = ()


@dataclass(frozen=True)
class Start:
    """Start ``job_id`` on ``nodes`` (rank order) with these per-node shares."""

    job_id: int
    nodes: tuple[str, ...]
    cpus_per_node: tuple[int, ...]
    mem_per_node_mb: tuple[int, ...]
    gpus_per_node: tuple[int, ...]
    tasks_per_node: tuple[int, ...]
    exclusive: bool = False


@dataclass(frozen=True)
class Plan:
    starts: tuple[Start, ...] = ()
    # A Slurm pending-reason word for every pending job that does not start.
    reasons: Mapping[int, str] = field(default_factory=dict)
