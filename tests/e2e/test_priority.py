"""priority/multifactor on a real local cluster: nice, scontrol top, Priority=,
and sprio, through the real commands. One node of one CPU, so jobs run one at
a time in the order the queue gives; every weight is non-zero."""
from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager

import pytest

from tests.e2e.conftest import Cluster
from tests.e2e.test_dependencies import field, gate, show, wait_reason

EXTRA = """
[priority]
weight_age = 1000
weight_fairshare = 10000
weight_job_size = 500
weight_partition = 1000
weight_qos = 1000
weight_assoc = 100
"""


@pytest.fixture(scope="module")
def one_cpu(tmp_path_factory):
    root = tmp_path_factory.mktemp("priority")
    extra = root / "priority.toml"
    extra.write_text(EXTRA)
    c = Cluster(root, nodes=1, cpus=1, up_args=("--extra-config", str(extra)))
    c.up()
    try:
        yield c
    finally:
        c.down()


@contextmanager
def blocker(c: Cluster, name: str):
    """A running job holding the one CPU until the test touches its gate (touched on
    the way out whatever happens, so that a failure leaves the next test a free CPU)."""
    go, wait = gate(c, name)
    job = c.sbatch("-J", "blocker", "--wrap", wait)
    try:
        c.wait_state(job, "RUNNING")
        yield go
    finally:
        go.touch()
        c.run(["scancel", "-t", "PENDING", "-u", os.environ.get("USER", "root")])


def run_order(c: Cluster, log, jobs: list[int]) -> list[int]:
    for j in jobs:
        c.wait_state(j, "COMPLETED")
    return [int(x) for x in log.read_text().split()]


def test_a_niced_job_runs_after_an_equal_job_submitted_later(one_cpu):
    c = one_cpu
    log = c.work / "nice.log"
    with blocker(c, "nice.go") as go:
        first = c.sbatch("--nice=1000", "--wrap", f"echo $SLURM_JOB_ID >> {log}")
        later = c.sbatch("--wrap", f"echo $SLURM_JOB_ID >> {log}")
        wait_reason(c, first, "Priority")
        assert c.squeue(first, "%y") == "1000"
        gap = int(c.squeue(later, "%Q")) - int(c.squeue(first, "%Q"))
        assert 1000 <= gap <= 1001, gap       # nice, less at most a point of age
        go.touch()
        assert run_order(c, log, [first, later]) == [later, first]


def test_scontrol_top_moves_a_job_ahead_of_the_owners_others(one_cpu):
    c = one_cpu
    log = c.work / "top.log"
    with blocker(c, "top.go") as go:
        x, y, z = (c.sbatch("--wrap", f"echo $SLURM_JOB_ID >> {log}") for _ in range(3))
        wait_reason(c, z, "Priority")
        p = c.run(["scontrol", "top", str(z)])
        assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), p
        # z first; x and y keep their order (by submission when their priorities tie)
        assert int(c.squeue(z, "%Q")) > int(c.squeue(x, "%Q")) >= int(c.squeue(y, "%Q"))
        go.touch()
        assert run_order(c, log, [x, y, z]) == [z, x, y]


def test_an_operators_priority_stays_and_priority_zero_holds(one_cpu):
    c = one_cpu
    log = c.work / "set.log"
    with blocker(c, "set.go") as go:
        a = c.sbatch("--wrap", f"echo $SLURM_JOB_ID >> {log}")
        b = c.sbatch("--nice=5", "--wrap", f"echo $SLURM_JOB_ID >> {log}")
        held = c.sbatch("--wrap", "true")
        assert c.run(["scontrol", "update", f"JobId={b}", "Priority=4000000"]).returncode == 0
        assert c.run(["scontrol", "update", f"JobId={held}", "Priority=0"]).returncode == 0
        wait_reason(c, held, "JobHeldAdmin")
        time.sleep(1.5)                            # passes go by: the set priority stays
        got = show(c, b)
        assert (field(got, "Priority"), field(got, "Nice")) == ("4000000", "0"), got
        assert field(show(c, held), "Priority") == "0"
        p = c.run(["scontrol", "update", f"JobId={a}", "Priority=abc"])
        assert (p.returncode, p.stderr.strip()) == (1, "scontrol: error: Invalid Priority value: abc")
        go.touch()
        assert run_order(c, log, [a, b]) == [b, a]


def test_sprio_shows_every_factor_and_the_weights(one_cpu):
    c = one_cpu
    with blocker(c, "sprio.go"):
        _sprio_checks(c)


def _sprio_checks(c: Cluster) -> None:
    job = c.sbatch("--nice=7", "--wrap", "true")
    wait_reason(c, job, "Resources")
    out = c.run(["sprio", "-l", f"-j{job}"], check=True).stdout.splitlines()
    head, row = out[0].split(), out[1].split()
    assert head == ["JOBID", "PARTITION", "USER", "PRIORITY", "SITE", "AGE", "ASSOC",
                    "FAIRSHARE", "JOBSIZE", "PARTITION", "QOS", "NICE", "TRES"], out
    got = dict(zip(["JOBID", "PARTITION", "USER", "PRIORITY", "SITE", "AGE", "ASSOC",
                    "FAIRSHARE", "JOBSIZE", "PARTITION_F", "QOS", "NICE"], row))
    # one node of one CPU: a 1-CPU job is the whole cluster, (1/1 + 1/1) / 2 = 1.0;
    # fair share 1.0 (no accounts yet); the one partition holds the highest factor
    assert (got["JOBID"], got["PARTITION"], got["SITE"], got["ASSOC"], got["FAIRSHARE"],
            got["JOBSIZE"], got["PARTITION_F"], got["QOS"], got["NICE"]) == \
        (str(job), "debug", "0", "0", "10000", "500", "1000", "0", "7"), out
    # the sum, truncated, of the factors sprio shows rounded: within a point
    assert abs(int(got["PRIORITY"]) - (10000 + 500 + 1000 + int(got["AGE"]) - 7)) <= 1, out
    w = c.run(["sprio", "-w"], check=True).stdout.splitlines()
    assert w[1].split() == ["Weights", "1", "1000", "100", "10000", "500", "1000", "1000"], w
    norm = c.run(["sprio", "-n", "-h", f"-j{job}"], check=True).stdout.split()
    # JOBID PARTITION PRIORITY AGE ASSOC FAIRSHARE JOBSIZE PARTITION QOS (no SITE, as Slurm's)
    assert norm[4:] == ["0.0000000", "1.0000000", "1.0000000", "1.0000000", "0.0000000"], norm
    assert re.fullmatch(r"0\.\d{7}", norm[3]), norm            # age: seconds of 7 days
    p = c.run(["sprio", "-j999999"])
    assert (p.returncode, p.stdout.strip()) == (0, "Unable to find jobs matching user/id(s) specified")
