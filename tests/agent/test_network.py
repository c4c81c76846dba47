"""The network reconciler against the real kernel, in throwaway namespaces (no mocks).

Hosts: ``node`` has two rail veths (rail0, rail1) to ``peer`` and a management
veth (mgmt0) the profile does not name; ``host`` has two uplinks (upa, upb)
to ``up``, which holds the target 192.0.2.1. The reconciler runs inside the
namespaces as ``python -m lingjun_agent.network`` under ``ip netns exec``.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from tests.agent.netns import PY, Netns, Watcher, apply, sh, wait_for, write_profile

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

RAILS = {
    "name": "rails",
    "interface": [
        {"name": "rail0", "address": "10.0.0.2/24", "mtu": 4200, "table": 100, "gateway": "10.0.0.1"},
        {"name": "rail1", "address": "10.1.0.2/24", "mtu": 4200, "table": 101, "gateway": "10.1.0.1"},
    ],
}


@pytest.fixture(scope="module")
def nets():
    n = Netns()
    try:
        node, peer = n.add("node"), n.add("peer")
        for i in (0, 1):
            n.veth(node, f"rail{i}", peer, f"p{i}")
            n.ip(peer, "addr", "add", f"10.{i}.0.1/24", "dev", f"p{i}")
        # The management NIC: configured by hand, not in any profile.
        n.veth(node, "mgmt0", peer, "pm")
        n.ip(node, "addr", "add", "192.168.77.2/24", "dev", "mgmt0")
        n.ip(node, "link", "set", "mgmt0", "up", "mtu", "1400")
        n.ip(node, "route", "add", "198.51.100.0/24", "via", "192.168.77.1", "dev", "mgmt0")
        yield n
    finally:
        n.cleanup()


class Monitor:
    """Counts netlink messages in a namespace between two marker events."""

    def __init__(self, ns: str):
        self.ns = ns
        self.lines: list[str] = []
        self.proc = subprocess.Popen(["ip", "-o", "-n", ns, "monitor", "link", "address", "route", "rule"],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def mark(self, name: str) -> int:
        """Make an event of our own and wait until the monitor has seen it."""
        sh("ip", "-n", self.ns, "link", "add", name, "type", "veth", "peer", "name", name + "p")
        sh("ip", "-n", self.ns, "link", "del", name)

        def seen():
            hits = [i for i, l in enumerate(list(self.lines)) if l.startswith("Deleted") and name in l]
            return hits[-1] + 1 if hits else None
        return wait_for(seen, 10, f"the monitor sees marker {name}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


# -- 5. bad profiles: refused with a clear message, nothing changed --------------------
def _bad(**iface_changes) -> dict:
    prof = json.loads(json.dumps(RAILS))
    for i, ch in iface_changes.items():
        prof["interface"][int(i[1:])].update(ch)
    return prof


BAD = [
    pytest.param(_bad(i1={"name": "rail9"}), "unknown interface rail9", id="a profile naming an interface the node lacks is refused"),
    pytest.param(_bad(i1={"address": "10.0.0.3/23"}), "overlapping subnets", id="overlapping rail subnets are refused"),
    pytest.param(_bad(i1={"table": 100}), "table 100 is used by both rail0 and rail1", id="two rails in one table are refused"),
    pytest.param(_bad(i0={"mtu": 70000}), "MTU 70000 is out of range", id="an MTU above 65535 is refused"),
    pytest.param(_bad(i0={"mtu": 40}), "MTU 40 is out of range", id="an MTU below 68 is refused"),
    pytest.param(_bad(i0={"table": 254}), "table 254 is reserved", id="the main table cannot be a rail's table"),
    pytest.param({**RAILS, "uplink": [{"name": "u", "primary": "rail0", "backup": "nope",
                                       "target": "192.0.2.0/24"}]},
                 "backup 'nope' is not an interface of the profile", id="an uplink naming a stranger is refused"),
]


@pytest.mark.parametrize("profile, message", BAD)
def test_bad_profile_is_refused_before_any_change(nets, tmp_path, profile, message):
    node = nets.name("node")
    before = nets.snapshot(node)
    rc, rep = apply(node, write_profile(tmp_path / "p.json", profile))
    assert (rc, rep["state"]) == (2, "refused"), f"want refused rc 2, got rc {rc}: {rep}"
    assert message in rep["message"], f"want {message!r} in the message, got {rep['message']!r}"
    assert rep["changes"] == [], f"want no change, got {rep['changes']}"
    assert nets.snapshot(node) == before, "the namespace changed although the profile was refused"


CHECK = """
import json, sys
from lingjun_agent import network
from lingjun import netprofile as profile
print(json.dumps(network.check(profile.from_table(json.load(open(sys.argv[1]))))))
"""


# -- 1 + 4. converge from bare; second run changes nothing; mgmt untouched --------------
def test_reconcile_from_bare_then_nothing_and_mgmt_untouched(nets, tmp_path):
    node = nets.name("node")
    prof = write_profile(tmp_path / "rails.json", RAILS)
    mgmt_before = nets.snapshot(node, ("mgmt0", "lo"))
    # The read-only check (for sanity probes) lists what differs and changes nothing.
    before = nets.snapshot(node)
    diff = json.loads(sh("ip", "netns", "exec", node, PY, "-c", CHECK, prof).stdout)
    assert "rail0: mtu 1500 -> 4200" in diff and "rail1: addr add 10.1.0.2/24" in diff, diff
    assert nets.snapshot(node) == before, "check() changed the namespace"
    rc, first = apply(node, prof)
    assert rc == 0 and first["state"] == "converged", first
    assert len(first["changes"]) >= 14, f"want every setting applied, got {first['changes']}"

    for i in (0, 1):
        link = nets.ipj(node, "link", "show", "dev", f"rail{i}")[0]
        assert (link["mtu"], "UP" in link["flags"]) == (4200, True), link
        addrs = [(a["local"], a["prefixlen"]) for a in
                 nets.ipj(node, "-4", "addr", "show", "dev", f"rail{i}")[0]["addr_info"]]
        assert addrs == [(f"10.{i}.0.2", 24)], addrs
        for key, want in (("arp_ignore", 1), ("arp_announce", 2), ("rp_filter", 2)):
            assert nets.sysctl(node, f"rail{i}", key) == want, (f"rail{i}", key)
        table = nets.ip(node, "route", "show", "table", str(100 + i))
        want = {f"default via 10.{i}.0.1 dev rail{i} proto 76",
                f"10.{i}.0.0/24 dev rail{i} proto 76 scope link src 10.{i}.0.2"}
        assert {l.strip() for l in table.splitlines()} == want, f"table {100 + i}: want {want}, got {table}"
    rules = [l.strip() for l in nets.ip(node, "rule", "show").splitlines()]
    assert [l for l in rules if "lookup 10" in l] == ["1100:\tfrom 10.0.0.2 lookup 100",
                                                      "1101:\tfrom 10.1.0.2 lookup 101"], rules
    # Policy routing picks the rail by source address.
    got = nets.ip(node, "route", "get", "203.0.113.9", "from", "10.1.0.2")
    assert "via 10.1.0.1 dev rail1" in got and "table 101" in got, got

    # A second run: no change planned, and the kernel saw no netlink message.
    mon = Monitor(node)
    try:
        start = mon.mark("ljmka")
        rc, second = apply(node, prof)
        end = mon.mark("ljmkb")
    finally:
        mon.stop()
    between = [l for l in mon.lines[start:end] if "ljmk" not in l]
    assert (rc, second["changes"], second["state"]) == (0, [], "converged"), second
    assert between == [], f"want 0 netlink changes on the second run, got {between}"
    # 4. the management NIC, its routes and sysctls are exactly as before
    assert nets.snapshot(node, ("mgmt0", "lo")) == mgmt_before


# -- 2. drift is restored by the watcher ----------------------------------------------------
def test_watcher_restores_drift_within_two_seconds(nets, tmp_path):
    node = nets.name("node")
    w = Watcher(node, write_profile(tmp_path / "rails.json", RAILS), tmp_path / "watch.log")
    try:
        w.wait_report(lambda r: r["state"] == "converged")
        for what, undo, check in (
            ("address deleted", ("addr", "del", "10.0.0.2/24", "dev", "rail0"),
             lambda: "10.0.0.2/24" in nets.ip(node, "addr", "show", "dev", "rail0")
             and "10.0.0.0/24" in nets.ip(node, "route", "show", "table", "100")),
            ("MTU changed", ("link", "set", "rail1", "mtu", "1500"),
             lambda: nets.ipj(node, "link", "show", "dev", "rail1")[0]["mtu"] == 4200),
            ("rule deleted", ("rule", "del", "priority", "1101"),
             lambda: "1101:" in nets.ip(node, "rule", "show")),
        ):
            nets.ip(node, *undo)
            t0 = time.monotonic()
            assert not check(), f"{what}: the change by hand did not take"
            wait_for(check, 2.0, f"{what}: restored by the watcher")
            took = time.monotonic() - t0
            print(f"drift: {what}: restored in {took:.2f}s")
            assert took <= 2.0, f"{what}: want restored within 2 s, took {took:.2f}s"
    finally:
        w.stop()


# -- 3. dual-uplink failover ----------------------------------------------------------------
PROBE = r"""
import json, os, socket, sys, time
dst, stop, every = sys.argv[1], sys.argv[2], 0.05
dur = 60.0                                    # at most; normally until the stop file appears
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(every)
got, seq, t_end = [], 0, time.monotonic() + dur
while time.monotonic() < t_end and not os.path.exists(stop):
    sent = time.monotonic(); s.sendto(str(seq).encode(), (dst, 9999)); seq += 1
    while time.monotonic() < sent + every:
        try:
            s.recv(64); got.append(time.monotonic())
        except (socket.timeout, OSError):
            pass
gaps = [b - a for a, b in zip(got, got[1:])]
print(json.dumps({"sent": seq, "got": len(got), "max_gap": max(gaps or [dur])}))
"""
ECHO = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("192.0.2.1", 9999))
while True:
    d, a = s.recvfrom(64); s.sendto(d, a)
"""

UPLINKS = {
    "name": "uplinks",
    "interface": [{"name": "upa", "address": "10.10.0.2/24"},
                  {"name": "upb", "address": "10.11.0.2/24"}],
    "uplink": [{"name": "storage", "primary": "upa", "backup": "upb", "target": "192.0.2.0/24",
                "primary_gateway": "10.10.0.1", "backup_gateway": "10.11.0.1",
                "source": "10.99.0.2", "hold_down_s": 1.5}],
}


@pytest.fixture
def uplinks():
    n = Netns()
    try:
        host, up = n.add("host"), n.add("up")
        n.veth(host, "upa", up, "pa")
        n.veth(host, "upb", up, "pb")
        n.ip(host, "addr", "add", "10.99.0.2/32", "dev", "lo")       # the host's service address
        n.ip(up, "addr", "add", "10.10.0.1/24", "dev", "pa")
        n.ip(up, "addr", "add", "10.11.0.1/24", "dev", "pb")
        n.ip(up, "addr", "add", "192.0.2.1/32", "dev", "lo")
        # The upstream reaches the host's address over either link, as a router would.
        n.ip(up, "route", "add", "10.99.0.2/32", "via", "10.10.0.2", "dev", "pa", "metric", "10")
        n.ip(up, "route", "add", "10.99.0.2/32", "via", "10.11.0.2", "dev", "pb", "metric", "20")
        yield n
    finally:
        n.cleanup()


def test_uplink_failover_and_return_after_hold_down(uplinks, tmp_path):
    n = uplinks
    host, up = n.name("host"), n.name("up")
    w = Watcher(host, write_profile(tmp_path / "up.json", UPLINKS), tmp_path / "watch.log")
    echo = subprocess.Popen(["ip", "netns", "exec", up, PY, "-c", ECHO])
    probe = None
    stop = tmp_path / "stop-probe"
    try:
        w.wait_report(lambda r: r["state"] == "converged")
        routes = n.ip(host, "route", "show", "192.0.2.0/24")
        assert "via 10.10.0.1 dev upa proto 76 src 10.99.0.2 metric 10" in routes, routes
        assert "via 10.11.0.1 dev upb proto 76 src 10.99.0.2 metric 20" in routes, routes
        probe = subprocess.Popen(["ip", "netns", "exec", host, PY, "-c", PROBE, "192.0.2.1", str(stop)],
                                 stdout=subprocess.PIPE, text=True)
        a0, b0 = n.counters(host, "upa")[0], n.counters(host, "upb")[0]
        wait_for(lambda: n.counters(host, "upa")[0] > a0 + 10, 5, "probes leave by the primary")

        # The primary's far end fails: its carrier drops here.
        n.ip(up, "link", "set", "pa", "down")
        b1 = n.counters(host, "upb")[0]
        wait_for(lambda: n.counters(host, "upb")[0] > b1 + 10, 3, "probes leave by the backup")
        w.wait_report(lambda r: ["storage", "backup"] in r["active"], timeout=5)
        a1 = n.counters(host, "upa")[0]

        # It comes back (the upstream re-learns its route, as a router would).
        n.ip(up, "link", "set", "pa", "up")
        n.ip(up, "route", "replace", "10.99.0.2/32", "via", "10.10.0.2", "dev", "pa", "metric", "10")
        t_up = time.monotonic()
        back = w.wait_report(lambda r: ["storage", "primary"] in r["active"], timeout=8)
        a2 = n.counters(host, "upa")[0]
        wait_for(lambda: n.counters(host, "upa")[0] > a2 + 10, 3, "probes leave by the primary again")
        held = time.monotonic() - t_up
        assert held >= 1.4, f"want traffic back on the primary only after the 1.5 s hold-down, took {held:.2f}s"
        assert a2 - a1 < 10, f"want no probe on the primary during the hold-down, {a2 - a1} went"
        stop.touch()
        out, _ = probe.communicate(timeout=30)
        res = json.loads(out)
        print(f"failover: longest silence {res['max_gap']:.2f}s, {res['got']}/{res['sent']} probes answered,"
              f" back on the primary {held:.2f}s after it returned")
        assert res["max_gap"] <= 2.0, f"want loss <= 2 s during failover, longest silence {res['max_gap']:.2f}s"
        assert res["got"] >= res["sent"] * 0.6, f"want most probes answered, got {res}"
        assert back["state"] == "converged", back
    finally:
        if probe is not None and probe.poll() is None:
            probe.kill()
        echo.kill()
        echo.wait(5)
        w.stop()


def test_uplink_with_a_probe_fails_over_when_the_path_dies_behind_a_live_link(uplinks, tmp_path):
    """Carrier stays up, but nothing sent through the primary arrives: only the
    ICMP probe can tell, and traffic moves all the same."""
    n = uplinks
    host, up = n.name("host"), n.name("up")
    prof = json.loads(json.dumps(UPLINKS))
    prof["uplink"][0].update(probe="192.0.2.1", probe_interval_s=0.2, probe_timeout_s=0.8,
                             hold_down_s=1.0)
    w = Watcher(host, write_profile(tmp_path / "up.json", prof), tmp_path / "watch.log")
    echo = subprocess.Popen(["ip", "netns", "exec", up, PY, "-c", ECHO])
    probe = None
    stop = tmp_path / "stop-probe"
    try:
        w.wait_report(lambda r: r["state"] == "converged")
        probe = subprocess.Popen(["ip", "netns", "exec", host, PY, "-c", PROBE, "192.0.2.1", str(stop)],
                                 stdout=subprocess.PIPE, text=True)
        a0 = n.counters(host, "upa")[0]
        wait_for(lambda: n.counters(host, "upa")[0] > a0 + 10, 5, "probes leave by the primary")

        # The gateway behind upa turns into a black hole: frames go to a MAC nobody has.
        n.ip(host, "neigh", "replace", "10.10.0.1", "lladdr", "02:00:00:00:00:01", "dev", "upa",
             "nud", "permanent")
        b1 = n.counters(host, "upb")[0]
        wait_for(lambda: n.counters(host, "upb")[0] > b1 + 10, 4, "probes leave by the backup")
        rep = w.wait_report(lambda r: ["storage", "backup"] in r["active"], timeout=5)
        assert n.ipj(host, "link", "show", "dev", "upa")[0]["operstate"] == "UP", "the primary's link stayed up"
        assert "uplink storage on backup" in rep["message"], rep

        # The path heals: the next probes through upa are answered; back after the hold-down.
        n.ip(host, "neigh", "del", "10.10.0.1", "dev", "upa")
        w.wait_report(lambda r: ["storage", "primary"] in r["active"], timeout=8)
        a2 = n.counters(host, "upa")[0]
        wait_for(lambda: n.counters(host, "upa")[0] > a2 + 10, 3, "probes leave by the primary again")
        stop.touch()
        res = json.loads(probe.communicate(timeout=30)[0])
        assert res["max_gap"] <= 2.0, f"want loss <= 2 s, longest silence {res['max_gap']:.2f}s"
    finally:
        if probe is not None and probe.poll() is None:
            probe.kill()
        echo.kill()
        echo.wait(5)
        w.stop()
