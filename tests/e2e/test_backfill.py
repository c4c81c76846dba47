"""Backfill on a local cluster (issue 16, must-show 1).

node1 is busy with a 2-minute job; a 4-node job waits for it (Resources) and
squeue --start shows when it will start and on which nodes; a 1-node
1-minute job submitted after it starts at once, since it ends before that
time; the 4-node job then starts at its reserved time, within one pass.
"""
from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import Cluster, wait_for

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)

START_HEADER = ("JOBID PARTITION NAME USER ST START_TIME NODES SCHEDNODES "
                "NODELIST(REASON)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("backfill")
    extra = root / "extra.toml"
    # ends counted to the second, so that the reserved time is the busy job's end
    extra.write_text("[scheduler]\nbackfill = true\nbf_resolution_s = 1\n")
    c = Cluster(root, up_args=("--extra-config", str(extra)))
    c.up()
    try:
        yield c
    finally:
        c.down()


def _epoch(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def test_small_job_backfills_and_the_gang_starts_at_its_reserved_time(cluster: Cluster):
    cluster.wait_nodes_up()
    busy = cluster.sbatch("-N1", "-w", "node1", "--exclusive", "-t", "2", "--wrap", "sleep 600")
    cluster.wait_state(busy, "RUNNING")
    busy_start = _epoch(cluster.squeue(busy, "%S"))

    gang = cluster.sbatch("-N4", "-t", "1", "--wrap", "sleep 1")
    wait_for("a reservation for the 4-node job",
             lambda: cluster.squeue(gang, "%Y") == "node[1-4]", 15)
    assert cluster.squeue(gang, "%r") == "Resources"
    reserved = _epoch(cluster.squeue(gang, "%S"))
    assert abs(reserved - (busy_start + 120)) <= 1, (reserved, busy_start)

    small = cluster.sbatch("-N1", "-t", "1", "--wrap", "sleep 20")
    cluster.wait_state(small, "RUNNING", timeout=10)       # at once, in front of the gang
    assert cluster.squeue(small, "%N") in ("node2", "node3", "node4")

    before = cluster.run(["squeue", "--start"], check=True).stdout.splitlines()
    assert " ".join(before[0].split()) == START_HEADER
    row = next(line.split() for line in before[1:] if line.split()[0] == str(gang))
    assert row[4:] == ["PD", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(reserved)),
                       "4", "node[1-4]", "(Resources)"]
    assert not any(line.split()[0] in (str(busy), str(small)) for line in before[1:])
    shown = cluster.run(["scontrol", "show", "job", str(gang)], check=True).stdout
    assert f"StartTime={time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(reserved))}" in shown
    assert "SchedNodeList=node[1-4]" in shown

    # the busy job reaches its limit; the gang starts then, within a pass (2 s) or so
    cluster.wait_state(gang, ("RUNNING", "COMPLETING", "COMPLETED"), timeout=200)
    started = _epoch(cluster.squeue(gang, "%S"))
    assert reserved - 1 <= started <= reserved + 6, (reserved, started)
    assert cluster.state_of(busy) == "TIMEOUT"
    assert cluster.wait_state(small, "COMPLETED", timeout=30) == "COMPLETED"
