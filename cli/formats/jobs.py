"""Facts about a job that more than one view prints the same way: how long it
has run, its GPUs as a TRES string, its array id, the order of its steps.
squeue, scontrol show job, sacct and the JSON documents (formats_json) read
them from here so that they never disagree (Slurm computes them once in
src/common/slurm_protocol_defs.c and src/api/job_info.c).
"""
from __future__ import annotations

TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Iterable

from lingjun import slurm
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2


def job_used_seconds(job: api_pb2.JobInfo, now: int | None = None) -> int:
    """Seconds a job has run: now - start while running, end - start once ended."""
    if not job.start_time or job.state == slurm.PENDING:
        return 0
    if job.end_time and job.state not in (slurm.RUNNING,):
        return max(0, job.end_time - job.start_time)
    now = now if now is not None else job.now
    return max(0, (now or job.start_time) - job.start_time)


def gres_gpu(count: int, gpu_type: str = "") -> str:
    """Slurm's TRES-per-x text: "gres:gpu:2", "gres:gpu:a100:2"."""
    return f"gres:gpu:{gpu_type}:{count}" if gpu_type else f"gres:gpu:{count}"


def gres_shared(job: api_pb2.JobInfo) -> tuple[str, int]:
    """A shard or MPS job's gres and count per node: ("shard", 2); ("", 0) for others."""
    if job.shards_per_node:
        return "shard", job.shards_per_node
    if job.mps_per_node:
        return "mps", job.mps_per_node
    return "", 0


def tres_per_node(job: api_pb2.JobInfo) -> str:
    """squeue %b, scontrol TresPerNode: "gres:gpu:2", "gres:shard:2", "gres:mps:50"; N/A."""
    if job.gpus_per_node:
        return gres_gpu(job.gpus_per_node, job.gpu_type)
    kind, n = gres_shared(job)
    return f"gres:{kind}:{n}" if n else "N/A"


def min_cpus(job: api_pb2.JobInfo) -> int:
    return max(1, job.cpus_per_task or 1) * max(1, job.ntasks_per_node or 1)


def array_job_text(job: api_pb2.JobInfo) -> str:
    """squeue's %i: "12" for a plain job, "12_3" for one array task, "12_[4-9%2]"
    for an array's pending remainder (its tasks and %N throttle)."""
    if not job.array_job_id:
        return str(job.job_id)
    if job.array_task_str:
        # a remainder cancelled as a whole has no tasks left to list: Slurm
        # prints the bare id (golden squeue_default_after_completion: "13 CANCELLED")
        if job.state and job.state != slurm.PENDING:
            return str(job.job_id)
        return f"{job.array_job_id}_[{job.array_task_str}]"
    return f"{job.array_job_id}_{job.array_task_id}"


def array_task_field(job: api_pb2.JobInfo) -> str:
    """squeue's %K: the task index, the remainder's task list, or N/A."""
    if not job.array_job_id:
        return "N/A"
    return job.array_task_str or str(job.array_task_id)


def step_order(steps: Iterable[api_pb2.StepInfo]) -> list[api_pb2.StepInfo]:
    """Steps as sacct lists them: ID.batch, ID.extern, then ID.0, ID.1, ...
    (the batch step is recorded last, when the job ends, but is listed first)."""
    def key(st: api_pb2.StepInfo) -> tuple[int, int, str]:
        special = {"batch": 0, "extern": 1, "interactive": 2}
        if st.step_id in special:
            return (special[st.step_id], 0, "")
        return (3, int(st.step_id), "") if st.step_id.isdigit() else (4, 0, st.step_id)
    return sorted(steps, key=key)
