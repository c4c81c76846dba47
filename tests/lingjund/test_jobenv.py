"""The Slurm environment of batch scripts and srun tasks, against real Slurm's."""
from __future__ import annotations

import pytest

from lingjun.v1 import api_pb2
from lingjund.service import jobenv
from lingjund.store.store import JobRecord
from tests.cli.golden_files import golden_dir

# Variables whose values follow from the job alone (not pids, ports, hosts or paths).
COMPARED = ["SLURMD_NODENAME", "SLURM_CLUSTER_NAME", "SLURM_CPUS_ON_NODE", "SLURM_GTIDS",
            "SLURM_JOBID", "SLURM_JOB_ACCOUNT", "SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_GID",
            "SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES",
            "SLURM_JOB_PARTITION", "SLURM_JOB_QOS", "SLURM_JOB_UID", "SLURM_JOB_USER",
            "SLURM_LOCALID", "SLURM_NNODES", "SLURM_NODEID", "SLURM_NODELIST", "SLURM_NPROCS",
            "SLURM_NTASKS", "SLURM_PRIO_PROCESS", "SLURM_PROCID", "SLURM_TASKS_PER_NODE",
            "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN", "SLURM_NODE_ALIASES"]


def golden_env(name: str, prefix: str = "") -> dict[str, str]:
    out = {}
    for line in (golden_dir() / "env" / name).read_text().splitlines():
        if prefix:
            if not line.startswith(prefix):
                continue
            line = line[len(prefix):]
        if "=" in line and line.startswith("SLURM"):
            k, v = line.split("=", 1)
            out[k] = v
    return out


def job(**kw) -> JobRecord:
    spec = api_pb2.JobSpec(name=kw.pop("name", "envjob"), work_dir="/tmp/anchor-golden",
                           submit_dir="/tmp/anchor-golden", submit_host="vm", user="root",
                           uid=0, gid=0, num_tasks=kw.pop("num_tasks", 0))
    base = dict(job_id=20, name=spec.name, user="root", uid=0, partition="debug", state="RUNNING",
                reason="None", priority=1, submit_time=0, time_limit_min=10, spec=spec)
    base.update(kw)
    return JobRecord(**base)


def test_batch_script_sees_what_slurm_sets_for_a_2_node_4_task_job():
    want = golden_env("batch_named_N2_n4.out")
    j = job(job_id=20, nodes=("node2", "node3"), cpus_per_node=(2, 2), tasks_per_node=(2, 2),
            num_tasks=4)
    got = jobenv.batch_env(j, "anchor", "127.0.0.1:6917")
    assert {k: got.get(k) for k in COMPARED} == {k: want.get(k) for k in COMPARED}


@pytest.mark.parametrize("rank", [0, 1], ids=["rank 0 on the first node", "rank 1 on the second node"])
def test_srun_task_sees_what_slurm_sets(rank):
    want = golden_env("srun_step_env.txt", prefix=f"{rank}: ")
    j = job(job_id=24, name="bash", nodes=("node1", "node2"), cpus_per_node=(1, 1),
            tasks_per_node=(1, 1))
    per_node = jobenv.step_env(j, "anchor", "127.0.0.1:6917", step_id=0, step_nodes=j.nodes,
                               tasks_per_node=[1, 1], base_env={})
    got = dict(per_node[j.nodes[rank]])
    got.update(jobenv.task_env(rank, 0))
    keys = COMPARED + ["SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES",
                       "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_UMASK",
                       "SLURM_LAUNCH_NODE_IPADDR", "SLURM_SRUN_COMM_HOST"]
    assert {k: got.get(k) for k in keys} == {k: want.get(k) for k in keys}


@pytest.mark.parametrize("tasks,nodes,want", [
    (5, 2, [3, 2]), (4, 4, [1, 1, 1, 1]), (8, 3, [3, 3, 2]), (2, 1, [2]),
], ids=["5 tasks on 2 nodes: 3 then 2", "one task per node", "8 on 3: 3,3,2", "all on one node"])
def test_block_distribution_of_step_tasks(tasks, nodes, want):
    assert jobenv.step_layout(tuple(f"n{i}" for i in range(nodes)), tasks) == want


ARRAY_VARS = ["SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT",
              "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP"]


@pytest.mark.parametrize("job_id, task, node, which", [
    (22, 6, "node2", 0), (23, 5, "node1", 1),
], ids=["the last task keeps the array's id (task 6 is job 22)",
        "a task split off earlier has an id of its own (task 5 is job 23)"])
def test_array_task_sees_what_slurm_sets(job_id, task, node, which):
    # batch_array_task_all.out holds both tasks' environments, one after the other
    text = (golden_dir() / "env" / "batch_array_task_all.out").read_text()
    chunks = ["SLURMD_NODENAME" + c for c in text.split("SLURMD_NODENAME")[1:]]
    want = dict(line.split("=", 1) for line in chunks[which].splitlines() if "=" in line)
    j = job(job_id=job_id, name="wrap", nodes=(node,), cpus_per_node=(1,), tasks_per_node=(1,),
            array_job_id=22, array_task_id=task)
    j.spec.array = "5-6"
    got = jobenv.batch_env(j, "anchor", "127.0.0.1:6917")
    # Slurm sets no SLURM_NTASKS for a batch job submitted without -n; that is
    # not about arrays, so it is left to the plain-job comparison.
    keys = [k for k in COMPARED if k not in ("SLURM_NTASKS", "SLURM_NPROCS")] + ARRAY_VARS
    assert {k: got.get(k) for k in keys} == {k: want.get(k) for k in keys}


@pytest.mark.parametrize("spec, task, want", [
    ("0-15:4", 8, {"SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0",
                   "SLURM_ARRAY_TASK_MAX": "12", "SLURM_ARRAY_TASK_STEP": "4"}),
    ("1,2,7%2", 7, {"SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
                    "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_STEP": "1"}),
], ids=["a stepped range counts its indices and gives its step",
        "an uneven list has step 1 and the throttle does not count"])
def test_array_count_min_max_step(spec, task, want):
    j = job(nodes=("node1",), cpus_per_node=(1,), tasks_per_node=(1,), array_job_id=20,
            array_task_id=task)
    j.spec.array = spec
    got = jobenv.batch_env(j, "c", "x")
    assert {k: got.get(k) for k in want} == want


def test_a_plain_job_has_no_array_variables():
    j = job(nodes=("node1",), cpus_per_node=(1,), tasks_per_node=(1,))
    got = jobenv.batch_env(j, "c", "x")
    assert [k for k in got if k.startswith("SLURM_ARRAY")] == []


GPU_VARS = ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL", "SLURM_GPUS_ON_NODE",
            "SLURM_STEP_GPUS")


def test_each_node_of_a_job_sees_exactly_its_own_gpus():
    j = job(nodes=("node1", "node2"), cpus_per_node=(1, 1), tasks_per_node=(1, 1),
            gpus_per_node=(2, 2), gpu_ids=((2, 3), (0, 5)))
    batch = jobenv.batch_env(j, "c", "127.0.0.1:1")
    assert {k: batch.get(k) for k in GPU_VARS} == {
        "CUDA_VISIBLE_DEVICES": "2,3", "SLURM_JOB_GPUS": "2,3", "GPU_DEVICE_ORDINAL": "2,3",
        "SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_GPUS": None}
    steps = jobenv.step_env(j, "c", "127.0.0.1:1", step_id=0, step_nodes=j.nodes,
                            tasks_per_node=[1, 1], base_env=dict(batch))
    assert {k: steps["node2"].get(k) for k in GPU_VARS} == {
        "CUDA_VISIBLE_DEVICES": "0,5", "SLURM_JOB_GPUS": "0,5", "GPU_DEVICE_ORDINAL": "0,5",
        "SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_GPUS": "0,5"}


def test_a_job_started_before_indices_were_kept_sees_the_lowest():
    j = job(nodes=("node1",), cpus_per_node=(1,), tasks_per_node=(1,), gpus_per_node=(2,))
    assert jobenv.batch_env(j, "c", "127.0.0.1:1")["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_job_without_gpus_sets_no_gpu_variables():
    j = job(nodes=("node1",), cpus_per_node=(1,), tasks_per_node=(1,))
    env = jobenv.batch_env(j, "c", "127.0.0.1:1")
    assert not any(k in env for k in GPU_VARS)
