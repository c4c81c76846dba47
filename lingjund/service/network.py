"""Network operations: record what agents say of their NICs; push changed profiles.

The profiles live in the configuration file. A node gets its own profile in
its registration reply; ``scontrol reconfigure`` re-reads the file's
``[network]`` table and sends each connected node whose profile changed its
new one (an empty profile when it lost it), which its agent applies without
restarting. Other tables of the file are not re-read here: those changes
still need a controller restart, as they did before.
"""
from __future__ import annotations

import dataclasses
import logging

from lingjun import config as configmod
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import authz, errors
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.network")


def record_status(ctl: Controller, node: str, report: api_pb2.NetStatusReport) -> None:
    with ctl.store.transaction() as st:
        st.put_node(node, net_status=report)
    if report.state not in ("converged", "none"):
        log.warning("node=%s: network %s: %s", node, report.state, report.message)


def reconfigure(ctl: Controller, req: api_pb2.NetReconfigureRequest) -> api_pb2.NetReconfigureResponse:
    if not authz.is_operator(req.requester_uid, ctl.config.authz):
        log.warning("Security violation, RECONFIGURE RPC from uid=%d", req.requester_uid)
        raise authz.InvalidUserId()
    try:
        fresh = configmod.load(ctl.config.path or None)
    except configmod.ConfigError as e:
        raise errors.InvalidRequest(f"reconfigure failed, configuration unchanged: {e}") from None
    old = ctl.config.network
    ctl.config = dataclasses.replace(ctl.config, network=fresh.network)
    from lingjun_agent.network.profile import to_spec
    pushed = []
    for node in sorted(ctl.agents.nodes()):
        before, after = old.profile_for(node), fresh.network.profile_for(node)
        if before == after:
            continue
        spec = to_spec(after) if after is not None else agent_pb2.NetProfileSpec()
        if ctl.agents.send(node, agent_pb2.ControllerMessage(net_profile=spec)):
            pushed.append(node)
            log.info("node=%s: network profile %r pushed", node, after.name if after else "")
    return api_pb2.NetReconfigureResponse(pushed=pushed)
