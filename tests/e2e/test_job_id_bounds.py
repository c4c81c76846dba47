"""Job ids no job can have (2**63 and more, negative, garbage) in every command that takes one.

Each command answers in its own Slurm words and exits 1; none prints a
Python traceback, and nothing reaches the store: before, 2**63 in
``--dependency`` was accepted and then failed every scheduling pass, so no
job of anyone started again.
"""
from __future__ import annotations

import pytest

from tests.e2e.conftest import Cluster

HUGE = str(2 ** 63)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("ids"), nodes=1)
    c.up()
    try:
        yield c
    finally:
        c.down()


# (argv with {} for the id, what the user sees)
COMMANDS = {
    "scancel": (["scancel", "{}"], "scancel: error: Invalid job id {}"),
    "scancel an array task": (["scancel", "{}_1"], "scancel: error: Invalid job id {}_1"),
    "scontrol show job": (["scontrol", "show", "job", "{}"], "slurm_load_jobs error: Invalid job id specified"),
    "scontrol update": (["scontrol", "update", "JobId={}", "TimeLimit=5"], "Invalid job id specified for job {}"),
    "scontrol hold": (["scontrol", "hold", "{}"], "Invalid job id specified for job {}"),
    "scontrol release": (["scontrol", "release", "{}"], "Invalid job id specified for job {}"),
    "scontrol requeue": (["scontrol", "requeue", "{}"], "Invalid job id specified for job {}"),
    "scontrol write batch_script": (["scontrol", "write", "batch_script", "{}", "-"],
                                    "job script retrieval failed: Invalid job id specified"),
    "squeue -j": (["squeue", "-j", "{}"], "squeue: error: Invalid job id: {}"),
    "squeue -j array task": (["squeue", "-j", "{}_1"], "squeue: error: Invalid job id: {}_1"),
    "sacct -j": (["sacct", "-j", "{}"], "sacct: error: Invalid job id: {}"),
    "srun --jobid": (["srun", "--jobid={}", "true"], 'srun: error: Invalid numeric value "{}" for --jobid.'),
    "sbatch --dependency": (["sbatch", "--dependency=afterok:{}", "--wrap=true"],
                            "sbatch: error: Batch job submission failed: Job dependency problem"),
    "lingjun events": (["lingjun", "events", "{}"], "lingjun: error: Invalid job id specified: {}"),
}


def _check(c: Cluster, argv: list[str], want: str, bad: str, env: dict | None = None) -> None:
    before = c.run(["squeue", "-h", "-t", "all", "-o", "%i %T"]).stdout
    p = c.run([a.format(bad) for a in argv], env=env)
    assert (p.returncode, p.stderr.strip()) == (1, want.format(bad))
    assert "Traceback" not in p.stdout + p.stderr
    assert c.run(["squeue", "-h", "-t", "all", "-o", "%i %T"]).stdout == before


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_job_id_past_int64_is_refused_in_slurms_words(small, name):
    argv, want = COMMANDS[name]
    _check(small, argv, want, HUGE)


@pytest.mark.parametrize("bad", ["1x", "٣"])
@pytest.mark.parametrize("name", ["scontrol update", "squeue -j", "srun --jobid", "lingjun events",
                                  "sbatch --dependency"])
def test_garbage_job_ids_are_refused_in_slurms_words(small, name, bad):
    argv, want = COMMANDS[name]
    _check(small, argv, want, bad)


def test_srun_refuses_a_huge_slurm_job_id_from_its_environment(small):
    env = dict(small.env, SLURM_JOB_ID=HUGE)
    _check(small, ["srun", "true"], 'srun: error: Invalid numeric value "{}" for --jobid.', HUGE, env=env)


def test_the_scheduler_still_starts_jobs_after_a_refused_huge_dependency(small):
    p = small.run(["sbatch", f"--dependency=afterok:{HUGE}", "--wrap=true"])
    assert p.returncode == 1
    job = small.sbatch("-o", "/dev/null", "--wrap", "true")
    small.wait_state(job, "COMPLETED", timeout=30)


@pytest.mark.parametrize("argv,want", [
    (["scontrol", "show", "job", "{}"], "slurm_load_jobs error: Invalid job id specified"),
    (["squeue", "-j", "{}"], "slurm_load_jobs error: Invalid job id specified"),
    (["scontrol", "hold", "{}"], "slurm_update error: Invalid job id specified"),
    (["lingjun", "events", "{}"], "lingjun: error: Invalid job id specified"),
], ids=["scontrol show job", "squeue -j", "scontrol hold", "lingjun events"])
def test_the_largest_id_the_wire_carries_names_no_job_in_slurms_words(small, argv, want):
    _check(small, argv, want, str(2 ** 63 - 1))
