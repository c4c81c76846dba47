"""The network topology as commands see it (``scontrol show topology``).

The configuration's ``[topology]`` (``lingjun/config.py``) is checked at load
and indexed once (``lingjun/topology.py``); this answers with every
switch (or block) of it, in configuration order, each with its level, link
speed, nodes below it and child switches, as Slurm's topology.conf would.

What an agent hears over LLDP (``lingjun_agent/lldp.py``, reported at
registration) is compared with the configuration, which wins: a node the
configuration puts under another leaf, or under none, is logged so that a
site can fix topology.conf (or its cabling); ``NodeInfo.leaf_switch`` shows
the leaf the scheduler uses, else the one reported.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjun.topology import Topology
from lingjund.service import devices

if TYPE_CHECKING:
    from lingjund.service.context import Controller

RAIL_VAR = "NCCL_IB_HCA"


def switches(topology: Topology | None) -> list[api_pb2.TopologySwitch]:
    """Each switch as a message; none for topology/default."""
    if topology is None:
        return []
    return [api_pb2.TopologySwitch(name=s.name, level=s.level, link_speed=s.link_speed,
                                   nodes=slurm.compress_hostlist(list(s.nodes)),
                                   switches=slurm.compress_hostlist(list(s.children)))
            for s in topology.switches]


def leaf_of(topology: Topology | None, node: str, reported: str = "") -> str:
    """The node's leaf switch: the configuration's, else what its agent reported."""
    if topology is not None:
        leaf = topology.leaf_of.get(node)
        if leaf is not None:
            return topology.leaves[leaf]
    return reported


def discovered_note(topology: Topology | None, node: str, reported: str) -> str:
    """Words for a disagreement between LLDP and the configuration ("" when none)."""
    if not reported:
        return ""
    configured = leaf_of(topology, node)
    if not configured:
        return (f"LLDP hears leaf switch {reported}; [topology] places the node under no "
                "switch (the configuration wins: add it to a switch's nodes)")
    if configured != reported:
        return (f"LLDP hears leaf switch {reported}; [topology] places the node under "
                f"{configured} (the configuration wins)")
    return ""


def rail_hint(ctl: Controller, node: str, gpu_ids, env) -> dict[str, str]:
    """NCCL_IB_HCA for a job's GPUs on ``node``: the RDMA NICs that share a PCIe
    switch with them (each GPU's rail, as the agent found it or [[nodes.gpu]] nic
    says), in GPU order, "=" first so that mlx5_1 does not match mlx5_10. Nothing
    when none is known or the job set NCCL_IB_HCA itself (``env``)."""
    if not gpu_ids or RAIL_VAR in env:
        return {}
    rec = ctl.store.live.nodes.get(node)
    inv = rec.inventory if rec is not None else None
    cfg = ctl.config.node(node)
    count = max(gpu_ids) + 1
    if inv is not None:
        count = max(count, len(inv.gpu_devices))
    nic = {d.index: d.nic for d in devices.node_devices(cfg, inv, count)}
    rails = list(dict.fromkeys(nic.get(i, "") for i in gpu_ids))
    if not rails or "" in rails:
        return {}
    return {RAIL_VAR: "=" + ",".join(rails)}
