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
from lingjund.store.store import JobRecord

CHECKPOINT_VAR = "LINGJUN_CHECKPOINT_DIR"
HEARTBEAT_VAR = "LINGJUN_HEARTBEAT_FILE"
HEARTBEAT_NAME = ".lingjun-heartbeat"


def checkpoint_dir(config: Config, job: JobRecord) -> str:
    """The job's checkpoint directory, the same for every run (service/faulttol.py)."""
    root = config.faulttol.checkpoint_root or os.path.join(
        config.controller.state_dir, "checkpoints")
    return os.path.join(root, str(job.job_id))


def checkpoint_env(config: Config, job: JobRecord) -> dict[str, str]:
    """What a batch script sees in addition to Slurm's variables."""
    d = checkpoint_dir(config, job)
    return {CHECKPOINT_VAR: d, HEARTBEAT_VAR: os.path.join(d, HEARTBEAT_NAME)}


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
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
    }
    if spec.ntasks_per_node:
        env["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    if spec.cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    if spec.HasField("mem_per_node_mb"):
        env["SLURM_MEM_PER_NODE"] = str(job.mem_per_node[0] if job.mem_per_node else spec.mem_per_node_mb)
    if spec.HasField("mem_per_cpu_mb"):
        env["SLURM_MEM_PER_CPU"] = str(spec.mem_per_cpu_mb)      # sbatch.1 OUTPUT ENVIRONMENT
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


def _node_part(job: JobRecord, index: int) -> dict[str, str]:
    node = job.nodes[index]
    env = {
        "SLURMD_NODENAME": node,
        "SLURM_NODEID": str(index),
        "SLURM_CPUS_ON_NODE": str(job.cpus_per_node[index]),
        "SLURM_TOPOLOGY_ADDR": node,
    }
    if job.gpus_per_node and job.gpus_per_node[index]:
        env.update(gpu_env(job, index))
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


def batch_env(job: JobRecord, cluster: str, controller: str,
              master_addr: str = "") -> dict[str, str]:
    """The complete environment of the batch script on the first node.

    ``master_addr`` is the first node's registered address, for --launcher;
    the port is the first node's agent's to add.
    """
    env = dict(job.spec.environment)
    env.update(_job_common(job, cluster))
    env.update(_node_part(job, 0))
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
    return env


def allocation_env(job: JobRecord, cluster: str, controller: str) -> dict[str, str]:
    """What salloc adds to its command's environment once the allocation is granted
    (salloc.1 OUTPUT ENVIRONMENT VARIABLES): the job's variables, no node's or
    task's (the command runs on the submit host, not on a node of the job)."""
    env = _job_common(job, cluster)
    for per_job_only in ("SLURM_JOB_USER", "SLURM_JOB_UID", "SLURM_JOB_GID", "SLURM_PRIO_PROCESS",
                         "SLURM_TOPOLOGY_ADDR_PATTERN"):
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
             base_env: dict[str, str], cpus_per_task: int = 0) -> dict[str, dict[str, str]]:
    """Environment common to a step's tasks, per node (keyed by node name).

    ``cpus_per_task`` is the step's own -c (22.05: srun does not inherit the
    job's); when given it is the step's SLURM_CPUS_PER_TASK."""
    ntasks = sum(tasks_per_node)
    step_nodelist = slurm.compress_hostlist(list(step_nodes))
    out = {}
    for i, node in enumerate(step_nodes):
        env = dict(base_env)
        env.update(_job_common(job, cluster))
        job_index = job.nodes.index(node)
        env.update(_node_part(job, job_index))
        if "SLURM_JOB_GPUS" in env:      # a step gets the job's GPUs (subsets: later work)
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
        out[node] = env
    return out


def task_env(rank: int, local_id: int, node_env: dict[str, str] | None = None) -> dict[str, str]:
    """Per-task additions: Slurm's ranks, and the launcher's names for them."""
    env = {"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local_id)}
    name = (node_env or {}).get(launchers.ENV_VAR, "")
    if name in launchers.LAUNCHERS:
        env.update(launchers.rank_environment(name, rank, local_id))
    return env
