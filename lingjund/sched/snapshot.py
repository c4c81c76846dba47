"""What the scheduling core sees and what it hands back.

The core (``lingjund.sched.cycle.schedule``) is a pure function: a frozen
``Snapshot`` of the cluster plus ``now`` in, a ``Plan`` out. No SQLite, no
gRPC, no clock. The service layer builds the snapshot from the store, calls
the core, and commits the plan in one transaction.

Units: CPUs are counts, memory is MB, times are Unix seconds, time limits
are minutes with ``UNLIMITED`` (-1) for none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Mapping

from lingjund.sched.gpu_topology import GpuTopology
from lingjun.topology import Topology

if TYPE_CHECKING:
    from lingjund.sched.limits import Limits

UNLIMITED = -1
# The kinds of shared GPU (NodeView.alloc_shared), named as Slurm's gres are.
SHARD = "shard"
MPS = "mps"


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
    gpu_type: str = ""                # "" = untyped GPUs (or none)
    # GPU indices (0 .. gpus-1) that running jobs hold here; the free ones follow.
    alloc_gpu_ids: tuple[int, ...] = ()
    # NVLink peers, NUMA node and NIC rail of each index (None = not reported:
    # the lowest free indices are given); one object per node, kept across passes.
    gpu_topology: GpuTopology | None = None
    # Shared GPUs (Slurm's gres/shard and gres/mps): the node's counts, spread
    # evenly over its GPUs (shards 8 on 4 GPUs: 2 per GPU), and what running
    # jobs hold of them: (GPU index, SHARD or MPS, count), one entry per job.
    # A GPU with any share held is not free for a whole-GPU job, and one kind
    # never joins the other on a GPU.
    shards: int = 0
    mps: int = 0
    alloc_shared: tuple[tuple[int, str, int], ...] = ()


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
    # PreemptMode of its jobs (OFF: never preempted; CANCEL, REQUEUE)
    preempt_mode: str = "OFF"
    # PriorityJobFactor: its jobs' partition factor (priority/multifactor) is this
    # over the highest of all partitions'
    priority_job_factor: int = 1
    # held back for expedited restarts: no other job may use these (sched/spares.py)
    spares: tuple[str, ...] = ()

    @cached_property
    def node_count(self) -> int:
        """Distinct nodes it names; counted once per view, since every job of
        the partition asks (rebuilding the set per job was most of a pass)."""
        return len(set(self.nodes))


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
    # --gres=shard:N / --gres=mps:P: that many of one GPU's shards (MPS share)
    # on each node; never together with whole GPUs (the submit refuses it).
    shards_per_node: int = 0
    mps_per_node: int = 0
    exclusive: bool = False
    time_limit_min: int = UNLIMITED   # effective limit (partition default applied)
    held: bool = False
    begin_time: float = 0.0
    # Where the job may run (plugins/nodes.py) and memory per CPU.
    req_nodes: tuple[str, ...] = ()   # -w: every one of these is in the allocation
    exc_nodes: tuple[str, ...] = ()   # -x: none of these is
    constraint: str = ""              # -C feature expression; "" = any node
    gpu_type: str = ""                # --gres=gpu:TYPE:N; "" = any type
    mem_per_cpu_mb: int | None = None  # --mem-per-cpu (then mem_per_node_mb is None)
    # --cpus-per-gpu / --mem-per-gpu: a rank's CPUs are at least its GPUs x
    # cpus_per_gpu, its memory its GPUs x mem_per_gpu_mb (then mem_per_node_mb is None).
    cpus_per_gpu: int = 0
    mem_per_gpu_mb: int | None = None
    # Job arrays: a pending remainder is ONE request for up to len(array_tasks)
    # identical tasks (each its own gang), so a 10,000-task array costs one
    # request per pass, not 10,000. ``array_slots`` is how many more tasks may
    # run now (the %N throttle minus tasks running), UNLIMITED without a throttle.
    array_tasks: tuple[int, ...] = ()
    array_slots: int = UNLIMITED

    @property
    def wanted(self) -> int:
        """How many starts this request may get in one pass (1 for a plain job)."""
        if not self.array_tasks:
            return 1
        if self.array_slots == UNLIMITED:
            return len(self.array_tasks)
        return max(0, min(len(self.array_tasks), self.array_slots))
    hold_admin: bool = False          # held by an operator: JobHeldAdmin
    # an expedited restart (--requeue=expedite): first in line, may use the spares
    expedite: bool = False
    # The dependency verdict's reason ("Dependency", "DependencyNeverSatisfied"),
    # "" when it has none (lingjund.sched.dependency decides it).
    dependency: str = ""
    # --switches=N@max-wait: at most N leaf switches until ``switches_until``
    # (Unix seconds), then anywhere; 0 = no limit. --segment=N (topology/block):
    # every N consecutive ranks within one block; 0 = none.
    switches: int = 0
    switches_until: float = math.inf
    segment: int = 0
    # What priority/multifactor weighs (plugins/multifactor.py). ``priority`` is
    # the stored one (priority/basic's order); with ``priority_set`` an operator
    # set it (scontrol update Priority=) and every plugin keeps it.
    nice: int = 0
    priority_set: bool = False
    user: str = ""
    account: str = ""
    qos: str = ""
    site_factor: int = 0
    # normalised to [0, 1] by the service: the QOS's Priority over the highest QOS
    # Priority, the association's over the highest, its fair-share factor
    qos_factor: float = 0.0
    assoc_factor: float = 0.0
    fairshare: float = 1.0


@dataclass(frozen=True)
class RunningJob:
    job_id: int
    nodes: tuple[str, ...]
    end_time: float = 0.0             # expected end (start + limit); 0 = unlimited
    exclusive: bool = False
    # What it holds on each of ``nodes`` (same order), so an estimate can
    # free it at its end time (sched/estimate.py); empty = unknown.
    cpus_per_node: tuple[int, ...] = ()
    mem_per_node_mb: tuple[int, ...] = ()
    gpus_per_node: tuple[int, ...] = ()
    gpu_ids_per_node: tuple[tuple[int, ...], ...] = ()   # which GPUs, per node; () = unknown
    # shards / MPS it holds on each node, on the one GPU gpu_ids_per_node names there
    shards_per_node: int = 0
    mps_per_node: int = 0
    # what preemption weighs (plugins/preempt.py)
    partition: str = ""
    priority: int = 0
    start_time: float = 0.0
    # Already on its way out (being preempted, cancelled, timed out, or
    # cleaning up): never chosen again, and what it holds will come free.
    stopping: bool = False
    # preempt/qos weighs its QOS; lending its account, and whether it runs on
    # quota lent by others (borrowed: preemptible by a job within its limits)
    account: str = ""
    qos: str = ""
    borrowed: bool = False


@dataclass(frozen=True)
class QosView:
    """What preempt/qos reads of a QOS: the QOS its jobs may preempt (Slurm's
    ``Preempt=``), the PreemptMode of its own jobs ("" = their partition's,
    Slurm's ``cluster``) and how long they run before they may be preempted."""

    name: str
    preempt: frozenset[str] = frozenset()
    preempt_mode: str = ""
    # its jobs' PreemptExemptTime in seconds; negative: the cluster's
    exempt_s: float = -1.0


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[NodeView, ...]
    partitions: tuple[PartitionView, ...]
    pending: tuple[JobRequest, ...]
    running: tuple[RunningJob, ...] = ()
    # Slurm's PreemptExemptTime: a job runs this long before it may be preempted.
    preempt_exempt_s: float = 0.0
    # The network's switches (topology/tree, topology/block); None: topology/default.
    topology: Topology | None = None
    # QOS and association limits and the running jobs' usage of them (limits.py);
    # None: not enforced ([accounting] enforce without "limits").
    limits: Limits | None = None
    # QOS name -> what preempt/qos reads of it (only QOS that preempt or set a mode)
    qos: Mapping[str, QosView] = field(default_factory=dict)


@dataclass(frozen=True)
class Preemption:
    """Preempt running job ``victim`` so that pending job ``by`` can start."""

    victim: int
    by: int


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
    array_task_id: int = -1           # the array task this start is for; -1 = a plain job
    # The GPU indices it gets on each node (same order), lowest free first;
    # for a shard or MPS job the one GPU its share is on.
    gpu_ids_per_node: tuple[tuple[int, ...], ...] = ()
    # started on quota lent by others (lending.py): runs with Reason=Borrowed
    borrowed: bool = False


@dataclass(frozen=True)
class Plan:
    # An array's request may start several tasks: one Start per task, each
    # with the same job_id (the array's) and its own array_task_id.
    starts: tuple[Start, ...] = ()
    # A Slurm pending-reason word for every pending job that does not start.
    reasons: Mapping[int, str] = field(default_factory=dict)
    # Running jobs to preempt (whole jobs), each naming the job it makes room for.
    preemptions: tuple[Preemption, ...] = ()
    # Backfill's reservations: for a pending job that waits, when it is expected to
    # start and on which nodes (natural order); only jobs given a reservation.
    expected: Mapping[int, tuple[float, tuple[str, ...]]] = field(default_factory=dict)
    # Pending jobs whose priority in this pass is not the one they hold, when the
    # queue sort computes priorities (priority/multifactor): job id -> priority.
    priorities: Mapping[int, int] = field(default_factory=dict)
