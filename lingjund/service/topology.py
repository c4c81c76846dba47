"""The network topology as commands see it (``scontrol show topology``).

The configuration's ``[topology]`` (``lingjun/config.py``) is checked at load
and indexed once (``lingjund/sched/topology.py``); this answers with every
switch (or block) of it, in configuration order, each with its level, link
speed, nodes below it and child switches, as Slurm's topology.conf would.
"""
from __future__ import annotations

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund.sched.topology import Topology


def switches(topology: Topology | None) -> list[api_pb2.TopologySwitch]:
    """Each switch as a message; none for topology/default."""
    if topology is None:
        return []
    return [api_pb2.TopologySwitch(name=s.name, level=s.level, link_speed=s.link_speed,
                                   nodes=slurm.compress_hostlist(list(s.nodes)),
                                   switches=slurm.compress_hostlist(list(s.children)))
            for s in topology.switches]
