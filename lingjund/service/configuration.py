"""Re-reading the configuration file while running: SIGHUP and ``scontrol reconfigure``.

As Slurm's reconfigure does, the controller re-reads its file and goes on
with the new partitions, nodes, limits, timers, preemption, health probes,
accounting and network profiles, without disturbing a job. A file that does
not parse changes nothing: the old configuration stays, and the error is
logged (SIGHUP) or returned (``scontrol reconfigure``).

What cannot change while running keeps its old value until the next restart,
with a warning naming it: where the controller listens and how clients reach
it, its state directory and SQLite durability, and ``[auth]`` (the cluster
key and the credential socket are opened once). Agents hear the new
heartbeat interval and health-probe settings when they next register; a
changed network profile is pushed to its nodes at once.

Every view the scheduler keeps is keyed by the configuration object
(``Views.forget_config``, the node layout, the partition catalog), so the
next pass builds them afresh from the new one.
"""
from __future__ import annotations

import dataclasses
import logging

from lingjun import config as configmod
from lingjun.netprofile import to_spec
from lingjun.v1 import agent_pb2
from lingjund.service.context import Controller

log = logging.getLogger("lingjund.config")

# [controller] keys read once at start
RESTART_ONLY = ("listen", "address", "state_dir", "synchronous", "metrics_address")


def reload(ctl: Controller) -> list[str]:
    """Re-read the file and switch to it; returns the nodes sent a new network
    profile. Raises ``ConfigError`` (nothing changed) when the file is bad."""
    old = ctl.config
    fresh = configmod.load(old.path or None)
    kept = {k: getattr(old.controller, k) for k in RESTART_ONLY
            if getattr(fresh.controller, k) != getattr(old.controller, k)}
    for key, value in kept.items():
        log.warning("reconfigure: [controller] %s changed to %r; it takes effect at the next "
                    "restart (still %r)", key, getattr(fresh.controller, key), value)
    if fresh.auth != old.auth:
        log.warning("reconfigure: [auth] changed; it takes effect at the next restart")
    fresh = dataclasses.replace(fresh, auth=old.auth,
                                controller=dataclasses.replace(fresh.controller, **kept))
    ctl.config = fresh
    log.info("reconfigure: %s re-read: %d nodes, %d partitions", old.path or "configuration",
             len(fresh.nodes), len(fresh.effective_partitions()))
    pushed = _push_profiles(ctl, old.network, fresh.network)
    ctl.wake_scheduler()
    return pushed


def _push_profiles(ctl: Controller, old, fresh) -> list[str]:
    """Send each connected node whose network profile changed its new one (an
    empty profile when it lost it); its agent applies it without restarting."""
    pushed = []
    for node in sorted(ctl.agents.nodes()):
        before, after = old.profile_for(node), fresh.profile_for(node)
        if before == after:
            continue
        spec = to_spec(after) if after is not None else agent_pb2.NetProfileSpec()
        if ctl.agents.send(node, agent_pb2.ControllerMessage(net_profile=spec)):
            pushed.append(node)
            log.info("node=%s: network profile %r pushed", node, after.name if after else "")
    return pushed
