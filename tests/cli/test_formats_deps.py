"""scontrol show job for jobs with dependencies and holds, against golden Slurm output."""
from __future__ import annotations

import pytest

from tests.cli.golden_files import load
from tests.cli.test_formats import job, sc_job, utc  # noqa: F401 - utc is an autouse fixture

CASES = [
    ("scontrol_show_job_dependency", lambda: sc_job(job(
        14, "dep", reason="Dependency", submit="10:04:04", eligible=0,
        dependency="afterok:7(unfulfilled)"), default_mem_mb=2000)),
    ("scontrol_show_job_updated", lambda: sc_job(job(
        14, "dep", reason="JobHeldAdmin", submit="10:04:04", eligible=0, priority=0, limit=10,
        dependency="afterok:7(unfulfilled)"), default_mem_mb=2000)),
]


@pytest.mark.parametrize("name,render", CASES, ids=[
    "a job waiting on another shows what it waits for, not yet eligible",
    "held by root and given a time limit: JobHeldAdmin, Priority=0, TimeLimit=00:10:00",
])
def test_scontrol_show_job_matches_golden(name, render):
    want = load(name).stdout
    got = render()
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"
