"""The share of each node a job's agents confine it to: memory, CPU count, GPU indices."""
from __future__ import annotations

from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service.confine import node_share
from lingjund.store.store import JobRecord


def job(**kw) -> JobRecord:
    base = dict(job_id=7, name="j", user="root", uid=0, partition="debug", state="RUNNING",
                reason="None", priority=1, submit_time=0, time_limit_min=10,
                spec=api_pb2.JobSpec(name="j"), nodes=("node1", "node2"),
                cpus_per_node=(2, 4), mem_per_node=(100, 0), gpus_per_node=(1, 2),
                gpu_ids=((3,), (0, 1)))
    base.update(kw)
    return JobRecord(**base)


def test_each_node_gets_what_the_job_holds_there():
    j = job()
    assert node_share(j, "node1") == agent_pb2.JobShare(memory_bytes=100 << 20, cpus=2,
                                                        gpu_ids=[3])
    assert node_share(j, "node2") == agent_pb2.JobShare(memory_bytes=0, cpus=4, gpu_ids=[0, 1]), \
        "no --mem: no limit"


def test_a_job_recorded_before_gpu_indices_were_kept_has_the_lowest():
    assert list(node_share(job(gpu_ids=()), "node2").gpu_ids) == [0, 1]


def test_a_node_not_the_jobs_gets_nothing():
    assert node_share(job(), "node9") == agent_pb2.JobShare()
