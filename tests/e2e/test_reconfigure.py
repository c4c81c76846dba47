"""The controller re-reads its configuration on SIGHUP and on `scontrol reconfigure`.

A running local cluster with a job running; the operator adds a partition
to the file and sends SIGHUP: `sinfo` shows it and a job submitted to it
runs, and the running job is not disturbed. A broken file on SIGHUP changes
nothing and the controller stays up, saying why in its log; the same file
through `scontrol reconfigure` fails with the reason and exit 1.
"""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.e2e.conftest import Cluster, wait_for


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("reconfigure"), nodes=2)
    c.up()
    try:
        c.wait_nodes_up()
        job = c.sbatch("-o", "/dev/null", "--wrap", "sleep 300")
        c.wait_state(job, "RUNNING")
        yield c, job
    finally:
        c.down()


def partitions(c: Cluster) -> list[str]:
    return sorted(c.run(["sinfo", "-h", "-o", "%R"], check=True).stdout.split())


def test_sighup_rereads_the_file_and_disturbs_no_job(running):
    c, job = running
    conf = c.state / "lingjun.toml"
    before = partitions(c)
    assert "big" not in before
    conf.write_text(conf.read_text() + '\n[[partitions]]\nname = "big"\nnodes = "ALL"\n'
                    'max_time = "1:00:00"\n')
    os.kill(c.pid_of("lingjund"), signal.SIGHUP)
    wait_for("the new partition", lambda: "big" in partitions(c), 10)
    assert sorted(before + ["big"]) == partitions(c)
    j = c.sbatch("-p", "big", "-o", "/dev/null", "--wrap", "true")
    c.wait_state(j, "COMPLETED")
    assert c.state_of(job) == "RUNNING"
    assert c.run(["scontrol", "show", "partition", "big"], check=True).stdout.count(
        "MaxTime=01:00:00") == 1


def test_a_broken_file_changes_nothing(running):
    c, job = running
    conf = c.state / "lingjun.toml"
    good = conf.read_text()
    before = partitions(c)
    pid = c.pid_of("lingjund")
    log = c.state / "logs" / "lingjund.log"
    try:
        conf.write_text(good + '\n[controller2]\nx = 1\n')
        os.kill(pid, signal.SIGHUP)
        wait_for("the error in the log", lambda: "reconfigure (SIGHUP) failed, configuration "
                 "unchanged" in log.read_text(), 10)
        assert "unknown key(s) controller2 (did you mean controller?)" in log.read_text()
        assert c.pid_of("lingjund") == pid
        assert partitions(c) == before
        p = c.run(["scontrol", "reconfigure"])
        assert p.returncode == 1
        assert p.stderr.startswith("slurm_reconfigure error: "), p.stderr
        assert "unknown key(s) controller2" in p.stderr
        j = c.sbatch("-o", "/dev/null", "--wrap", "true")    # still serving, as before
        c.wait_state(j, "COMPLETED")
        assert c.state_of(job) == "RUNNING"
    finally:
        conf.write_text(good)
    assert c.run(["scontrol", "reconfigure"]).returncode == 0


FAILING_PROBE = "#!/bin/sh\necho \"set by the reload test\"\nexit 1\n"


def _node(c: Cluster, node: str) -> str:
    return c.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], check=True).stdout.strip()


def test_sighup_to_an_agent_rereads_its_probes_and_disturbs_no_job(running, tmp_path):
    """An agent's SIGHUP is slurmd's reconfigure: a probe added to the file runs
    from then on (here it fails, so node2 drains with its words); the agent and
    the job on the cluster go on. Restoring the file and SIGHUP stops the probe."""
    c, job = running
    conf = c.state / "lingjun.toml"
    good = conf.read_text()
    assert "[sanity]" not in good
    probes = tmp_path / "probes.d"
    probes.mkdir()
    (probes / "reloaded").write_text(FAILING_PROBE)
    (probes / "reloaded").chmod(0o755)
    pid = c.pid_of("node2")
    try:
        conf.write_text(good + f'\n[sanity]\ninterval_s = 0.5\ndropin_dir = "{probes}"\n')
        os.kill(pid, signal.SIGHUP)
        wait_for("node2 drained by the new probe", lambda: "drain" in _node(c, "node2"), 15)
        assert "set by the reload test" in _node(c, "node2")
        assert c.pid_of("node2") == pid
        assert c.state_of(job) == "RUNNING"
        assert "drain" not in _node(c, "node1")       # only the agent told re-read it
    finally:
        conf.write_text(good)
        os.kill(pid, signal.SIGHUP)
    log = c.state / "logs" / "node2.log"
    wait_for("the second reload", lambda: log.read_text().count("configuration re-read") == 2, 10)
    c.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=True)
    time.sleep(1.5)                                     # three intervals of the old probe
    assert _node(c, "node2").startswith(("idle", "mixed", "allocated")), _node(c, "node2")


def test_a_broken_file_leaves_an_agent_as_it_was(running):
    c, job = running
    conf = c.state / "lingjun.toml"
    good = conf.read_text()
    pid = c.pid_of("node1")
    log = c.state / "logs" / "node1.log"
    try:
        conf.write_text(good + "\n[sanity]\ninterval_s = \"often\"\n")
        os.kill(pid, signal.SIGHUP)
        wait_for("the error in the agent's log", lambda: "reconfigure (SIGHUP) failed, "
                 "configuration unchanged" in log.read_text(), 10)
        assert "[sanity] interval_s = 'often': expected `float`, got `str`" in log.read_text()
        assert c.pid_of("node1") == pid
        assert c.state_of(job) == "RUNNING"
        j = c.sbatch("-w", "node1", "-o", "/dev/null", "--wrap", "true")
        c.wait_state(j, "COMPLETED")
    finally:
        conf.write_text(good)
