"""One controller per state directory and per port: a second one refuses to start.

A running local cluster with a job running on it; then a second ``lingjund``
is started against it, as an operator might by mistake (same state
directory with another config; another state directory on the same port).
It must exit non-zero naming the process in the way, and the first
controller must not notice: its database file unchanged, its nodes up, its
job running, its port answering every submission.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, _free_port


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("one-controller"), nodes=2)
    c.up()
    try:
        c.wait_nodes_up()
        job = c.sbatch("-o", "/dev/null", "--wrap", "sleep 300")
        c.wait_state(job, "RUNNING")
        yield c, job
    finally:
        c.down()


def _config(c: Cluster, name: str, port: int, state: Path) -> Path:
    conf = c.root / f"{name}.toml"
    conf.write_text(f'[controller]\nlisten = "127.0.0.1:{port}"\nstate_dir = "{state}"\n'
                    f'[auth]\nkey_file = "{c.state / "cluster.key"}"\n'
                    f'socket = "{c.root / (name + ".sock")}"\n')
    return conf


def _second(c: Cluster, *argv: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "lingjund.daemon", *argv], env=c.env,
                              capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the second controller kept running: {e.stderr}") from None


def _db(c: Cluster) -> str:
    return hashlib.sha256((c.state / "controller" / "lingjund.db").read_bytes()).hexdigest()


def _unchanged(c: Cluster, job: int, db_before: str) -> None:
    assert _db(c) == db_before
    states = c.run(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout.split("\n")
    assert not [s for s in states if s and s.split()[1] not in ("idle", "mixed", "allocated")], states
    assert c.state_of(job) == "RUNNING"
    for _ in range(4):      # every submission lands on the first controller
        j = c.sbatch("-o", "/dev/null", "--wrap", "true")
        c.wait_state(j, "COMPLETED")


def test_a_second_controller_on_the_same_state_dir_refuses_naming_the_first(busy):
    c, job = busy
    before = _db(c)
    other_port = _free_port()
    p = _second(c, "-c", str(_config(c, "same-dir", other_port, c.state / "controller")))
    assert p.returncode != 0
    first = c.pid_of("lingjund")
    assert f"state directory {c.state / 'controller'} is in use by pid {first} (" in p.stderr, p.stderr
    assert "lingjund.daemon" in p.stderr       # its command line
    assert "Traceback" not in p.stderr
    assert not (c.root / "same-dir.sock").exists()
    with pytest.raises(OSError):
        import socket
        socket.create_connection(("127.0.0.1", other_port), timeout=1).close()
    _unchanged(c, job, before)


def test_a_second_controller_on_the_same_port_refuses_naming_the_listener(busy, tmp_path):
    c, job = busy
    before = _db(c)
    p = _second(c, "-c", str(_config(c, "same-port", c.port, tmp_path / "other-state")))
    assert p.returncode != 0
    first = c.pid_of("lingjund")
    assert f"cannot listen on 127.0.0.1:{c.port}: address already in use by pid {first} (" in p.stderr, \
        p.stderr
    assert "Traceback" not in p.stderr
    assert not (c.root / "same-port.sock").exists()
    _unchanged(c, job, before)


def test_lingjun_up_refuses_a_state_dir_whose_controller_runs(busy, tmp_path):
    c, _ = busy
    root = tmp_path / "local"
    hand = subprocess.Popen([sys.executable, "-m", "lingjund.daemon", "-c",
                             str(_config(c, "by-hand", _free_port(), root / "controller"))],
                            env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c.wait_file(root / "controller" / "lingjund.db", timeout=20)
        p = c.run(["lingjun", "up", "--nodes", "1", "--state-dir", str(root), "--port", str(_free_port())],
                  timeout=60)
        assert p.returncode == 1
        assert f"state directory {root / 'controller'} is in use by pid {hand.pid} (" in p.stderr, p.stderr
        assert not (root / "cluster.json").exists()
        assert hand.poll() is None
    finally:
        hand.terminate()
        hand.wait(20)
