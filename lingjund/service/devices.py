"""A node's GPUs as devices: the configuration's word over the agent's.

The agent reports what NVML and sysfs show (``Inventory.gpu_devices``); the
configuration may declare a node's GPU count, type and, per index,
``[[nodes.gpu]]`` tables. Declared wins: the node has the configured count
(the first that many found devices, or bare indices where none was found),
and each key a ``[[nodes.gpu]]`` table sets replaces the found value.

Where they disagree it is logged; where the agent's NVML counted fewer GPUs
than configured, the node is drained as Slurm drains it: reason
``gres/gpu count reported lower than configured (2 < 4)`` by ``slurm``. A
later registration with the configured count returns it to service (a drain
a person set is never lifted here). An agent without NVML
(``gpus_discovered`` false) says nothing of the count: the configured one
stands, as Slurm's does for a gres.conf without AutoDetect.
"""
from __future__ import annotations

from typing import Sequence

from lingjun.config import NodeConfig
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.sched.gpu_topology import GpuTopology

# Slurm's reason (gres.c) for a node whose GPUs are fewer than configured.
GRES_COUNT_LOW = "gres/gpu count reported lower than configured"
DRAIN_USER = "slurm"        # slurmctld's own drains show as its user


def node_devices(cfg: NodeConfig | None, inv: agent_pb2.Inventory | None,
                 count: int) -> tuple[api_pb2.GpuDevice, ...]:
    """The node's ``count`` GPUs (its capacity), index 0 .. count-1."""
    if count <= 0:
        return ()
    found = {d.index: d for d in inv.gpu_devices} if inv is not None else {}
    declared = {g.index: g for g in cfg.gpu} if cfg is not None else {}
    node_type = cfg.gpu_type if cfg is not None else ""
    out = []
    for i in range(count):
        d = api_pb2.GpuDevice()
        if i in found:
            d.CopyFrom(found[i])
        else:
            d.index, d.numa_node = i, -1
        g = declared.get(i)
        if g is not None:
            if g.numa_node is not None:
                d.numa_node = g.numa_node
            if g.nvlink is not None:
                d.nvlink_peers[:] = list(g.nvlink)
            if g.nic is not None:
                d.nic = g.nic
            if g.memory_mb:
                d.memory_mb = g.memory_mb
            if g.pci_bus_id:
                d.pci_bus_id = g.pci_bus_id
        d.type = (g.type if g is not None and g.type else "") or node_type or d.type
        out.append(d)
    return tuple(out)


def topology(devices: Sequence[api_pb2.GpuDevice]) -> GpuTopology | None:
    """The core's view of the devices (None when they say nothing of their layout).
    A GPU's rail is its NIC, else its PCIe switch."""
    return GpuTopology.build(
        len(devices), [list(d.nvlink_peers) for d in devices], [d.numa_node for d in devices],
        [d.nic or (f"switch {d.pcie_switch}" if d.pcie_switch else "") for d in devices])


def gres_check(cfg: NodeConfig | None, inv: agent_pb2.Inventory) -> tuple[str, list[str]]:
    """(the drain reason, or ""; what else is worth a warning) for a registration."""
    if cfg is None or not inv.gpus_discovered:
        return "", []
    warnings = []
    if cfg.gpus and inv.gpus < cfg.gpus:
        return f"{GRES_COUNT_LOW} ({inv.gpus} < {cfg.gpus})", warnings
    if cfg.gpus and inv.gpus > cfg.gpus:
        warnings.append(f"the agent found {inv.gpus} GPUs, {cfg.gpus} configured: "
                        f"using the configured {cfg.gpus}")
    found_types = sorted({d.type for d in inv.gpu_devices[:cfg.gpus or None] if d.type})
    declared = {g.index: g.type for g in cfg.gpu if g.type}
    for d in inv.gpu_devices:
        want = declared.get(d.index) or cfg.gpu_type
        if want and d.type and d.type != want:
            warnings.append(f"GPU {d.index} is {d.name or d.type!r} ({d.type}), configured "
                            f"{want}: scheduled as {want}")
            break
    if not cfg.gpu_type and not declared and len(found_types) > 1:
        warnings.append(f"GPUs of several types ({', '.join(found_types)}): the node's type is "
                        f"{inv.gpu_type}")
    return "", warnings


def is_gres_drain(reason: str) -> bool:
    return reason.startswith(GRES_COUNT_LOW)
