"""What salloc's command and the tasks of an srun allocation see."""
from __future__ import annotations

from lingjun.v1 import api_pb2
from lingjund.service import jobenv
from lingjund.store.store import JobRecord


def job(**spec_kw) -> JobRecord:
    spec = api_pb2.JobSpec(name="bash", work_dir="/w", submit_dir="/w", submit_host="vm",
                           user="root", uid=0, gid=0, batch=False, **spec_kw)
    return JobRecord(job_id=30, name="bash", user="root", uid=0, partition="debug", state="RUNNING",
                     reason="None", priority=1, submit_time=0, time_limit_min=10, spec=spec,
                     nodes=("node1", "node2"), cpus_per_node=(1, 1), tasks_per_node=(1, 1))


def test_salloc_command_gets_the_jobs_variables_but_no_node_or_task_ones():
    env = jobenv.allocation_env(job(min_nodes=2), "anchor", "127.0.0.1:6917")
    want = {"SLURM_JOB_ID": "30", "SLURM_JOBID": "30", "SLURM_JOB_NODELIST": "node[1-2]",
            "SLURM_NODELIST": "node[1-2]", "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2",
            "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_JOB_CPUS_PER_NODE": "1(x2)",
            "SLURM_CLUSTER_NAME": "anchor", "SLURM_JOB_PARTITION": "debug"}
    assert {k: env.get(k) for k in want} == want
    absent = [k for k in ("SLURMD_NODENAME", "SLURM_PROCID", "SLURM_NODEID", "SLURM_NTASKS",
                          "SLURM_STEP_ID") if k in env]
    assert absent == [], "want no per-node, per-task or -n variables without -n"


def test_salloc_with_n_sets_ntasks():
    env = jobenv.allocation_env(job(num_tasks=2), "anchor", "127.0.0.1:6917")
    assert (env.get("SLURM_NTASKS"), env.get("SLURM_NPROCS")) == ("2", "2")


def test_a_step_with_c_tells_its_tasks_cpus_per_task():
    j = job()
    per_node = jobenv.step_env(j, "anchor", "x", step_id=0, step_nodes=j.nodes, tasks_per_node=[1, 1],
                               base_env={}, cpus_per_task=2)
    assert [e.get("SLURM_CPUS_PER_TASK") for e in per_node.values()] == ["2", "2"]
    without = jobenv.step_env(j, "anchor", "x", step_id=0, step_nodes=j.nodes, tasks_per_node=[1, 1],
                              base_env={})
    assert [e.get("SLURM_CPUS_PER_TASK") for e in without.values()] == [None, None]
