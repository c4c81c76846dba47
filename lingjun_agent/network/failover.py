"""Which uplink of a pair carries the traffic: a pure function of link facts and time.

No bonding driver exists on every host (nor in our test kernel), so failover
happens at the routing level. For each pair the reconciler installs two
routes to the target in the main table: the *active* uplink's at metric 10
and the *standby*'s at metric 20, and sets ``ignore_routes_with_linkdown=1``
on both NICs. Two layers then act:

- the kernel: when the active NIC loses carrier its route is marked
  ``linkdown`` and skipped, so lookups fall through to the metric-20 route
  at once, with no agent involved (and still if the agent is dead);
- the agent (this module, driven by netlink events): it makes the backup the
  active uplink, so that when the primary's carrier returns the traffic does
  not jump back immediately. Only after the primary has stayed up for
  ``hold_down_s`` does it become active again (a flapping link never does).

"Up" is carrier; for a pair with a ``probe`` it is carrier and an ICMP echo
through that NIC answered within ``probe_timeout_s`` (probe.py). A path that
dies behind a live link is seen only by the probe, and the agent's route swap
is then what moves the traffic (within the probe timeout plus one interval).

    ACTIVE=primary ──primary down, backup up──► ACTIVE=backup
    ACTIVE=backup  ──primary up for hold_down_s──► ACTIVE=primary
    ACTIVE=backup  ──backup down, primary up──► ACTIVE=primary (at once)
"""
from __future__ import annotations

from dataclasses import dataclass

PRIMARY, BACKUP = "primary", "backup"
ACTIVE_METRIC, STANDBY_METRIC = 10, 20


@dataclass(frozen=True)
class FailoverState:
    active: str = PRIMARY
    primary_up_since: float | None = None   # when the primary's carrier came back


def step(state: FailoverState, primary_up: bool, backup_up: bool, now: float,
         hold_down_s: float) -> tuple[FailoverState, float | None]:
    """The next state, and when to look again (a hold-down's end) or None."""
    since = state.primary_up_since
    if not primary_up:
        since = None
    elif since is None:
        since = now
    active = state.active
    if active == PRIMARY and not primary_up and backup_up:
        active = BACKUP
    elif active == BACKUP and primary_up:
        if not backup_up or now - since >= hold_down_s:
            active = PRIMARY
    wake = None
    if active == BACKUP and primary_up:
        wake = since + hold_down_s
    return FailoverState(active=active, primary_up_since=since), wake
