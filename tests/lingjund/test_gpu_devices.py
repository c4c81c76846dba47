"""A node's GPU devices at the service layer: what the agent found, what the
configuration says over it, the drain Slurm does when fewer GPUs are found
than configured, and the topology the core receives (built once per inventory)."""
from __future__ import annotations

import dataclasses

import pytest

from lingjun.v1 import agent_pb2, api_pb2
from lingjund.sched.cycle import schedule
from lingjund.service import devices, nodes, views
from lingjund.service.agents import Connection
from tests.lingjund import handclock
from tests.sched.builders import job

CONF = """
[[nodes]]
names = "node[1-2]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "a100"
[[nodes]]
names = "node3"
cpus = 16
memory_mb = 64000
gpus = 4
[[nodes.gpu]]
index = 0
nvlink = [1]
numa_node = 1
[[nodes.gpu]]
index = 1
nvlink = [0]
nic = ""
[[partitions]]
name = "debug"
nodes = "ALL"
"""
LOW = "gres/gpu count reported lower than configured"


@pytest.fixture
def ctl(tmp_path):
    with handclock.controller(tmp_path, CONF, []) as c:
        yield c


def found_devices(count: int) -> list[api_pb2.GpuDevice]:
    """Two NVLink islands of four (when 8), NUMA 0/1, one NIC per pair."""
    return [api_pb2.GpuDevice(
        index=i, name="NVIDIA A100-SXM4-80GB", type="a100", numa_node=i // 4,
        pci_bus_id=f"0000:{16 + i:02x}:00.0", nic=f"mlx5_{i // 2}",
        nvlink_peers=[j for j in range(4 * (i // 4), min(count, 4 * (i // 4) + 4)) if j != i])
        for i in range(count)]


def register(ctl, node: str, found: int | None, hostname: str = "") -> None:
    inv = agent_pb2.Inventory(hostname=hostname or node, cpus=16, real_memory_mb=64000,
                              gpus=found or 0, gpu_type="a100" if found else "",
                              gpus_discovered=found is not None,
                              gpu_devices=found_devices(found or 0))
    reply, _ = nodes.register(ctl, Connection(node), agent_pb2.Register(node_name=node, inventory=inv))
    assert reply.accepted


def info(ctl, node: str) -> api_pb2.NodeInfo:
    return nodes.node_infos(ctl, api_pb2.GetNodesRequest(names=[node])).nodes[0]


def test_fewer_gpus_found_than_configured_drains_the_node_in_slurms_words(ctl):
    register(ctl, "node1", found=6)
    rec = ctl.store.node("node1")
    assert (rec.drain, rec.reason, rec.reason_user) == (True, f"{LOW} (6 < 8)", "slurm")
    # the configured count stands; the node is not scheduled
    assert info(ctl, "node1").gpus == 8
    snap = views.build_snapshot(ctl, ctl.clock())
    assert [v.schedulable for v in snap.nodes if v.name == "node1"] == [False]
    # all eight found again: back in service
    register(ctl, "node1", found=8)
    rec = ctl.store.node("node1")
    assert (rec.drain, rec.reason) == (False, "")


def test_a_drain_a_person_set_is_not_lifted_by_the_gpu_count(ctl):
    with ctl.store.transaction() as st:
        st.put_node("node1", drain=True, reason="cabling", reason_user="root")
    register(ctl, "node1", found=6)
    register(ctl, "node1", found=8)
    rec = ctl.store.node("node1")
    assert (rec.drain, rec.reason) == (True, "cabling")


def test_an_agent_without_nvml_leaves_the_configured_count(ctl):
    register(ctl, "node2", found=None)
    rec = ctl.store.node("node2")
    assert not rec.drain
    got = info(ctl, "node2")
    assert (got.gpus, [d.index for d in got.gpu_devices]) == (8, list(range(8)))
    assert all(d.numa_node == -1 and not d.nvlink_peers for d in got.gpu_devices)


def test_more_gpus_found_than_configured_uses_the_configured(ctl):
    register(ctl, "node3", found=8)
    got = info(ctl, "node3")
    assert not ctl.store.node("node3").drain
    assert [d.index for d in got.gpu_devices] == [0, 1, 2, 3]


def test_gpu_tables_override_what_the_agent_found(ctl):
    register(ctl, "node3", found=8)
    d = info(ctl, "node3").gpu_devices
    # index 0: configured NVLink peer and NUMA node; its NIC from the agent
    assert (list(d[0].nvlink_peers), d[0].numa_node, d[0].nic) == ([1], 1, "mlx5_0")
    # index 1: the configuration says no NIC
    assert (list(d[1].nvlink_peers), d[1].nic, d[1].numa_node) == ([0], "", 0)
    # index 2: all the agent's
    assert (list(d[2].nvlink_peers), d[2].nic) == ([0, 1, 3], "mlx5_1")
    assert d[2].type == "a100"


def test_the_core_receives_the_layout_built_once_per_inventory(ctl, monkeypatch):
    built = []
    real = devices.topology
    monkeypatch.setattr(devices, "topology", lambda ds: built.append(len(ds)) or real(ds))
    register(ctl, "node1", found=8)
    first = views.build_snapshot(ctl, ctl.clock())
    topo = next(v for v in first.nodes if v.name == "node1").gpu_topology
    assert topo.nvlink[0] == 0b1110 and topo.nvlink[4] == 0b11100000
    assert topo.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topo.rail == (0, 0, 1, 1, 2, 2, 3, 3)
    assert built == [8, 4]          # node1's, and node3's from its [[nodes.gpu]] tables
    # node2 registers too (the node views are rebuilt): node1's layout is not
    register(ctl, "node2", found=8)
    again = views.build_snapshot(ctl, ctl.clock())
    assert next(v for v in again.nodes if v.name == "node1").gpu_topology is topo
    assert built == [8, 4, 8]
    # the same layout on two nodes is one object (and one set of remembered choices)
    assert next(v for v in again.nodes if v.name == "node2").gpu_topology is topo
    register(ctl, "node1", found=8, hostname="renamed")   # a new inventory: built again
    views.build_snapshot(ctl, ctl.clock())
    assert built == [8, 4, 8, 8]


def test_a_two_gpu_job_gets_an_nvlink_pair_beside_one_nic(ctl):
    register(ctl, "node1", found=8)
    snap = views.build_snapshot(ctl, ctl.clock())
    pending = (job(1, gpus=2, part="debug"), job(2, gpus=1, part="debug"),
               job(3, gpus=4, part="debug", req_nodes=("node1",)))
    # (no agent is connected here: the node is taken as up)
    only = tuple(dataclasses.replace(v, schedulable=True) for v in snap.nodes if v.name == "node1")
    plan = schedule(type(snap)(nodes=only, partitions=snap.partitions, pending=pending), 2000.0)
    got = {s.job_id: s.gpu_ids_per_node[0] for s in plan.starts}
    # the pair takes 0-1, the single GPU 2 (the rest of island 0-3), the four island 4-7
    assert got == {1: (0, 1), 2: (2,), 3: (4, 5, 6, 7)}
