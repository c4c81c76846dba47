"""Restarts lose nothing: kill -9 of the controller or of an agent (issue #2, 4-5)."""
from __future__ import annotations

import time

import psutil

import pytest

from tests.e2e.conftest import Cluster


@pytest.fixture
def fresh(tmp_path):
    # Jobs outlive a controller restart shorter than the heartbeat timeout;
    # longer, the agents' leases lapse and they stop their jobs (fencing).
    # The restart below takes ~5 s on a loaded test host.
    c = Cluster(tmp_path, heartbeat_timeout=15)
    c.up()
    try:
        yield c
    finally:
        c.down()


def _shells(c: Cluster, job_id: int) -> list[int]:
    """Pids of a job's long-lived processes (its loops' `sleep 0.1` come and go,
    and may be gone between listing and naming them)."""
    def short_lived(p) -> bool:
        try:
            return p.name() == "sleep"
        except psutil.Error:
            return True
    return sorted(p.pid for p in c.job_processes(job_id) if not short_lived(p))


def _states(c: Cluster, ids: list[int]) -> dict[int, str]:
    return {j: c.state_of(j) for j in ids}


def test_controller_kill9_loses_no_job_and_disturbs_none(fresh):
    c = fresh
    gate = c.work / "gate"
    running = [c.sbatch("-N", "2", "-o", str(c.work / f"run{i}.out"), "--wrap",
                        f"echo start; while [ ! -e {gate} ]; do sleep 0.1; done; echo end")
               for i in range(2)]
    for j in running:
        c.wait_state(j, "RUNNING")
    queued = [c.sbatch("-N", "4", "-o", "/dev/null", "--wrap", "true") for _ in range(3)]
    held = c.sbatch("-H", "-o", "/dev/null", "--wrap", "true")
    before = _states(c, running + queued + [held])
    pids = {j: _shells(c, j) for j in running}
    assert all(pids.values())

    c.kill9("lingjund")
    down = c.run(["squeue"])
    assert down.returncode != 0 and "Unable to contact slurm controller" in down.stderr
    assert "Traceback" not in down.stderr
    time.sleep(1)
    for j in running:  # the jobs did not notice
        assert _shells(c, j) == pids[j]
    c.restart("lingjund")
    c.wait_nodes_up(timeout=30)
    assert _states(c, running + queued + [held]) == before
    for j in running:
        assert _shells(c, j) == pids[j]
    gate.touch()
    for j in running + queued:
        c.wait_state(j, "COMPLETED", timeout=60)
    for i in range(2):
        assert (c.work / f"run{i}.out").read_text() == "start\nend\n"
    assert c.state_of(held) == "PENDING"


def test_agent_kill9_and_restart_runs_nothing_twice(fresh):
    c = fresh
    gate = c.work / "gate2"
    log = c.work / "runs.log"
    jid = c.sbatch("-N", "4", "-o", "/dev/null", "--wrap",
                   f"echo $SLURM_JOB_ID >> {log}; while [ ! -e {gate} ]; do sleep 0.1; done")
    c.wait_state(jid, "RUNNING")
    c.wait_file(log)
    script_pids = _shells(c, jid)
    c.kill9("node1")  # the batch host's agent
    time.sleep(0.5)
    assert _shells(c, jid) == script_pids  # the job lives on
    c.restart("node1")
    c.wait_nodes_up()
    assert c.state_of(jid) == "RUNNING"
    gate.touch()
    c.wait_state(jid, "COMPLETED", timeout=60)
    assert log.read_text().split() == [str(jid)]  # ran once
    after = c.sbatch("-N", "4", "-o", "/dev/null", "--wrap", "true")
    c.wait_state(after, "COMPLETED", timeout=60)


def test_a_silent_node_goes_down_and_returns_when_its_agent_does(fresh):
    c = fresh
    c.kill9("node4")
    deadline = time.time() + c.heartbeat_timeout + 10
    while c.run(["sinfo", "-h", "-n", "node4", "-o", "%t"]).stdout.strip() != "down*":
        assert time.time() < deadline, c.run(["sinfo", "-N"]).stdout
        time.sleep(0.3)
    reasons = c.run(["sinfo", "-R", "-h"]).stdout
    assert "Not responding" in reasons and "node4" in reasons
    jid = c.sbatch("-N", "4", "-o", "/dev/null", "--wrap", "true")
    time.sleep(1)
    assert c.squeue(jid, "%T %r") == "PENDING Resources"  # never on a dead node
    c.restart("node4")
    c.wait_state(jid, "COMPLETED", timeout=60)
    assert c.run(["sinfo", "-h", "-n", "node4", "-o", "%t"]).stdout.strip() == "idle"
