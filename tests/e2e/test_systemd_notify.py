"""lingjund under a supervisor: sd_notify states, the watchdog, and health per service.

A real controller is started as systemd would start it: ``NOTIFY_SOCKET``
names a unix datagram socket the test holds, and ``WATCHDOG_USEC`` asks for
pings. It must say READY=1 once serving, WATCHDOG=1 steadily, RELOADING=1
then READY=1 around a SIGHUP, and STOPPING=1 on SIGTERM; its health service
answers SERVING for the API, the agent service and "" (overall), and a
watcher hears NOT_SERVING when it stops, before the listener closes.

The watchdog's pings come from the event loop: the last test blocks a loop
running the watchdog task and sees the pings stop for as long as it is
blocked (a wedged daemon must be caught, not covered by a thread).
"""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lingjun import auth, sdnotify
from tests.e2e.conftest import _free_port, wait_for

WATCHDOG_USEC = 600_000          # pings every 0.2 s


class NotifySocket:
    """A bound unix datagram socket collecting what the daemon says."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.got: list[tuple[float, str]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            self.got.append((time.monotonic(), data.decode()))

    def states(self) -> list[str]:
        return [s for _, s in self.got]

    def count(self, state: str) -> int:
        return sum(1 for s in self.states() if s == state)

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def controller(tmp_path):
    key = tmp_path / "cluster.key"
    auth.write_key(key)
    port = _free_port()
    conf = tmp_path / "lingjun.toml"
    conf.write_text(f'[controller]\nlisten = "127.0.0.1:{port}"\nstate_dir = "{tmp_path / "state"}"\n'
                    f'[auth]\nkey_file = "{key}"\nsocket = "{tmp_path / "auth.sock"}"\n')
    notes = NotifySocket(tmp_path / "notify.sock")
    env = dict(os.environ, NOTIFY_SOCKET=str(notes.path), WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)
    log = open(tmp_path / "lingjund.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "lingjund.daemon", "-c", str(conf)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for("READY=1", lambda: "READY=1" in notes.states() or proc.poll() is not None, 30)
        assert proc.poll() is None, (tmp_path / "lingjund.log").read_text()
        yield proc, notes, f"127.0.0.1:{port}", tmp_path / "lingjund.log"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        notes.close()


def test_ready_then_watchdog_pings_from_a_running_controller(controller):
    proc, notes, _, _ = controller
    first = notes.states().index("READY=1")
    start = notes.count("WATCHDOG=1")
    time.sleep(1.3)
    pings = notes.count("WATCHDOG=1") - start
    # 0.2 s apart: about 6 in 1.3 s; none lost to a slow start or a busy CI
    assert 4 <= pings <= 8, notes.states()
    assert all(s in ("READY=1", "WATCHDOG=1") for s in notes.states()[first:]), notes.states()


def test_health_per_service_and_not_serving_while_stopping(controller):
    proc, notes, address, log = controller
    ch = grpc.insecure_channel(address)
    stub = health_pb2_grpc.HealthStub(ch)
    for service in ("", "lingjun.v1.SlurmApi", "lingjun.v1.AgentService"):
        got = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
        assert got == health_pb2.HealthCheckResponse.SERVING, (service, got)
    with pytest.raises(grpc.RpcError) as e:
        stub.Check(health_pb2.HealthCheckRequest(service="lingjun.v1.NoSuchService"), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND

    watches = {s: stub.Watch(health_pb2.HealthCheckRequest(service=s), timeout=30)
               for s in ("", "lingjun.v1.SlurmApi", "lingjun.v1.AgentService")}
    for s, w in watches.items():
        assert next(w).status == health_pb2.HealthCheckResponse.SERVING, s
    proc.send_signal(signal.SIGTERM)
    for s, w in watches.items():
        assert next(w).status == health_pb2.HealthCheckResponse.NOT_SERVING, s
    assert proc.wait(20) == 0, log.read_text()
    states = notes.states()
    assert "STOPPING=1" in states
    after = states[states.index("STOPPING=1") + 1:]
    assert "READY=1" not in after, states
    ch.close()


def test_sighup_says_reloading_then_ready(controller):
    proc, notes, _, log = controller
    proc.send_signal(signal.SIGHUP)
    wait_for("READY=1 after the reload", lambda: notes.count("READY=1") == 2, 10)
    reloads = [s for s in notes.states() if s.startswith("RELOADING=1")]
    assert len(reloads) == 1, notes.states()
    lines = reloads[0].split("\n")
    assert lines[0] == "RELOADING=1" and lines[1].startswith("MONOTONIC_USEC="), lines
    usec = int(lines[1].split("=", 1)[1])
    now_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert 0 < now_usec - usec < 10_000_000, (usec, now_usec)
    ordered = [s.split("\n")[0] for s in notes.states() if s != "WATCHDOG=1"]
    assert ordered == ["READY=1", "RELOADING=1", "READY=1"], ordered
    assert proc.poll() is None                    # SIGHUP reloads, never kills


def test_a_wedged_event_loop_stops_the_pings(tmp_path, monkeypatch):
    notes = NotifySocket(tmp_path / "notify.sock")
    monkeypatch.setenv("NOTIFY_SOCKET", str(notes.path))
    monkeypatch.setenv("WATCHDOG_USEC", "300000")          # pings every 0.1 s
    monkeypatch.delenv("WATCHDOG_PID", raising=False)

    async def main() -> tuple[float, float]:
        task = sdnotify.start_watchdog()
        assert task is not None
        await asyncio.sleep(0.5)
        wedged_at = time.monotonic()
        time.sleep(1.0)                                     # the loop is stuck
        freed_at = time.monotonic()
        await asyncio.sleep(0.5)
        task.cancel()
        return wedged_at, freed_at

    try:
        wedged_at, freed_at = asyncio.run(main())
        time.sleep(0.2)
        pings = [t for t, s in notes.got if s == "WATCHDOG=1"]
    finally:
        notes.close()
    during = [t for t in pings if wedged_at + 0.05 < t < freed_at - 0.05]
    assert during == [], f"pings while the loop was wedged: {len(during)}"
    assert sum(1 for t in pings if t < wedged_at) >= 3, pings
    assert sum(1 for t in pings if t > freed_at) >= 3, pings


def test_no_watchdog_unless_asked_for_this_process(monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "600000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))   # meant for another process
    assert sdnotify.watchdog_interval_s() is None
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert sdnotify.watchdog_interval_s() == pytest.approx(0.2)
    monkeypatch.delenv("WATCHDOG_USEC")
    assert sdnotify.watchdog_interval_s() is None
