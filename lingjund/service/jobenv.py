"""The environment a batch script and each srun task see: Slurm's variables.

Pure functions over a job record; what real Slurm 22.05 sets is in
``../shared/anchors/slurm/golden/env/``. For a job on node[1-2] with two
tasks per node, rank 3 of step 0 sees SLURM_JOB_NODELIST=node[1-2],
SLURM_TASKS_PER_NODE=2(x2), SLURM_NODEID=1, SLURM_PROCID=3, SLURM_LOCALID=1.
"""
from __future__ import annotations

import os

from lingjun import launchers, slurm
from lingjun.config import Config
from lingjun.topology import Topology
from lingjund.service import errors
from lingjund.store.store import JobRecord

CHECKPOINT_VAR = "LINGJUN_CHECKPOINT_DIR"
HEARTBEAT_VAR = "LINGJUN_HEARTBEAT_FILE"
HEARTBEAT_NAME = ".lingjun-heartbeat"
HEARTBEAT_DIR_VAR = "LINGJUN_HEARTBEAT_DIR"     # rank.N in it: one heartbeat file per rank
HEARTBEAT_DIR_NAME = ".lingjun-heartbeat.d"


def checkpoint_dir(config: Config, job: JobRecord) -> str:
    """The job's checkpoint directory, the same for every run (service/faulttol.py)."""
    root = config.faulttol.checkpoint_root or os.path.join(
        config.controller.state_dir, "checkpoints")
    return os.path.join(root, str(job.job_id))


def checkpoint_env(config: Config, job: JobRecord) -> dict[str, str]:
    """What a batch script sees in addition to Slurm's variables."""
    d = checkpoint_dir(config, job)
    return {CHECKPOINT_VAR: d, HEARTBEAT_VAR: os.path.join(d, HEARTBEAT_NAME),
            HEARTBEAT_DIR_VAR: os.path.join(d, HEARTBEAT_DIR_NAME)}


def _job_common(job: JobRecord, cluster: str) -> dict[str, str]:
    spec = job.spec
    nodelist = slurm.compress_hostlist(list(job.nodes))
    ntasks = sum(job.tasks_per_node)
    env = {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": job.name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(len(job.nodes)),
        "SLURM_NNODES": str(len(job.nodes)),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_TASKS_PER_NODE": slurm.compress_counts(list(job.tasks_per_node)),
        "SLURM_JOB_CPUS_PER_NODE": slurm.compress_counts(list(job.cpus_per_node)),
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_ACCOUNT": spec.account or job.user,
        "SLURM_JOB_QOS": spec.qos or "normal",
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_UID": str(job.uid),
        "SLURM_JOB_GID": str(spec.gid),
        "SLURM_SUBMIT_DIR": spec.submit_dir or spec.work_dir,
        "SLURM_SUBMIT_HOST": spec.submit_host,
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_PRIO_PROCESS": "0",
    }
    if spec.ntasks_per_node:
        env["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    if spec.cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    if spec.HasField("mem_per_node_mb"):
        env["SLURM_MEM_PER_NODE"] = str(job.mem_per_node[0] if job.mem_per_node else spec.mem_per_node_mb)
    if spec.HasField("mem_per_cpu_mb"):
        env["SLURM_MEM_PER_CPU"] = str(spec.mem_per_cpu_mb)      # sbatch.1 OUTPUT ENVIRONMENT
    if spec.HasField("mem_per_gpu_mb"):
        env["SLURM_MEM_PER_GPU"] = str(spec.mem_per_gpu_mb)
    if spec.cpus_per_gpu:
        env["SLURM_CPUS_PER_GPU"] = str(spec.cpus_per_gpu)
    if spec.gpus_per_task:
        env["SLURM_GPUS_PER_TASK"] = str(spec.gpus_per_task)
    if job.restarts:
        env["SLURM_RESTART_COUNT"] = str(job.restarts)
    env.update(_array_part(job))
    return env


def _array_part(job: JobRecord) -> dict[str, str]:
    """SLURM_ARRAY_*: this task's index, and the count/min/max/step of the whole
    --array as submitted (golden env/batch_array_task.out: --array=5-6 gives
    COUNT=2 MIN=5 MAX=6 STEP=1 in both tasks)."""
    if not job.array_job_id or job.array_task_id < 0:
        return {}
    try:
        array = slurm.parse_array_spec(job.spec.array, max_array_size=2 ** 31)
    except ValueError:      # the controller checked it at submission
        array = slurm.ArraySpec(indices=(job.array_task_id,))
    return {
        "SLURM_ARRAY_JOB_ID": str(job.array_job_id),
        "SLURM_ARRAY_TASK_ID": str(job.array_task_id),
        "SLURM_ARRAY_TASK_COUNT": str(len(array.indices)),
        "SLURM_ARRAY_TASK_MIN": str(array.indices[0]),
        "SLURM_ARRAY_TASK_MAX": str(array.indices[-1]),
        "SLURM_ARRAY_TASK_STEP": str(array.step),
    }


def _node_part(job: JobRecord, index: int, topology: Topology | None = None) -> dict[str, str]:
    """The node's own variables. SLURM_TOPOLOGY_ADDR is the node's place in the
    network, its switches from the top down ("s2.s0.node1", pattern
    "switch.switch.node"), just the node's name without a topology."""
    node = job.nodes[index]
    addr, pattern = topology.address(node) if topology is not None else (node, "node")
    env = {
        "SLURMD_NODENAME": node,
        "SLURM_NODEID": str(index),
        "SLURM_CPUS_ON_NODE": str(job.cpus_per_node[index]),
        "SLURM_TOPOLOGY_ADDR": addr,
        "SLURM_TOPOLOGY_ADDR_PATTERN": pattern,
    }
    if job.gpus_per_node and job.gpus_per_node[index]:
        env.update(gpu_env(job, index))
    elif job.spec.shards_per_node or job.spec.mps_per_node:
        env.update(shared_gpu_env(job, index))
    return env


def shared_gpu_env(job: JobRecord, index: int) -> dict[str, str]:
    """A shard or MPS job on its ``index``-th node: the one GPU its share is on,
    and how much of it (Slurm's SLURM_SHARDS_ON_NODE). An MPS job's thread
    percentage and MPS pipe directories are the node's to say (the agent adds
    them); a GPU memory cap (--gres=mps:P,gpumem:SIZE) is for that one GPU,
    device 0 as the job sees it."""
    ids = job.gpu_ids[index] if index < len(job.gpu_ids) else ()
    if not ids:
        return {}
    text = _ids_text(ids[:1])
    env = {"CUDA_VISIBLE_DEVICES": text, "GPU_DEVICE_ORDINAL": text}
    spec = job.spec
    if spec.shards_per_node:
        env["SLURM_SHARDS_ON_NODE"] = str(spec.shards_per_node)
    if spec.mps_per_node and spec.gpu_mem_limit_mb:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={spec.gpu_mem_limit_mb}M"
    return env


def gpu_env(job: JobRecord, index: int) -> dict[str, str]:
    """The job's GPUs on its ``index``-th node: exactly the indices it was given there.

    A job that started before indices were kept has a count only: it gets the
    lowest ``n``, as it did then."""
    n = job.gpus_per_node[index]
    ids = job.gpu_ids[index] if index < len(job.gpu_ids) else ()
    text = ",".join(str(i) for i in (ids or range(n)))
    return {"SLURM_GPUS_ON_NODE": str(len(ids) or n), "CUDA_VISIBLE_DEVICES": text,
            "SLURM_JOB_GPUS": text, "GPU_DEVICE_ORDINAL": text}


def _ids_text(ids) -> str:
    return ",".join(str(i) for i in ids)


def step_gpu_env(ids: tuple[int, ...]) -> dict[str, str]:
    """A step's GPUs on one node: what its tasks see unless --gpu-bind or
    --gpus-per-task narrows it per task (task_gpu_env)."""
    text = _ids_text(ids)
    return {"SLURM_STEP_GPUS": text, "SLURM_GPUS_ON_NODE": str(len(ids)),
            "CUDA_VISIBLE_DEVICES": text, "GPU_DEVICE_ORDINAL": text}


def task_gpu_env(ids: tuple[int, ...]) -> dict[str, str]:
    """One task's own GPUs (the indices the node's device cgroup would allow it)."""
    text = _ids_text(ids)
    return {"CUDA_VISIBLE_DEVICES": text, "GPU_DEVICE_ORDINAL": text}


def parse_gpu_bind(text: str) -> tuple[str, tuple[int, ...]]:
    """--gpu-bind as (kind, numbers): ("", ()), ("closest", ()), ("none", ()),
    ("single", (N,)), ("per_task", (N,)), ("map_gpu", (i0, i1, ...)) with
    "I*N" repeats expanded. ValueError when it is none of these."""
    text = text.strip()
    if text.startswith("verbose,"):
        text = text[len("verbose,"):]
    if text in ("", "closest", "none"):
        return text, ()
    kind, _, arg = text.partition(":")
    if kind in ("single", "per_task"):
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError(text)
        return kind, (int(arg),)
    if kind == "map_gpu" and arg:
        ids: list[int] = []
        for item in arg.split(","):
            head, star, count = item.partition("*")
            n = int(head, 16) if head.lower().startswith("0x") else int(head)
            times = int(count) if star else 1
            if n < 0 or times < 1 or len(ids) + times > 100_000:
                raise ValueError(text)
            ids += [n] * times
        return kind, tuple(ids)
    raise ValueError(text)


def check_gpu_bind(text: str) -> None:
    """Refuse a --gpu-bind that is none of Slurm's forms, in srun's words."""
    try:
        parse_gpu_bind(text)
    except ValueError:
        raise errors.InvalidRequest(f"Invalid --gpu-bind argument: {text}") from None


def task_gpus(step_ids: tuple[int, ...], ntasks: int, gpus_per_task: int,
              bind: str) -> list[tuple[int, ...]]:
    """Which of the step's GPUs on a node each of its ``ntasks`` tasks there sees
    (by local task id), Slurm's --gpu-bind:

    - per_task:N (implied by --gpus-per-task=N): task i gets GPUs i*N .. i*N+N-1,
      round the step's GPUs again when there are more tasks than that;
    - single:N: the first N tasks get the first GPU, the next N the second...;
    - map_gpu:L: task i gets GPU L[i % len(L)], an index of the node (as
      CUDA_VISIBLE_DEVICES shows it) that must be one of the step's there;
    - closest: the GPUs nearest the task's CPUs. No topology is known here,
      so every GPU is equally close: each task sees all of the step's GPUs;
    - none, or nothing given without --gpus-per-task: all of the step's GPUs.

    With 4 GPUs (0-3) and 4 tasks, per_task:1 gives (0,), (1,), (2,), (3,);
    single:2 gives (0,), (0,), (1,), (1,); map_gpu:3,1 gives (3,), (1,), (3,), (1,).
    ValueError for a bind that names a GPU the step does not hold."""
    kind, nums = parse_gpu_bind(bind)
    if not kind and gpus_per_task:
        kind, nums = "per_task", (gpus_per_task,)
    ids = tuple(step_ids)
    if not ids or kind in ("", "none", "closest"):
        return [ids] * ntasks
    if kind == "per_task":
        n = min(nums[0], len(ids))
        return [tuple(ids[(i * n + k) % len(ids)] for k in range(n)) for i in range(ntasks)]
    if kind == "single":
        return [(ids[(i // nums[0]) % len(ids)],) for i in range(ntasks)]
    if any(g not in ids for g in nums[:ntasks]):
        raise ValueError(f"map_gpu names a GPU the step does not hold: {bind}")
    return [(nums[i % len(nums)],) for i in range(ntasks)]


def batch_env(job: JobRecord, cluster: str, controller: str,
              master_addr: str = "", topology: Topology | None = None) -> dict[str, str]:
    """The complete environment of the batch script on the first node.

    ``master_addr`` is the first node's registered address, for --launcher;
    the port is the first node's agent's to add.
    """
    env = dict(job.spec.environment)
    env.update(_job_common(job, cluster))
    env.update(_node_part(job, 0, topology))
    env.update({"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_GTIDS": "0",
                "ENVIRONMENT": "BATCH", "SLURM_NODE_ALIASES": "(null)", "LINGJUN_CONTROLLER": controller})
    # A job submitted from inside a launcher job inherits LINGJUN_LAUNCHER with
    # the rest of the environment; only its own --launcher may put srun in that mode.
    env.pop(launchers.ENV_VAR, None)
    if job.spec.launcher in launchers.LAUNCHERS:
        tasks = list(job.tasks_per_node) or [1]
        env.update(launchers.environment(job.spec.launcher, launchers.Place(
            master_addr=master_addr or job.nodes[0], nnodes=len(job.nodes), node_rank=0,
            nproc_per_node=tasks[0], world_size=sum(tasks), rank=0, local_rank=0,
            local_world_size=tasks[0])))
        if launchers.elastic(job.spec.launcher, job.spec.min_nodes, job.spec.max_nodes):
            env.update(launchers.rendezvous_environment(job.job_id, job.restarts, "batch"))
    return env


def allocation_env(job: JobRecord, cluster: str, controller: str) -> dict[str, str]:
    """What salloc adds to its command's environment once the allocation is granted
    (salloc.1 OUTPUT ENVIRONMENT VARIABLES): the job's variables, no node's or
    task's (the command runs on the submit host, not on a node of the job)."""
    env = _job_common(job, cluster)
    for per_job_only in ("SLURM_JOB_USER", "SLURM_JOB_UID", "SLURM_JOB_GID", "SLURM_PRIO_PROCESS"):
        env.pop(per_job_only, None)
    if not job.spec.num_tasks:  # salloc sets SLURM_NTASKS only when -n was given
        env.pop("SLURM_NTASKS", None)
        env.pop("SLURM_NPROCS", None)
    env["LINGJUN_CONTROLLER"] = controller
    return env


def step_layout(nodes: tuple[str, ...], num_tasks: int) -> list[int]:
    """Tasks per node, block distribution: 5 tasks on 2 nodes -> [3, 2]."""
    n = len(nodes)
    base, extra = divmod(num_tasks, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def step_env(job: JobRecord, cluster: str, controller: str, *, step_id: int,
             step_nodes: tuple[str, ...], tasks_per_node: list[int],
             base_env: dict[str, str], cpus_per_task: int = 0,
             step_gpus: dict[str, tuple[int, ...]] | None = None,
             topology: Topology | None = None) -> dict[str, dict[str, str]]:
    """Environment common to a step's tasks, per node (keyed by node name).

    ``cpus_per_task`` is the step's own -c (22.05: srun does not inherit the
    job's); when given it is the step's SLURM_CPUS_PER_TASK. ``step_gpus``:
    the GPU indices the step holds per node (steps.choose_step_gpus); None =
    all of the job's there."""
    ntasks = sum(tasks_per_node)
    step_nodelist = slurm.compress_hostlist(list(step_nodes))
    out = {}
    for i, node in enumerate(step_nodes):
        env = dict(base_env)
        env.update(_job_common(job, cluster))
        job_index = job.nodes.index(node)
        env.update(_node_part(job, job_index, topology))
        if step_gpus is not None:
            env.update(step_gpu_env(step_gpus.get(node, ())))
        elif "SLURM_JOB_GPUS" in env:
            env["SLURM_STEP_GPUS"] = env["SLURM_JOB_GPUS"]
        env.update({
            "SLURM_NODEID": str(i),
            "SLURM_STEP_ID": str(step_id),
            "SLURM_STEPID": str(step_id),
            "SLURM_STEP_NODELIST": step_nodelist,
            "SLURM_STEP_NUM_NODES": str(len(step_nodes)),
            "SLURM_STEP_NUM_TASKS": str(ntasks),
            "SLURM_STEP_TASKS_PER_NODE": slurm.compress_counts(tasks_per_node),
            "SLURM_NTASKS": str(ntasks),
            "SLURM_NPROCS": str(ntasks),
            "SLURM_NNODES": str(len(step_nodes)),
            "SLURM_TASKS_PER_NODE": slurm.compress_counts(tasks_per_node),
            "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1",
            "SLURM_SRUN_COMM_HOST": "127.0.0.1",
            "SLURM_UMASK": base_env.get("SLURM_UMASK") or "0022",   # the submitter's
            "SLURM_DISTRIBUTION": "block" if ntasks > len(step_nodes) else "cyclic",
            "LINGJUN_CONTROLLER": controller,
        })
        if cpus_per_task:
            env["SLURM_CPUS_PER_TASK"] = str(cpus_per_task)
        first = sum(tasks_per_node[:i])
        env["SLURM_GTIDS"] = ",".join(str(first + k) for k in range(tasks_per_node[i]))
        name = base_env.get(launchers.ENV_VAR) or job.spec.launcher
        if name in launchers.LAUNCHERS:
            # MASTER_ADDR and MASTER_PORT come with srun's environment from the
            # batch script, where the first node's agent set the port.
            env.update(launchers.environment(name, launchers.Place(
                master_addr=base_env.get("MASTER_ADDR") or job.nodes[0],
                nnodes=len(step_nodes), node_rank=i,
                nproc_per_node=job.tasks_per_node[job_index] if job.tasks_per_node else 1,
                world_size=ntasks, rank=first, local_rank=0,
                local_world_size=tasks_per_node[i])))
            if base_env.get(launchers.RDZV_BACKEND_VAR) == "c10d":
                env.update(launchers.rendezvous_environment(job.job_id, job.restarts,
                                                            str(step_id)))
        out[node] = env
    return out


def task_env(rank: int, local_id: int, node_env: dict[str, str] | None = None) -> dict[str, str]:
    """Per-task additions: Slurm's ranks, and the launcher's names for them."""
    env = {"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local_id)}
    name = (node_env or {}).get(launchers.ENV_VAR, "")
    if name in launchers.LAUNCHERS:
        env.update(launchers.rank_environment(name, rank, local_id))
    return env
