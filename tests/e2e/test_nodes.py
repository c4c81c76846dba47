"""Node states as an operator drives them, and the daemons' readiness for systemd."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from tests.e2e.conftest import Cluster


def test_a_drained_node_takes_no_new_work_until_resumed(cluster):
    c = cluster
    p = c.run(["scontrol", "update", "NodeName=node2", "State=DRAIN", "Reason=bad dimm"])
    assert p.returncode == 0, p.stderr
    try:
        assert c.run(["sinfo", "-h", "-n", "node2", "-o", "%t"]).stdout.strip() == "drain"
        reasons = c.run(["sinfo", "-R", "-h"]).stdout
        assert "bad dimm" in reasons and "node2" in reasons
        small = c.sbatch("-N", "3", "-o", "/dev/null", "--wrap", "sleep 1")
        c.wait_state(small, ("RUNNING", "COMPLETING", "COMPLETED"))
        assert "node2" not in c.squeue(small, "%N")
        c.wait_state(small, "COMPLETED")
        jid = c.sbatch("-N", "4", "-o", "/dev/null", "--wrap", "true")
        time.sleep(1)
        assert c.squeue(jid, "%T %r") == "PENDING Resources"
    finally:
        c.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=True)
    c.wait_state(jid, "COMPLETED", timeout=60)


def test_draining_needs_a_reason_and_changes_nothing_without(cluster):
    p = cluster.run(["scontrol", "update", "NodeName=node3", "State=DRAIN"])
    assert p.returncode == 1
    assert "You must specify a reason when DOWNING or DRAINING a node" in p.stderr
    assert "drain" not in cluster.run(["sinfo", "-h", "-n", "node3", "-o", "%t"]).stdout


def test_lingjund_tells_systemd_when_it_serves(tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    port = Cluster(tmp_path).port
    env = dict(os.environ, NOTIFY_SOCKET=path)
    from lingjun import auth  # no controller starts without its cluster key
    auth.write_key(tmp_path / "cluster.key")
    conf = tmp_path / "lingjun.toml"
    conf.write_text(f'[auth]\nkey_file = "{tmp_path / "cluster.key"}"\nsocket = "{tmp_path / "auth.sock"}"\n')
    proc = subprocess.Popen([sys.executable, "-m", "lingjund.daemon", "-c", str(conf),
                             "--listen", f"127.0.0.1:{port}",
                             "--state-dir", str(tmp_path / "state")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert sock.recv(100) == b"READY=1"
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # it serves by the time it says so
        proc.terminate()
        assert sock.recv(100) == b"STOPPING=1"
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        sock.close()
