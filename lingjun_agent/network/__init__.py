"""The agent's network: declared NIC profiles applied with pyroute2, kept converged.

- ``lingjun/netprofile.py`` (not here): the model and its validation, which the
  configuration and the controller use too;
- ``reconcile``: read the live state, plan the difference, apply it;
- ``failover``: which uplink of a pair is active (pure);
- ``watcher``: the thread that reconciles on netlink events;
- ``rdma``: /sys/class/infiniband inventory and the profile-vs-device check.

For the node's sanity probes: ``rdma.inventory(root)``, ``rdma.mismatches(profile,
ports)`` and ``check(profile)`` (desired vs live, without changing anything).
"""
from __future__ import annotations


def check(profile, sysctl_root: str | None = None) -> list[str]:
    """What differs between ``profile`` and this node, in words ([] = converged).
    Reads only; for probes that must not change the node."""
    from pyroute2 import IPRoute

    from lingjun_agent.network import reconcile  # here: pyroute2 only when a probe checks the network
    from lingjun.netprofile import ProfileError, check_live  # here: with reconcile, only when a probe checks
    root = sysctl_root or reconcile.SYSCTL_ROOT
    with IPRoute() as ipr:
        live = reconcile.read_live(ipr, profile, root)
        try:
            resolved = check_live(profile, live.facts())
        except ProfileError as e:
            return [str(e)]
        live = reconcile.read_live(ipr, resolved, root)
        return [c.what for c in reconcile.plan(resolved, live)]
