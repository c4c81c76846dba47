"""Node health probes on a real local cluster (issue 5, shows 1-3).

Probes run every ~1 s here ([sanity] interval_s through ``lingjun up --sanity``).
The disk fault is real: each node's scratch path is its own small tmpfs, and
the test fills it. Drop-in probes are shell scripts keyed on flag files the
test creates, so a fault can be put on one node, in one phase, and lifted.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster

INTERVAL = 1.0

DROPIN = """#!/bin/sh
# fails on a node while a flag file for it (and this phase) exists
if [ -e "{flags}/$LINGJUN_SANITY_PHASE-$LINGJUN_NODE" ]; then
  echo "flag $LINGJUN_SANITY_PHASE-$LINGJUN_NODE set by the test"
  exit 1
fi
exit 0
"""


def _up(c: Cluster, *sanity: str) -> None:
    c.run(["lingjun", "up", "--nodes", str(c.nodes), "--cpus", str(c.cpus),
           "--state-dir", str(c.state), "--port", str(c.port), "--kill-wait", "2",
           *[a for kv in sanity for a in ("--sanity", kv)]], check=True, timeout=90)


def _dropin_dir(root: Path) -> tuple[Path, Path]:
    flags = root / "flags"
    flags.mkdir()
    d = root / "probes.d"
    d.mkdir()
    script = d / "flagcheck"
    script.write_text(DROPIN.format(flags=flags))
    script.chmod(0o755)
    return d, flags


def _node_line(c: Cluster, node: str) -> str:
    """sinfo's view of one node: state and reason."""
    return c.run(["sinfo", "-h", "-N", "-n", node, "-o", "%N|%T|%E"]).stdout.strip()


def _wait_node(c: Cluster, node: str, pred, timeout: float, what: str) -> tuple[str, float]:
    t0 = time.monotonic()
    line = ""
    while time.monotonic() - t0 < timeout:
        line = _node_line(c, node)
        if pred(line):
            return line, time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(f"{node}: want {what} within {timeout}s, got {line!r}")


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """4 nodes, each with a 4 MB tmpfs scratch; a drop-in probe; probes every second."""
    root = tmp_path_factory.mktemp("sanity")
    c = Cluster(root, nodes=4)
    scratch = root / "scratch"
    mounted = []
    try:
        for i in range(1, 5):
            d = scratch / f"node{i}"
            d.mkdir(parents=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(d)], check=True)
            mounted.append(d)
        dropins, flags = _dropin_dir(root)
        c.flags = flags
        c.scratch = scratch
        _up(c, f"interval_s={INTERVAL}", "jitter=0.1", f"scratch_paths=['{scratch}/{{node}}']",
            "disk_min_free_mb=2", "disk_min_free_pct=0", f"dropin_dir={dropins}", "flap_count=100")
        yield c
    finally:
        c.down()
        for d in mounted:
            subprocess.run(["umount", str(d)], check=False)


def test_a_full_scratch_drains_the_node_and_freeing_it_returns_the_node(probed):
    c = probed
    _wait_node(c, "node2", lambda l: "|idle|" in l, 10, "idle")
    fill = c.scratch / "node2" / "fill"
    fill.write_bytes(b"\0" * (3 << 20))          # 3 of 4 MB: 1 MB left < 2 MB
    try:
        line, took = _wait_node(c, "node2", lambda l: "drain" in l, 3 * INTERVAL + 2, "drained")
        print(f"fault -> drain: {took:.2f} s")
        assert f"disk: {c.scratch}/node2: 1 MB free < 2 MB" in line, line
        # sinfo -R: REASON USER TIMESTAMP NODELIST, as Slurm's
        out = c.run(["sinfo", "-R"], check=True).stdout
        assert out.splitlines()[0].split() == ["REASON", "USER", "TIMESTAMP", "NODELIST"], out
        assert "disk:" in out and "root" in out and "node2" in out, out
        show = c.run(["scontrol", "show", "node", "node2"], check=True).stdout
        assert "State=IDLE+DRAIN " in show and "HealthCheck=disk:FAIL(drain)" in show, show
        assert f"Reason=disk: {c.scratch}/node2: 1 MB free < 2 MB [root@" in show, show
        healthy = c.run(["scontrol", "show", "node", "node1"], check=True).stdout
        assert "HealthCheck=" not in healthy and "Reason=" not in healthy, healthy
        health = c.run(["lingjun", "health", "node2"], check=True).stdout
        row = next(l for l in health.splitlines() if l.split()[1:2] == ["disk"])
        assert row.split()[2:4] == ["drain", "FAIL"], health
        # no new job lands there: a job for all four nodes waits
        job = c.sbatch("-N", "4", "-t", "1", "--wrap", "hostname")
        time.sleep(1.5)
        assert c.squeue(job, "%T|%N") == "PENDING|", c.squeue(job, "%T|%R")
    finally:
        fill.unlink()
    _wait_node(c, "node2", lambda l: "|idle|" in l or "alloc" in l or "mixed" in l,
               3 * INTERVAL + 2, "back in service")
    c.wait_state(job, ("RUNNING", "COMPLETING", "COMPLETED"), timeout=15)
    events = c.run(["lingjun", "health", "node2", "--events", "5"], check=True).stdout
    assert " node2 drain: disk:" in events and " node2 resume: disk:" in events, events


def test_a_failing_dropin_drains_its_node_and_a_person_drain_stays(probed):
    c = probed
    flag = c.flags / "periodic-node3"
    flag.touch()
    try:
        line, _ = _wait_node(c, "node3", lambda l: "drain" in l, 3 * INTERVAL + 2, "drained")
        assert "dropin:flagcheck: flag periodic-node3 set by the test" in line, line
    finally:
        flag.unlink()
    _wait_node(c, "node3", lambda l: "|idle|" in l, 3 * INTERVAL + 2, "idle again")

    c.run(["scontrol", "update", "NodeName=node4", "State=DRAIN", "Reason=bad fan"], check=True)
    # a probe fails there, then passes again: the person's drain and reason stay
    (c.flags / "periodic-node4").touch()
    time.sleep(2 * INTERVAL + 0.5)
    (c.flags / "periodic-node4").unlink()
    time.sleep(3 * INTERVAL)
    line = _node_line(c, "node4")
    assert line.split("|")[1] == "drained" and line.endswith("|bad fan"), line
    health = c.run(["lingjun", "health", "node4"], check=True).stdout
    assert "dropin:flagcheck" in health and "FAIL" not in health, health
    c.run(["scontrol", "update", "NodeName=node4", "State=RESUME"], check=True)
    _wait_node(c, "node4", lambda l: "|idle|" in l, 5, "idle after resume")


def test_a_node_failing_its_probes_at_registration_never_joins_idle(tmp_path):
    c = Cluster(tmp_path, nodes=2)
    dropins, flags = _dropin_dir(tmp_path)
    (flags / "register-node2").touch()
    (flags / "periodic-node2").touch()
    try:
        _up(c, f"dropin_dir={dropins}", "interval_s=60")
        line = _node_line(c, "node2")
        assert line.split("|")[1] == "drained", line
        assert line.endswith("|dropin:flagcheck: flag register-node2 set by the test"), line
        assert _node_line(c, "node1").split("|")[1] == "idle"
    finally:
        c.down()


def test_a_gang_whose_node_fails_its_prolog_starts_at_once_on_healthy_nodes(tmp_path):
    c = Cluster(tmp_path, nodes=5)
    dropins, flags = _dropin_dir(tmp_path)
    (flags / "prolog-node2").touch()
    try:
        _up(c, f"dropin_dir={dropins}", "interval_s=60")
        out = c.work / "gang.out"
        t0 = time.monotonic()
        job = c.sbatch("-N", "4", "-t", "1", "-o", str(out), "--wrap",
                       "echo nodes=$SLURM_JOB_NODELIST; srun hostname | sort")
        text = c.wait_file(out, timeout=20, contains="node5")
        took = time.monotonic() - t0
        print(f"submit -> output on healthy nodes: {took:.2f} s")
        assert text.splitlines()[0] == "nodes=node[1,3-5]", text
        assert "node2" not in text, text
        line = _node_line(c, "node2")
        assert "drain" in line and line.endswith(
            "|dropin:flagcheck: flag prolog-node2 set by the test"), line
        show = c.run(["scontrol", "show", "job", str(job)], check=True).stdout
        assert "Restarts=0" in show, show
        health = c.run(["lingjun", "health", "node2", "--events", "3"], check=True).stdout
        assert f"prolog_fail job {job}: dropin:flagcheck" in health, health
        tcp = c.run(["lingjun", "health", "node3"], check=True).stdout
        row = next(l for l in tcp.splitlines() if l.split()[1:2] == ["tcp"])
        assert row.split()[2:4] == ["warn", "ok"], tcp        # all-to-all among node[1,3-5]
        # not enough healthy nodes for a 5-node gang: it waits, with a reason
        wide = c.sbatch("-N", "5", "-t", "1", "--wrap", "true")
        time.sleep(1.5)
        state, reason = c.squeue(wide, "%T|%r").split("|")
        assert state == "PENDING" and reason not in ("", "None"), (state, reason)
    finally:
        c.down()
