"""The shipped units in systemd/ pass ``systemd-analyze verify``, run as the
user and with exactly the capabilities README's table says, score what it
says under ``systemd-analyze security``, and the controller starts with what
its unit leaves it.

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

REPO = Path(__file__).resolve().parent.parent
UNITS = REPO / "systemd"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed "
                                   "(Debian: apt-get install systemd)")


def _readme_units() -> dict[str, dict[str, str]]:
    """README's unit table: unit -> {user, capabilities, exposure, why}."""
    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        m = re.match(r"\| `([\w-]+\.service)` \| (.*) \|$", line)
        if m:
            user, caps, exposure, why = (c.strip() for c in m.group(2).split(" | "))
            rows[m.group(1)] = {"user": user.strip("`"), "capabilities": caps,
                                "exposure": exposure, "why": why}
    return rows


README_UNITS = _readme_units()


def _settings(unit: str, key: str) -> list[str]:
    """Every value of ``key=`` in the unit's [Service] section (in order)."""
    return re.findall(rf"^{key}=(.*)$", (UNITS / unit).read_text(), re.M)


def _installed(tmp_path: Path, unit: str) -> Path:
    text = (UNITS / unit).read_text()
    for prog in re.findall(r"^ExecStart=/usr/local/bin/(\S+)", text, re.M):
        where = shutil.which(prog, path=os.path.dirname(sys.executable) + os.pathsep
                             + os.environ.get("PATH", ""))
        assert where, f"{prog} is not installed"
        text = text.replace(f"/usr/local/bin/{prog} ", f"{where} ")
    out = tmp_path / unit
    out.write_text(text)
    return out


def test_every_unit_is_in_readmes_table():
    assert sorted(p.name for p in UNITS.glob("*.service")) == sorted(README_UNITS)


@pytest.mark.parametrize("unit", sorted(README_UNITS))
def test_unit_runs_as_readme_says(unit):
    users = _settings(unit, "User")
    got = users[-1] if users else "root"
    assert got == README_UNITS[unit]["user"], f"{unit}: User={got}, README says " \
        f"{README_UNITS[unit]['user']}"


@pytest.mark.parametrize("unit", sorted(README_UNITS))
def test_unit_capabilities_are_exactly_what_readme_says(unit):
    """README's "none", "all" or the list of CAP_ names is the unit's bounding
    set (no CapabilityBoundingSet= line: every capability), and nothing is
    ambient."""
    said = README_UNITS[unit]["capabilities"]
    want = {"none": set(), "all": None}.get(said, set(re.findall(r"`(CAP_\w+)`", said)))
    if want == set():
        assert said == "none", f"{unit}: README's {said!r} names no capability"
    bounding = _settings(unit, "CapabilityBoundingSet")
    got = set(" ".join(bounding).split()) if bounding else None
    assert got == want, f"{unit}: the unit's bounding set {got}, README says {said!r}"
    assert all(not v.strip() for v in _settings(unit, "AmbientCapabilities")), unit


def test_the_controllers_user_is_made_by_the_shipped_sysusers_file():
    user = _settings("lingjund.service", "User")[-1]
    assert re.search(rf"^u {user} ", (UNITS / "lingjun.sysusers").read_text(), re.M)


@needs_analyze
@pytest.mark.parametrize("unit", sorted(README_UNITS))
def test_unit_verifies(unit, tmp_path):
    p = subprocess.run([ANALYZE, "verify", str(_installed(tmp_path, unit))],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stderr.strip(), p.stderr


@needs_analyze
@pytest.mark.parametrize("unit", sorted(README_UNITS))
def test_unit_security_exposure_is_readmes(unit, tmp_path):
    """The figure beside each unit in README is what systemd-analyze says
    (README names the systemd it was measured with; another one may weigh
    the settings differently, hence 0.1 of slack)."""
    p = subprocess.run([ANALYZE, "security", "--offline=true", str(_installed(tmp_path, unit))],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", p.stdout)
    assert m, p.stdout + p.stderr
    figure, word = README_UNITS[unit]["exposure"].split()
    assert abs(float(m.group(1)) - float(figure)) <= 0.1 and m.group(2) == word, \
        f"{unit}: systemd-analyze says {m.group(1)} {m.group(2)}, README says {figure} {word}"


@pytest.mark.parametrize("unit", sorted(README_UNITS))
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
