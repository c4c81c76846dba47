"""Network profiles through a real local cluster: pushed by the controller, reported by agents.

The local cluster's agents run in the root namespace, so the profile names
only an interface that exists inside a namespace this test creates: every
agent must refuse it (unknown interface) and change nothing, and say so in
``lingjun net show`` and ``scontrol show node``. The RDMA inventory comes
from a fake /sys/class/infiniband tree. ``scontrol reconfigure`` pushes a
changed profile to the running agents, which take it without a restart.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.e2e.conftest import Cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

IFACE = f"ljx{os.getpid()}"[:15]          # exists only in this test's namespace
NS = f"ljn{os.getpid()}-e2e"

PROFILE = """
[network]
rdma_sysfs_root = "{root}"

[[network.profile]]
name = "{name}"
nodes = "{nodes}"
[[network.profile.interface]]
name = "{iface}"
address = "10.77.0.11/24"
mtu = 4200
table = 177
gateway = "10.77.0.1"
rdma_device = "mlx5_0"
"""


class NetCluster(Cluster):
    def __init__(self, root, extra):
        super().__init__(root, nodes=3)
        self.extra = extra

    def up(self) -> None:
        self.run(["lingjun", "up", "--nodes", str(self.nodes), "--cpus", str(self.cpus),
                  "--state-dir", str(self.state), "--port", str(self.port), "--kill-wait", "2",
                  "--heartbeat-timeout", str(self.heartbeat_timeout),
                  "--extra-config", str(self.extra)], check=True, timeout=90)


@pytest.fixture(scope="module")
def netcluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("netcluster")
    ib = root / "ib" / "mlx5_0"
    (ib / "ports" / "1").mkdir(parents=True)
    for f, v in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("link_layer", "Ethernet"),
                 ("rate", "200 Gb/sec (4X HDR)")):
        (ib / "ports" / "1" / f).write_text(v + "\n")
    (ib / "device" / "net" / IFACE).mkdir(parents=True)
    extra = root / "network.toml"
    extra.write_text(PROFILE.format(root=root / "ib", name="rails", nodes="node[1-2]", iface=IFACE))
    subprocess.run(["ip", "netns", "add", NS], check=True)
    c = NetCluster(root, extra)
    try:
        subprocess.run(["ip", "-n", NS, "link", "add", IFACE, "type", "veth", "peer", "name", "ljxpeer"],
                       check=True)
        c.up()
        yield c
    finally:
        c.down()
        subprocess.run(["ip", "netns", "del", NS])


def _wait_out(c: Cluster, cmd: list[str], want: list[str], timeout: float = 30) -> str:
    deadline = time.time() + timeout
    out = ""
    while time.time() < deadline:
        out = c.run(cmd).stdout
        if all(w in out for w in want):
            return out
        time.sleep(0.2)
    raise AssertionError(f"{' '.join(cmd)}: want {want} in the output, got:\n{out}")


def test_agents_report_their_profile_and_rdma_and_take_a_pushed_profile(netcluster):
    c = netcluster
    out = _wait_out(c, ["lingjun", "net", "show", "node1"], [
        f"node1: profile rails refused: profile rails: unknown interface {IFACE}: no such link on this node",
        "absent", "rdma mlx5_0 port 1: ACTIVE LinkUp Ethernet 200 Gb/sec (4X HDR) netdev " + IFACE])
    row = next(l for l in out.splitlines() if l.strip().startswith(IFACE))
    assert row.split()[1:] + [] == ["10.77.0.11/24", "mtu", "4200", "table", "177", "up", "absent", "NO"], \
        f"want desired vs live for {IFACE}, got {row!r}"
    assert "node3: profile (none) none" in _wait_out(c, ["lingjun", "net", "show"], ["node3: profile"])
    show = c.run(["scontrol", "show", "node", "node1"], check=True).stdout
    net = next((l.strip() for l in show.splitlines() if l.strip().startswith("Network=")), "")
    assert net.startswith("Network=refused Profile=rails Interfaces=0/1 RDMA=mlx5_0/1:ACTIVE NetReason="), \
        f"want a one-line network status, got {net!r} in\n{show}"

    # A bad profile is refused by reconfigure, and nothing is pushed.
    conf = c.state / "lingjun.toml"
    good = conf.read_text()
    conf.write_text(good.replace("mtu = 4200", "mtu = 99999"))
    p = c.run(["scontrol", "reconfigure"])
    want = "slurm_reconfigure error: reconfigure failed, configuration unchanged: profile rails: " \
           f"interface {IFACE}: MTU 99999 is out of range (68-65535)"
    assert (p.returncode, p.stderr.strip()) == (1, want), f"want rc 1 and {want!r}, got {p.returncode} {p.stderr!r}"
    conf.write_text(good)

    # A changed profile reaches the running agents; none restarts.
    pids = {n: c.pid_of(n) for n in ("node1", "node2", "node3")}
    conf.write_text(conf.read_text().replace('name = "rails"', 'name = "rails2"')
                    .replace('nodes = "node[1-2]"', 'nodes = "node[1-3]"'))
    c.run(["scontrol", "reconfigure"], check=True)
    _wait_out(c, ["lingjun", "net", "show"], [f"node{i}: profile rails2 refused" for i in (1, 2, 3)])
    assert {n: c.pid_of(n) for n in pids} == pids
    for n, pid in pids.items():
        assert os.path.exists(f"/proc/{pid}"), f"agent {n} (pid {pid}) is gone"
