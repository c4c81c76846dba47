"""What a job was given on one of its nodes, as its agent confines it there.

The agent puts the job's processes in cgroups held to this share: memory
(``--mem``, or ``--mem-per-cpu`` times its CPUs there: the core has already
turned both into ``mem_per_node``), the number of CPUs (the agent picks
which), and the GPU indices the core chose (``gpu_ids``; a job recorded
before indices were kept has the lowest ``n``, as ``jobenv.gpu_env`` says).
A shard or MPS job's ``gpu_ids`` is the one GPU its share is on: it may open
that device; an MPS job's share also says its thread percentage, for which
the agent runs that GPU's MPS control daemon.
"""
from __future__ import annotations

from lingjun.v1 import agent_pb2
from lingjund.store.store import JobRecord

MB = 1 << 20


def node_share(job: JobRecord, node: str, mps_per_gpu: int = 0) -> agent_pb2.JobShare:
    """The job's share of ``node`` (an empty share where ``node`` is not the job's).

    ``mps_per_gpu``: the node's MPS count per GPU, of which an MPS job's
    ``--gres=mps:P`` is P (mps 100 per GPU, mps:25: 25 %)."""
    try:
        i = job.nodes.index(node)
    except ValueError:
        return agent_pb2.JobShare()
    mem = job.mem_per_node[i] if i < len(job.mem_per_node) else 0
    cpus = job.cpus_per_node[i] if i < len(job.cpus_per_node) else 0
    n = job.gpus_per_node[i] if i < len(job.gpus_per_node) else 0
    ids = job.gpu_ids[i] if i < len(job.gpu_ids) else ()
    return agent_pb2.JobShare(memory_bytes=max(mem, 0) * MB, cpus=cpus,
                              gpu_ids=list(ids or range(n)),
                              mps_percentage=mps_percentage(job.spec.mps_per_node, mps_per_gpu))


def mps_percentage(mps: int, per_gpu: int) -> int:
    """CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for ``mps`` of a GPU's ``per_gpu`` (at
    least 1 for any MPS job); 0 for a job without MPS."""
    if not mps or per_gpu <= 0:
        return 0
    return max(1, min(100, mps * 100 // per_gpu))
