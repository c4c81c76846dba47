"""Keep the node converged: reconcile on every netlink event that concerns the profile.

One thread per agent. It binds a netlink socket to the link, IPv4 address,
IPv4 route and rule groups and sleeps in ``select`` on it; the only timeouts
are the end of an uplink hold-down (failover.py) and, for an uplink with a
probe, the next ICMP echo (probe.py), so the node's state is never polled.
An event (a link lost carrier, someone deleted an address or changed an
MTU) wakes it; it gathers whatever else arrives within ``debounce_s`` (one
``ip`` command or one failing cable sends several messages), then reads the
live state, steps each uplink pair's failover state, plans and applies the
difference, and reports.

    events ─► drain for debounce_s ─► read_live ─► failover.step ─► plan ─► apply ─► report
       ▲                                                              │
       └──────────── our own changes echo back as events, plan is [] ─┘

Our own changes come back as events too; the reconcile they trigger plans
nothing, so the loop settles after one extra read.
"""
from __future__ import annotations

import logging
import os
import select
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from lingjun_agent.network import failover, rdma, reconcile
from lingjun.netprofile import Profile, ProfileError, check_live, check_static

log = logging.getLogger("lingjun_agent.network")

CONVERGED, DEGRADED, REFUSED, FAILED = "converged", "degraded", "refused", "failed"


@dataclass(frozen=True)
class IfaceReport:
    name: str
    desired: str
    live: str
    ok: bool


@dataclass(frozen=True)
class Report:
    profile: str
    state: str                        # converged | degraded | refused | failed
    message: str = ""
    changes: tuple[str, ...] = ()     # what this run changed
    errors: tuple[str, ...] = ()
    interfaces: tuple[IfaceReport, ...] = ()
    active: tuple[tuple[str, str], ...] = ()   # (uplink, "primary"|"backup")
    rdma: tuple[rdma.RdmaPort, ...] = ()
    at: float = field(default_factory=time.time)


def describe(profile: Profile, live: reconcile.LiveState, active: dict[str, str]) -> tuple[IfaceReport, ...]:
    """Desired vs live, one line each, for the operator (lingjun net show)."""
    out = []
    want_routes, want_rules = reconcile.desired_routes(profile, live.links, active)
    for i in profile.interfaces:
        link = live.links.get(i.name)
        d = [i.address or "-", f"mtu {i.mtu}" if i.mtu else "", f"table {i.table}" if i.table else "",
             "up"]
        if link is None:
            out.append(IfaceReport(i.label, " ".join(x for x in d if x), "absent", False))
            continue
        addrs = sorted(live.addrs.get(link.index, ()))
        have_table = i.table and all(r in live.routes for r in want_routes if r.table == i.table) \
            and all(r in live.rules for r in want_rules if r.table == i.table)
        state = "up" if link.running else ("no-carrier" if link.up else "down")
        l_ = [",".join(addrs) or "-", f"mtu {link.mtu}" if i.mtu else "",
              f"table {i.table}" if have_table else ("table missing" if i.table else ""), state]
        ok = ((not i.address or addrs == [i.address]) and (not i.mtu or link.mtu == i.mtu)
              and (not i.table or bool(have_table)) and link.up)
        out.append(IfaceReport(i.name, " ".join(x for x in d if x), " ".join(x for x in l_ if x), ok))
    return tuple(out)


class NetReconciler:
    """The agent's network owner: validate a profile, converge to it, stay converged.

    Works on the network namespace of the process it runs in (the agent's;
    the tests run it under ``ip netns exec``). ``on_report`` is called from
    the watcher thread after every pass.
    """

    def __init__(self, profile: Profile, *, sysctl_root: str = reconcile.SYSCTL_ROOT,
                 rdma_root: str = rdma.DEFAULT_ROOT, on_report: Callable[[Report], None] | None = None,
                 debounce_s: float = 0.05, clock: Callable[[], float] = time.monotonic):
        self.profile = profile
        self.sysctl_root = sysctl_root
        self.rdma_root = rdma_root
        self.on_report = on_report or (lambda r: None)
        self.debounce_s = debounce_s
        self.clock = clock
        self.failover: dict[str, failover.FailoverState] = {}
        self.last: Report | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._stop = False
        self._prober = None               # probe.Prober while an uplink has a probe
        self._next_probe = 0.0

    # -- one pass ------------------------------------------------------------------
    def reconcile_once(self) -> tuple[Report, float | None]:
        from pyroute2 import IPRoute
        with self._lock, IPRoute() as ipr:
            profile = self.profile
            ports = tuple(rdma.inventory(self.rdma_root))
            live = None
            try:
                live = reconcile.read_live(ipr, profile, self.sysctl_root)
                resolved = check_live(profile, live.facts())
            except ProfileError as e:
                ifaces: tuple[IfaceReport, ...] = ()
                try:
                    check_static(profile)     # words only for a profile that makes sense
                    ifaces = describe(profile, live, {}) if live is not None else ()
                except ProfileError:
                    pass
                rep = Report(profile=profile.name, state=REFUSED, message=str(e), rdma=ports,
                             interfaces=ifaces)
                self.last = rep
                return rep, None
            if resolved != profile:
                live = reconcile.read_live(ipr, resolved, self.sysctl_root)
            active, wake = self._step_failover(resolved, live)
            changes = reconcile.plan(resolved, live, active)
            errors = reconcile.apply(ipr, changes, self.sysctl_root) if changes else []
            if changes:
                live = reconcile.read_live(ipr, resolved, self.sysctl_root)
            ifaces = describe(resolved, live, active)
            problems = list(errors) + rdma.mismatches(resolved, list(ports))
            degraded = [u for u, a in active.items() if a == failover.BACKUP]
            if degraded:
                problems.append("uplink " + ",".join(degraded) + " on backup")
            bad = [i.name for i in ifaces if not i.ok]
            if bad:
                problems.append("not converged: " + ",".join(bad))
            state = DEGRADED if problems else CONVERGED
            rep = Report(profile=resolved.name, state=state, message="; ".join(problems),
                         changes=tuple(c.what for c in changes), errors=tuple(errors),
                         interfaces=ifaces, active=tuple(sorted(active.items())), rdma=ports)
            self.last = rep
            return rep, wake

    def _step_failover(self, profile: Profile, live: reconcile.LiveState) -> tuple[dict[str, str], float | None]:
        now = self.clock()
        active, wake = {}, None
        for u in profile.uplinks:
            p_ok, b_ok = (self._usable(u, name, live, now) for name in (u.primary, u.backup))
            old = self.failover.get(u.name, failover.FailoverState())
            new, w = failover.step(old, p_ok, b_ok, now, u.hold_down_s)
            if new.active != old.active:
                log.warning("network: uplink %s now on its %s (%s)", u.name, new.active,
                            u.backup if new.active == failover.BACKUP else u.primary)
            self.failover[u.name] = new
            active[u.name] = new.active
            if w is not None:
                wake = w if wake is None else min(wake, w)
        return active, wake

    def _usable(self, u, name: str, live: reconcile.LiveState, now: float) -> bool:
        link = live.links.get(name)
        if link is None or not link.running:
            return False
        if u.probe and self._prober is not None:
            return self._prober.healthy(name, now, u.probe_timeout_s)
        return True

    def _probe_health(self, now: float) -> tuple:
        """Each probed NIC's health now; the watcher re-plans when this changes."""
        if self._prober is None:
            return ()
        return tuple((u.name, n, self._prober.healthy(n, now, u.probe_timeout_s))
                     for u in self.profile.uplinks if u.probe for n in (u.primary, u.backup))

    def _probe_tick(self, now: float) -> float | None:
        """Send the probes that are due; when the next are due (None: no probes)."""
        probed = [u for u in self.profile.uplinks if u.probe]
        if not probed:
            if self._prober is not None:
                self._prober.close()
                self._prober = None
            return None
        if self._prober is None:
            from lingjun_agent.network.probe import Prober  # here: only a profile with probed uplinks needs one
            self._prober = Prober(now)
        if now >= self._next_probe:
            for u in probed:
                for name in (u.primary, u.backup):
                    self._prober.send(name, u.probe)
            self._prober.forget({n for u in probed for n in (u.primary, u.backup)})
            self._next_probe = now + min(u.probe_interval_s for u in probed)
        return self._next_probe

    # -- the watcher -----------------------------------------------------------------
    def set_profile(self, profile: Profile) -> None:
        """Take a new profile (pushed by the controller); the watcher converges to it.
        Called from the agent's event loop, so it never waits for a pass to end:
        the next pass reads ``self.profile`` once and uses it throughout."""
        self.profile = profile
        os.write(self._wake_w, b"p")

    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="net-watcher",
                                        daemon=True)
        self._thread.start()
        ready.wait(10)

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop = True
        os.write(self._wake_w, b"s")
        if self._thread is not None:
            self._thread.join(10)
            if not self._thread.is_alive():
                os.close(self._wake_r)
                os.close(self._wake_w)
            self._thread = None

    def _run(self, ready: threading.Event) -> None:
        from pyroute2 import IPRoute
        from pyroute2.netlink.rtnl import (RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE,
                                           RTMGRP_IPV4_RULE, RTMGRP_LINK)
        mon = IPRoute()
        try:
            # Bound before the first reconcile, so no change between the two is missed.
            mon.bind(groups=RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV4_RULE)
            ready.set()
            wake = self._pass()
            health = self._probe_health(self.clock())
            while not self._stop:
                # Sleep until an event, the end of a hold-down, or the next probe.
                next_probe = self._probe_tick(self.clock())
                fds = [mon.fileno(), self._wake_r] + ([self._prober] if self._prober else [])
                due = [t for t in (wake, next_probe) if t is not None]
                timeout = max(0.0, min(due) - self.clock()) if due else None
                readable, _, _ = select.select(fds, [], [], timeout)
                if self._stop:
                    break
                changed = self._drain(mon, readable)
                if changed:
                    # one cable pull or one `ip` command sends a burst: take it all
                    while True:
                        more, _, _ = select.select(fds, [], [], self.debounce_s)
                        if not more:
                            break
                        self._drain(mon, more)
                now = self.clock()
                if self._prober is not None:
                    self._probe_tick(now)
                fresh = self._probe_health(now)
                if changed or fresh != health or (wake is not None and now >= wake):
                    health = fresh
                    wake = self._pass()
        except Exception:
            log.exception("network watcher failed")
        finally:
            mon.close()
            if self._prober is not None:
                self._prober.close()

    def _drain(self, mon, readable) -> bool:
        """Consume what is readable; True when the node or the profile changed."""
        changed = False
        if self._wake_r in readable:
            os.read(self._wake_r, 4096)
            changed = True
        if mon.fileno() in readable:
            for _ in mon.get():
                pass
            changed = True
        if self._prober is not None and self._prober in readable:
            self._prober.receive(self.clock())
        return changed

    def _pass(self) -> float | None:
        try:
            rep, wake = self.reconcile_once()
        except Exception as e:  # noqa: BLE001 - the watcher must outlive a bad pass
            log.exception("network reconcile failed")
            rep, wake = Report(profile=self.profile.name, state=FAILED, message=str(e)), None
        try:
            self.on_report(rep)
        except Exception:  # noqa: BLE001
            log.exception("network report callback failed")
        return wake


def report_msg(rep: Report):
    """The report as api.proto's NetStatusReport (what the controller stores)."""
    from lingjun.v1 import api_pb2  # here: protobuf only for the report sent up
    return api_pb2.NetStatusReport(
        profile=rep.profile, state=rep.state, message=rep.message,
        interfaces=[api_pb2.NetIfaceStatus(name=i.name, desired=i.desired, live=i.live, ok=i.ok)
                    for i in rep.interfaces],
        uplinks=[api_pb2.NetUplinkStatus(name=n, active=a) for n, a in rep.active],
        rdma=[api_pb2.NetRdmaPort(device=p.device, port=p.port, state=p.state,
                                  phys_state=p.phys_state, link_layer=p.link_layer, rate=p.rate,
                                  netdev=p.netdev) for p in rep.rdma],
        changes=list(rep.changes), time=rep.at)
