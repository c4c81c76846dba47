"""Network operations: record what agents say of their NICs; push changed profiles.

The profiles live in the configuration file. A node gets its own profile in
its registration reply; ``scontrol reconfigure`` (or SIGHUP) re-reads the
whole file (``service/configuration.py``) and sends each connected node whose
profile changed its new one, which its agent applies without restarting.
"""
from __future__ import annotations

import logging

from lingjun import config as configmod
from lingjun.v1 import api_pb2
from lingjund.service import authz, configuration, errors
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.network")


def record_status(ctl: Controller, node: str, report: api_pb2.NetStatusReport) -> None:
    with ctl.store.transaction() as st:
        st.put_node(node, net_status=report)
    if report.state not in ("converged", "none"):
        log.warning("node=%s: network %s: %s", node, report.state, report.message)


def reconfigure(ctl: Controller, req: api_pb2.NetReconfigureRequest) -> api_pb2.NetReconfigureResponse:
    """``scontrol reconfigure``: the whole file re-read (``configuration.reload``)."""
    if not authz.is_operator(req.requester_uid, ctl.config.authz):
        log.warning("Security violation, RECONFIGURE RPC from uid=%d", req.requester_uid)
        raise authz.InvalidUserId()
    try:
        pushed = configuration.reload(ctl)
    except configmod.ConfigError as e:
        raise errors.InvalidRequest(f"reconfigure failed, configuration unchanged: {e}") from None
    return api_pb2.NetReconfigureResponse(pushed=pushed)
