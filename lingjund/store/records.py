"""The store's own records: frozen dataclasses, never API messages.

``JobRecord`` and friends are what the store hands out (and what the live
state in memory holds); the row conversions live beside them.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

from lingjun.v1 import api_pb2, agent_pb2

_JSON_COLUMNS = ("nodes", "cpus_per_node", "mem_per_node", "gpus_per_node",
                 "tasks_per_node", "completing", "gpu_ids", "sched_nodes")
# JSON columns of lists per node: read back as tuples of tuples.
_NESTED_JSON_COLUMNS = frozenset({"gpu_ids"})


def json_value(column: str, value) -> tuple:
    """A JSON column's value as a record holds it (tuples all the way down)."""
    if column in _NESTED_JSON_COLUMNS:
        return tuple(tuple(v) for v in value)
    return tuple(value)


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    name: str
    user: str
    uid: int
    partition: str
    state: str
    reason: str
    priority: int
    submit_time: float
    time_limit_min: int
    spec: api_pb2.JobSpec
    client_token: str | None = None
    eligible_time: float = 0.0
    start_time: float = 0.0
    end_time: float = 0.0
    nodes: tuple[str, ...] = ()
    cpus_per_node: tuple[int, ...] = ()
    mem_per_node: tuple[int, ...] = ()
    gpus_per_node: tuple[int, ...] = ()
    tasks_per_node: tuple[int, ...] = ()
    # The GPU indices it holds on each of ``nodes`` (same order); () when it
    # holds none or started before indices were kept.
    gpu_ids: tuple[tuple[int, ...], ...] = ()
    exclusive: bool = False
    batch_host: str = ""
    launched: bool = False
    kill_reason: str = ""
    completing: tuple[str, ...] = ()
    exit_code: int = 0
    exit_signal: int = 0
    cancelled_by: str = ""
    restarts: int = 0
    held: bool = False
    next_step_id: int = 0
    stdout_path: str = ""
    stderr_path: str = ""
    array_job_id: int = 0             # 0 = not part of an array
    array_task_id: int = -1           # -1 = a plain job, or the array's meta record
    array_task_str: str = ""          # meta record: the tasks still pending ("4-9,12")
    array_max_running: int = 0        # meta record: the %N throttle (0 = none)
    warn_signal_sent: bool = False    # --signal's warning went out for this run
    dependency: str = ""              # what is left to wait for ("afterok:7(unfulfilled)"); "" = none
    hold_admin: bool = False          # held by an operator (JobHeldAdmin); only with held
    deadline: float = 0.0             # --deadline, Unix seconds; 0 = none
    # the last preemption (service/preemption.py); 0 = never
    preempted_by: int = 0
    preempt_time: float = 0.0
    preempt_killed: bool = False      # its grace time ran out: the kill was sent
    preempt_requeue: bool = False     # PreemptMode=REQUEUE: back to the queue when it ends
    # A pending job's reservation from the last pass (backfill; sched/backfill.py):
    # its expected start (0 = none) and the nodes it would take then.
    sched_start: float = 0.0
    sched_nodes: tuple[str, ...] = ()
    # An operator set ``priority`` (scontrol update Priority=N): no plugin recomputes it.
    priority_set: bool = False


@dataclass(frozen=True)
class StepRecord:
    job_id: int
    step_id: str
    name: str
    state: str
    exit_code: int = 0
    exit_signal: int = 0
    nodes: tuple[str, ...] = ()
    num_tasks: int = 1
    num_cpus: int = 1
    start_time: float = 0.0
    end_time: float = 0.0
    max_rss_kb: int = 0
    ave_rss_kb: int = 0               # mean over tasks of each task's mean sampled RSS
    max_rss_node: str = ""            # node of the task with the highest peak
    max_rss_task: int = 0             # that task's rank
    user_cpu_ms: int = 0              # summed over tasks
    system_cpu_ms: int = 0
    gpus: int = 0                     # GPUs the step held, all its nodes (AllocTRES gres/gpu)
    mem_mb: int = 0                   # its memory, all its nodes (0: the job's)
    gpu_util_ave: int = 0             # NVML samples of its GPUs: utilization, percent
    gpu_util_max: int = 0
    gpu_mem_ave_kb: int = 0           # memory used on them
    gpu_mem_max_kb: int = 0


@dataclass(frozen=True)
class RunningStepRecord:
    """An srun step while it runs: what a restarted controller needs to follow it."""
    job_id: int
    step_id: int
    name: str
    nodes: tuple[str, ...]
    rank_node: dict[int, str]
    cpus: dict[str, int]
    num_tasks: int
    num_cpus: int
    start_time: float
    kill_on_bad_exit: bool = False
    gpus: dict[str, tuple[int, ...]] = field(default_factory=dict)   # GPU indices held per node


@dataclass(frozen=True)
class NodeRecord:
    name: str
    registered: bool = False
    drain: bool = False
    down: bool = False
    reason: str = ""
    reason_user: str = ""
    reason_time: float = 0.0
    inventory: agent_pb2.Inventory = field(default_factory=agent_pb2.Inventory)
    agent_start_time: float = 0.0
    last_seen: float = 0.0
    last_busy_time: float = 0.0
    net_status: api_pb2.NetStatusReport | None = None   # None = no report yet
    drain_by_probe: bool = False      # the DRAIN was a probe's, not a person's


@dataclass(frozen=True)
class JobEvent:
    """One thing that happened to a job (lingjun events)."""
    job_id: int
    time: float
    kind: str
    text: str


@dataclass(frozen=True)
class WatchEvent:
    """One committed change as WatchJobs/WatchNodes stream it: a job's or a
    node's new state (``kind`` "state") or a job event (``kind`` as in
    ``job_events``). ``seq`` orders them and is the watchers' cursor."""
    seq: int
    time: float
    job_id: int = 0
    node: str = ""
    kind: str = "state"
    state: str = ""
    previous_state: str = ""
    text: str = ""
    exit_code: int = 0


@dataclass(frozen=True)
class ProbeResult:
    """A node's last result of one SanityCheck probe."""
    node: str
    name: str                         # "disk", "gpu", "dropin:check_fs"...
    severity: str                     # "drain" | "warn"
    ok: bool
    reason: str = ""
    duration_s: float = 0.0
    time: float = 0.0
    phase: str = ""                   # "register" | "periodic" | "prolog"


@dataclass(frozen=True)
class NodeEvent:
    """A node's health transition (drain, resume, flapping, prolog_fail)."""
    time: float
    node: str
    event: str
    reason: str = ""
    job_id: int = 0
    by: str = ""                      # the person who did it ("" = a probe)


@dataclass(frozen=True)
class Attempt:
    """One ended run of a job that ran again (sacct -D)."""
    job_id: int
    attempt: int                      # 1 = the first run
    state: str                        # how it ended
    nodes: tuple[str, ...] = ()
    start_time: float = 0.0
    end_time: float = 0.0
    exit_code: int = 0
    exit_signal: int = 0


@functools.lru_cache(maxsize=8192)
def _json_tuple(column: str, text: str) -> tuple:
    """A JSON list column as a record holds it; the same lists ("[]", a node's
    name, the same shares on every node) come back over and over when the
    live state is loaded, and tuples may be shared."""
    return json_value(column, json.loads(text))


def _job_from_row(row: dict) -> JobRecord:
    row = dict(row)
    spec = api_pb2.JobSpec()
    spec.ParseFromString(row.pop("spec"))
    for c in _JSON_COLUMNS:
        row[c] = _json_tuple(c, row[c])
    for c in ("exclusive", "launched", "held", "warn_signal_sent", "hold_admin",
              "preempt_killed", "preempt_requeue", "priority_set"):
        row[c] = bool(row[c])
    return JobRecord(spec=spec, **row)


def _job_to_row(fields: dict) -> dict:
    out = {}
    for k, v in fields.items():
        if k in _JSON_COLUMNS:
            v = json.dumps([list(x) for x in v] if k in _NESTED_JSON_COLUMNS else list(v))
        elif k == "spec":
            v = v.SerializeToString()
        elif isinstance(v, bool):
            v = int(v)
        out[k] = v
    return out


def _step_from_row(row: dict) -> StepRecord:
    row = dict(row)
    row["nodes"] = tuple(json.loads(row["nodes"]))
    return StepRecord(**row)


def _node_from_row(row: dict) -> NodeRecord:
    row = dict(row)
    inv = agent_pb2.Inventory()
    if row.get("inventory"):
        inv.ParseFromString(row["inventory"])
    row["inventory"] = inv
    if row.get("net_status") is not None:
        net = api_pb2.NetStatusReport()
        net.ParseFromString(row["net_status"])
        row["net_status"] = net
    for c in ("registered", "drain", "down", "drain_by_probe"):
        row[c] = bool(row[c])
    return NodeRecord(**row)
