"""GPUs of steps and interactive work, through the real srun, salloc and sbatch,
on a local cluster of one node with 4 (configured, deviceless) GPUs and 8 CPUs.

Each task reports the GPUs it was given; with --gpus-per-task each task sees
only its own device (Slurm's implied --gpu-bind=per_task:N), steps get
subsets of the allocation's GPUs, and a step asking more than the
allocation has is refused in Slurm's words.
"""
from __future__ import annotations

import pytest

from tests.e2e.conftest import Cluster

SHOW = ('echo "rank=$SLURM_PROCID cuda=$CUDA_VISIBLE_DEVICES ordinal=$GPU_DEVICE_ORDINAL '
        'step=$SLURM_STEP_GPUS job=$SLURM_JOB_GPUS"')


@pytest.fixture(scope="module")
def gpus(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("gpu-steps"), nodes=1, cpus=8,
                up_args=("--gpus", "4", "--gpu-type", "a100"))
    c.up()
    try:
        yield c
    finally:
        c.down()


def _by_rank(stdout: str) -> dict[int, dict[str, str]]:
    out = {}
    for line in stdout.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "rank" in fields:
            out[int(fields["rank"])] = fields
    return out


def _job_id(stderr: str) -> int:
    granted = [l for l in stderr.splitlines() if "Granted job allocation" in l]
    assert granted, stderr
    return int(granted[0].rsplit(" ", 1)[1])


def _assert_one_device_each(stdout: str) -> None:
    tasks = _by_rank(stdout)
    assert sorted(tasks) == [0, 1, 2, 3], stdout
    devices = [tasks[r]["cuda"] for r in range(4)]
    assert sorted(devices) == ["0", "1", "2", "3"], stdout     # one device each, all different
    for t in tasks.values():
        assert t["ordinal"] == t["cuda"], stdout
        assert (t["step"], t["job"]) == ("0,1,2,3", "0,1,2,3"), stdout


def test_gpus_per_task_in_a_batch_job_gives_each_of_four_tasks_its_own_gpu(gpus):
    c = gpus
    script = f"#!/bin/bash\nsrun --gpus-per-task=1 -n 4 bash -c '{SHOW}'\n"
    jid = c.sbatch("--gres=gpu:4", "-n4", "-o", str(c.work / "per-task.out"), input=script)
    c.wait_state(jid, "COMPLETED")
    _assert_one_device_each((c.work / "per-task.out").read_text())


def test_a_plain_srun_in_a_gpus_per_task_job_gives_each_task_its_own_gpu(gpus):
    # sbatch --gpus-per-task=1 -n4: the job holds 4 GPUs, the script sees them all, and
    # srun takes --gpus-per-task from SLURM_GPUS_PER_TASK, as Slurm's does
    c = gpus
    script = ("#!/bin/bash\necho \"script cuda=$CUDA_VISIBLE_DEVICES per_task=$SLURM_GPUS_PER_TASK\"\n"
              f"srun bash -c '{SHOW}'\n")
    jid = c.sbatch("--gpus-per-task=1", "-n4", "-o", str(c.work / "inherit.out"), input=script)
    c.wait_state(jid, "COMPLETED")
    out = (c.work / "inherit.out").read_text()
    assert "script cuda=0,1,2,3 per_task=1\n" in out, out
    _assert_one_device_each(out)


def test_gpus_per_task_in_salloc_gives_each_of_four_tasks_its_own_gpu(gpus):
    p = gpus.run(["salloc", "--gres=gpu:4", "-n4", "srun", "--gpus-per-task=1", "-n", "4",
                  "bash", "-c", SHOW], check=True)
    _assert_one_device_each(p.stdout)


def test_srun_gpus_1_outside_an_allocation_gets_an_allocation_of_one_gpu(gpus):
    p = gpus.run(["srun", "--gpus=1", "bash", "-c", SHOW + '; echo "on_node=$SLURM_GPUS_ON_NODE"'],
                 check=True)
    assert _by_rank(p.stdout)[0] == {"rank": "0", "cuda": "0", "ordinal": "0", "step": "0",
                                     "job": "0"}, p.stdout
    assert "on_node=1" in p.stdout


def test_srun_inside_salloc_gres_gpu_2_sees_the_two_gpus(gpus):
    p = gpus.run(["salloc", "--gres=gpu:2", "srun", "bash", "-c", SHOW], check=True)
    assert _by_rank(p.stdout)[0] == {"rank": "0", "cuda": "0,1", "ordinal": "0,1", "step": "0,1",
                                     "job": "0,1"}, p.stdout


def test_a_step_asking_more_gpus_than_the_allocation_has_is_refused(gpus):
    p = gpus.run(["salloc", "--gres=gpu:2", "srun", "--gpus=3", "true"])
    jid = _job_id(p.stderr)
    assert (f"srun: error: Unable to create step for job {jid}: "
            f"Invalid generic resource (gres) specification") in p.stderr.splitlines(), p.stderr
    assert p.returncode == 1, p.stderr
    assert p.stdout == ""


def test_two_concurrent_one_gpu_steps_get_different_gpus_and_a_bigger_one_waits(gpus):
    # a and b each hold one GPU until the gate opens; c asks both and must wait
    script = (
        "gate=gate-$SLURM_JOB_ID\n"
        f"srun --exclusive -n1 --gpus=1 bash -c '{SHOW}; touch up-$SLURM_JOB_ID-$SLURM_STEP_ID; "
        "while [ ! -e '$gate' ]; do sleep 0.1; done' &\n"
        f"srun --exclusive -n1 --gpus=1 bash -c '{SHOW}; touch up-$SLURM_JOB_ID-$SLURM_STEP_ID; "
        "while [ ! -e '$gate' ]; do sleep 0.1; done' &\n"
        "while [ $(ls up-$SLURM_JOB_ID-* 2>/dev/null | wc -l) -lt 2 ]; do sleep 0.1; done\n"
        # the gate opens once c said it waits (or after 30 s, when the test fails)
        "(for i in $(seq 300); do grep -q busy c-$SLURM_JOB_ID.err && break; sleep 0.1; done; "
        "touch $gate) &\n"
        "srun --exclusive -n1 --gpus=2 bash -c 'echo \"c cuda=$CUDA_VISIBLE_DEVICES\"' "
        "2>c-$SLURM_JOB_ID.err\n"
        "wait; cat c-$SLURM_JOB_ID.err >&2\n")
    p = gpus.run(["salloc", "--gres=gpu:2", "-n2", "bash", "-c", script], check=True, timeout=60)
    jid = _job_id(p.stderr)
    seen = sorted(l.split("cuda=")[1].split()[0] for l in p.stdout.splitlines()
                  if l.startswith("rank="))
    assert seen == ["0", "1"], p.stdout
    assert "c cuda=0,1" in p.stdout.splitlines(), p.stdout
    assert (f"srun: Job {jid} step creation temporarily disabled, retrying (Requested nodes are busy)"
            in p.stderr.splitlines()), p.stderr


def test_gpu_bind_single_and_map_gpu(gpus):
    p = gpus.run(["salloc", "--gres=gpu:2", "-n4", "bash", "-c",
                  f"srun -n4 --gpu-bind=single:2 bash -c '{SHOW}'; "
                  f"srun -n2 --gpu-bind=map_gpu:1,0 bash -c 'echo map $SLURM_PROCID $CUDA_VISIBLE_DEVICES'; "
                  f"srun -n2 --gpu-bind=closest bash -c 'echo closest $SLURM_PROCID $CUDA_VISIBLE_DEVICES'"],
                 check=True)
    tasks = _by_rank(p.stdout)
    assert [tasks[r]["cuda"] for r in range(4)] == ["0", "0", "1", "1"], p.stdout
    lines = p.stdout.splitlines()
    assert sorted(l for l in lines if l.startswith("map ")) == ["map 0 1", "map 1 0"], p.stdout
    # no topology is known: every GPU is as close as any other, each task sees both
    assert sorted(l for l in lines if l.startswith("closest ")) == ["closest 0 0,1",
                                                                    "closest 1 0,1"], p.stdout


def test_cpus_and_memory_per_gpu_size_the_allocation(gpus):
    p = gpus.run(["srun", "--gres=gpu:2", "--cpus-per-gpu=3", "--mem-per-gpu=100M", "bash", "-c",
                  'echo "cpus=$SLURM_CPUS_ON_NODE mem=$SLURM_MEM_PER_GPU per_gpu=$SLURM_CPUS_PER_GPU"; '
                  'scontrol -d show job $SLURM_JOB_ID | grep " Nodes="'], check=True)
    assert "cpus=6 mem=100 per_gpu=3" in p.stdout, p.stdout
    assert "Mem=200 GRES=gpu:a100:2(IDX:0-1)" in p.stdout, p.stdout
