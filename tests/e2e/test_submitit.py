"""submitit, a real Slurm client, unchanged against our commands (first on PATH).

submitit writes an sbatch script (#SBATCH --signal=USR2@90, --open-mode=append,
--wckey, --array=0-N%P for map_array, ...) whose command is
``srun --unbuffered --output <folder>/%j_%t_log.out ...  python -m submitit.core._submit``,
submits it with ``sbatch``, polls ``sacct -o JobID,State,NodeList --parsable2 -j ID``
and cancels with ``scancel``. Every test here is a real job on a real local
cluster; nothing of submitit is replaced.
"""
from __future__ import annotations

import os
import time

import pytest

import submitit  # the test extra installs it
from submitit.core.utils import FailedJobError


@pytest.fixture(scope="module")
def executor(cluster, tmp_path_factory):
    """A SlurmExecutor whose commands reach the cluster through this process's environment."""
    mp = pytest.MonkeyPatch()
    for key in ("PATH", "LINGJUN_HOME", "LINGJUN_CONTROLLER"):
        mp.setenv(key, cluster.env[key])
    mp.delenv("SLURM_JOB_ID", raising=False)
    mp.delenv("LINGJUN_CONF", raising=False)
    try:
        ex = submitit.AutoExecutor(folder=str(cluster.work / "submitit" / "%j"), cluster="slurm")
        ex.update_parameters(timeout_min=5, slurm_partition="debug", tasks_per_node=1, nodes=1)
        yield ex
    finally:
        mp.undo()


def add(a: int, b: int) -> int:
    return a + b


def square(x: int) -> int:
    return x * x


def fail(message: str) -> None:
    raise ValueError(message)


def sleep_then(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def my_rank() -> tuple[int, int, int]:
    env = submitit.JobEnvironment()
    return env.global_rank, env.local_rank, env.num_tasks


def _wait_done(job, timeout: float = 60):
    deadline = time.time() + timeout
    while not job.done():
        if time.time() > deadline:
            raise AssertionError(f"job {job.job_id} not done after {timeout}s: state {job.state!r}, "
                                 f"stderr:\n{job.stderr()}")
        time.sleep(0.2)


def test_a_function_runs_as_a_job_and_returns_its_value(executor):
    job = executor.submit(add, 2, 3)
    _wait_done(job)
    state = job.get_info(mode="force").get("State")   # a fresh sacct call, not submitit's cache
    assert state == "COMPLETED", f"want sacct state COMPLETED, got {state!r}:\n{job.stderr()}"
    assert job.result() == 5


def test_map_array_runs_one_array_task_per_input(executor):
    jobs = executor.map_array(square, [0, 1, 2, 3, 4])
    assert len({j.job_id.split("_")[0] for j in jobs}) == 1, [j.job_id for j in jobs]
    for j in jobs:
        _wait_done(j)
    assert [j.result() for j in jobs] == [0, 1, 4, 9, 16]


def test_a_failing_function_raises_its_error_locally(executor):
    job = executor.submit(fail, "boom from the job")
    _wait_done(job)
    with pytest.raises(FailedJobError) as err:
        job.result()
    assert "ValueError: boom from the job" in str(err.value), str(err.value)


def test_a_cancelled_job_ends_cancelled(executor, cluster):
    job = executor.submit(sleep_then, 300)
    seen = cluster.wait_state(int(job.job_id), ("RUNNING", "FAILED", "COMPLETED"), timeout=30)
    assert seen == "RUNNING", f"want RUNNING before the cancel, got {seen}:\n{job.stderr()}"
    job.cancel(check=True)
    _wait_done(job, timeout=30)
    assert job.state.startswith("CANCELLED"), f"want CANCELLED, got {job.state!r}"
    assert not cluster.job_processes(int(job.job_id))


def test_tasks_of_a_job_see_their_global_ranks(executor):
    ex = submitit.AutoExecutor(folder=executor.folder, cluster="slurm")
    ex.update_parameters(timeout_min=5, slurm_partition="debug", tasks_per_node=2, nodes=1)
    job = ex.submit(my_rank)
    _wait_done(job)
    state = job.get_info(mode="force").get("State")
    assert state == "COMPLETED", f"want sacct state COMPLETED, got {state!r}:\n{job.stderr()}"
    assert job.results() == [(0, 0, 2), (1, 1, 2)]


def test_without_srun_values_failures_and_cancel_work_today(executor, cluster):
    # submitit's own use_srun=False runs the function in the batch script itself:
    # everything but srun (sbatch with submitit's #SBATCH lines, sacct --parsable2
    # polling, scancel) is exercised, and passes on this branch.
    ex = submitit.AutoExecutor(folder=executor.folder, cluster="slurm")
    ex.update_parameters(timeout_min=5, slurm_partition="debug", tasks_per_node=1, nodes=1,
                         slurm_use_srun=False)
    ok, bad, slow = ex.submit(add, 20, 22), ex.submit(fail, "no srun needed"), ex.submit(sleep_then, 300)
    _wait_done(ok)
    assert ok.result() == 42
    _wait_done(bad)
    with pytest.raises(FailedJobError) as err:
        bad.result()
    assert "ValueError: no srun needed" in str(err.value), str(err.value)
    cluster.wait_state(int(slow.job_id), "RUNNING", timeout=60)
    slow.cancel(check=True)
    _wait_done(slow, timeout=60)
    want = f"CANCELLED by {os.getuid()}"
    assert slow.state == want, f"want sacct's {want!r}, got {slow.state!r}"
