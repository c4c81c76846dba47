"""The shipped units in systemd/ pass ``systemd-analyze verify``, keep their
hardening score, and the controller starts with what its unit leaves it.

The units name /usr/local/bin, where a package installs the programs; here
they are wherever this Python installed them, so each unit is checked as a
copy whose ExecStart points there.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lingjun import auth
from tests.e2e.conftest import _free_port, wait_for

UNITS = Path(__file__).resolve().parent.parent / "systemd"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed "
                                   "(Debian: apt-get install systemd)")
# systemd-analyze security's exposure, 0 (best) to 10: the controller's
# hardening must not slip back; the agent starts jobs as their users,
# configures NICs and reads devices, and is root with every capability.
MAX_EXPOSURE = {"lingjund.service": 3.0, "lingjun-agent.service": 9.6}


def _installed(tmp_path: Path, unit: str) -> Path:
    text = (UNITS / unit).read_text()
    for prog in ("lingjund", "lingjun-agent"):
        where = shutil.which(prog, path=os.path.dirname(sys.executable) + os.pathsep
                             + os.environ.get("PATH", ""))
        assert where, f"{prog} is not installed"
        text = text.replace(f"/usr/local/bin/{prog} ", f"{where} ")
    out = tmp_path / unit
    out.write_text(text)
    return out


def test_every_unit_is_checked():
    assert sorted(p.name for p in UNITS.glob("*.service")) == sorted(MAX_EXPOSURE)


@needs_analyze
@pytest.mark.parametrize("unit", sorted(MAX_EXPOSURE))
def test_unit_verifies(unit, tmp_path):
    p = subprocess.run([ANALYZE, "verify", str(_installed(tmp_path, unit))],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stderr.strip(), p.stderr


@needs_analyze
@pytest.mark.parametrize("unit", sorted(MAX_EXPOSURE))
def test_unit_security_exposure(unit, tmp_path):
    p = subprocess.run([ANALYZE, "security", "--offline=true", str(_installed(tmp_path, unit))],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout)
    assert m, p.stdout + p.stderr
    assert float(m.group(1)) <= MAX_EXPOSURE[unit], m.group(0)


@pytest.mark.parametrize("unit", sorted(MAX_EXPOSURE))
def test_unit_asks_for_the_watchdog_and_notify(unit):
    text = (UNITS / unit).read_text()
    assert "Type=notify\n" in text
    assert re.search(r"^WatchdogSec=\d+$", text, re.M), "no WatchdogSec="


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="dropping every capability needs root and setpriv")
def test_controller_serves_without_any_capability(tmp_path):
    """The unit empties CapabilityBoundingSet=: the controller must still start,
    open its state and socket, and serve (setpriv drops the same set here)."""
    assert re.search(r"^CapabilityBoundingSet=$", (UNITS / "lingjund.service").read_text(), re.M)
    key = tmp_path / "cluster.key"
    auth.write_key(key)
    port = _free_port()
    conf = tmp_path / "lingjun.toml"
    conf.write_text(f'[controller]\nlisten = "127.0.0.1:{port}"\nstate_dir = "{tmp_path / "state"}"\n'
                    f'[auth]\nkey_file = "{key}"\nsocket = "{tmp_path / "auth.sock"}"\n')
    log = tmp_path / "lingjund.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["setpriv", "--bounding-set=-all", "--inh-caps=-all",
                                 "--no-new-privs", "--", sys.executable, "-m", "lingjund.daemon",
                                 "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = health_pb2_grpc.HealthStub(ch)

            def serving():
                assert proc.poll() is None, log.read_text()
                try:
                    return stub.Check(health_pb2.HealthCheckRequest(service="lingjun.v1.SlurmApi"),
                                      timeout=1).status == health_pb2.HealthCheckResponse.SERVING
                except grpc.RpcError:
                    return False
            wait_for("the controller serving", serving, 30)
        assert (tmp_path / "auth.sock").exists()
        status = Path(f"/proc/{proc.pid}/status").read_text()
        assert re.search(r"^CapBnd:\s+0+$", status, re.M), status
    finally:
        proc.terminate()
        assert proc.wait(20) == 0, log.read_text()
