"""sacct's TRES fields: AllocTRES/ReqTRES with GPUs, and the GPU usage the
agent sampled in TRESUsageInAve/Max (Slurm 24's gres/gpuutil, gres/gpumem)."""
from __future__ import annotations

from cli.formats import sacct as sacct_format
from lingjun.v1 import api_pb2


def _job(**kw) -> api_pb2.JobInfo:
    j = api_pb2.JobInfo(job_id=12, name="train", state="COMPLETED", num_nodes=1, num_cpus=8,
                        mem_per_node_mb=49152, nodes="node1", start_time=100, end_time=160,
                        now=200, **kw)
    j.steps.append(api_pb2.StepInfo(
        step_id="batch", name="batch", state="COMPLETED", nodes="node1", num_tasks=1,
        num_cpus=8, start_time=100, end_time=160, max_rss_kb=2048, ave_rss_kb=1024,
        gpus=2, mem_mb=49152, gpu_util_ave=57, gpu_util_max=93, gpu_mem_ave_kb=6 << 20,
        gpu_mem_max_kb=8 << 20))
    j.steps.append(api_pb2.StepInfo(
        step_id="0", name="python", state="OUT_OF_MEMORY", exit_signal=125, nodes="node1",
        num_tasks=1, num_cpus=2, start_time=110, end_time=120, gpus=1, mem_mb=4096))
    return j


def rows(job, fields):
    out = sacct_format.sacct_table([job], fields, header=False, parsable="parsable2")
    return [line.split("|") for line in out.splitlines()]


def test_alloc_and_req_tres_carry_the_gpus_typed_and_plain_in_slurms_order():
    got = rows(_job(gpus_per_node=2, gpu_type="a100"), "JobID,AllocTRES,ReqTRES")
    assert got == [
        ["12", "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=48G,node=1",
         "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=48G,node=1"],
        ["12.batch", "cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=48G,node=1", ""],
        ["12.0", "cpu=2,gres/gpu:a100=1,gres/gpu=1,mem=4G,node=1", ""],
    ]
    plain = rows(_job(gpus_per_node=2), "JobID,AllocTRES")
    assert plain[0][1] == "billing=8,cpu=8,gres/gpu=2,mem=48G,node=1"


def test_a_job_without_gpus_has_no_gres_and_alloc_tres_60_is_not_cut():
    job = api_pb2.JobInfo(job_id=3, state="COMPLETED", num_nodes=1, num_cpus=1,
                          mem_per_node_mb=100, nodes="node1")
    assert rows(job, "AllocTRES")[0] == ["billing=1,cpu=1,mem=100M,node=1"]
    wide = sacct_format.sacct_table([_job(gpus_per_node=2, gpu_type="a100")], "AllocTRES%60",
                               header=False)
    assert wide.splitlines()[0].strip() == \
        "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=48G,node=1"
    narrow = sacct_format.sacct_table([_job(gpus_per_node=2)], "AllocTRES", header=False)
    assert narrow.splitlines()[0].strip() == "billing=8+", "the default width cuts it"


def test_gpu_usage_sampled_by_the_agent_is_in_tres_usage_in():
    got = rows(_job(gpus_per_node=2), "JobID,TRESUsageInAve,TRESUsageInMax")
    assert got[1] == [
        "12.batch",
        "cpu=00:00:00,energy=0,fs/disk=0,gres/gpumem=6G,gres/gpuutil=57,mem=1M,pages=0,vmem=0",
        "cpu=00:00:00,energy=0,fs/disk=0,gres/gpumem=8G,gres/gpuutil=93,mem=2M,pages=0,vmem=0",
    ]
    assert "gres/gpuutil=0" in got[2][2], "a GPU step with no sample reads 0"
    cpu_only = api_pb2.JobInfo(job_id=3, state="COMPLETED", num_nodes=1, num_cpus=1,
                               nodes="node1")
    cpu_only.steps.append(api_pb2.StepInfo(step_id="batch", state="COMPLETED", nodes="node1",
                                           start_time=1, end_time=2))
    assert "gres/" not in rows(cpu_only, "TRESUsageInMax")[1][0]
