"""Read the node's network state, diff it with the profile, apply only the difference.

``read_live`` asks the kernel through pyroute2 (links, IPv4 addresses, routes,
rules) and reads the profile interfaces' sysctls; ``plan`` is a pure function
from (profile, live state, which uplink is active) to the list of changes; and
``apply`` sends each change as one netlink request (or one sysctl write). A
second run over the state the first produced plans nothing, so reconciling is
idempotent and cheap to repeat on every event.

What the reconciler owns, and so may change or remove:

- of each profile interface: its MTU, its up state, its IPv4 addresses
  (exactly the profile's, when the profile gives one), its sysctls;
- every route in a table a profile rail names, and every rule that looks
  one of those tables up;
- routes in the main table with protocol ``RTPROT_LINGJUN`` (uplink routes).

Nothing else is read for change: an interface the profile does not name,
the main table's other routes, other rules. So the management NIC the agent
talks to the controller through is never touched.

Worked example, one rail ``rail0`` (table 100, 10.0.0.2/24, gw 10.0.0.1) on a
bare veth: the plan is ``mtu 1500->4200``, ``up``, three sysctls, ``addr add
10.0.0.2/24``, ``route 10.0.0.0/24 table 100``, ``route default table 100``,
``rule 1100 from 10.0.0.2 lookup 100``: 9 changes; the next run: 0.
"""
from __future__ import annotations

import errno
import ipaddress
import logging
from dataclasses import dataclass, field
from pathlib import Path

from lingjun_agent.network import failover
from lingjun.netprofile import LinkFacts, Profile

log = logging.getLogger("lingjun_agent.network")

RTPROT_LINGJUN = 76                   # our routes' protocol ("L"; no name in rt_protos): marks what we own
MAIN_TABLE = 254
SCOPE_UNIVERSE, SCOPE_LINK = 0, 253
RTN_UNICAST = 1
RTNH_F_LINKDOWN = 16
IFF_UP, IFF_LOWER_UP = 0x1, 0x10000
SYSCTL_ROOT = "/proc/sys/net/ipv4/conf"


@dataclass(frozen=True)
class Link:
    index: int
    name: str
    mac: str
    mtu: int
    min_mtu: int
    max_mtu: int
    up: bool                          # administratively (IFF_UP)
    carrier: bool                     # IFF_LOWER_UP

    @property
    def running(self) -> bool:
        return self.up and self.carrier


@dataclass(frozen=True, order=True)
class Route:
    table: int
    dst: str                          # "10.0.0.0/24", "0.0.0.0/0"
    priority: int = 0                 # metric
    oif: int = 0
    gateway: str = ""
    prefsrc: str = ""
    scope: int = SCOPE_UNIVERSE

    def args(self) -> dict:
        a = {"table": self.table, "dst": self.dst, "oif": self.oif, "scope": self.scope,
             "proto": RTPROT_LINGJUN}
        if self.priority:
            a["priority"] = self.priority
        if self.gateway:
            a["gateway"] = self.gateway
        if self.prefsrc:
            a["prefsrc"] = self.prefsrc
        return a

    def ident(self) -> tuple:
        # What the kernel keys a route by (replace overwrites the same key).
        return (self.table, self.dst, self.priority)


@dataclass(frozen=True, order=True)
class Rule:
    priority: int
    src: str                          # "10.0.0.2/32"
    table: int


@dataclass(frozen=True)
class LiveState:
    links: dict[str, Link]
    addrs: dict[int, frozenset[str]]  # ifindex -> {"10.0.0.2/24"}
    routes: frozenset[Route]          # only those the reconciler owns
    rules: frozenset[Rule]            # only those the reconciler owns
    sysctl: dict[tuple[str, str], int]
    linkdown: frozenset[Route] = frozenset()

    def facts(self) -> list[LinkFacts]:
        return [LinkFacts(name=l.name, mac=l.mac, min_mtu=l.min_mtu, max_mtu=l.max_mtu)
                for l in self.links.values()]


@dataclass(frozen=True)
class Change:
    what: str                         # words for logs and the report
    op: str                           # link | addr_add | addr_del | sysctl | route | route_del | rule | rule_del
    args: dict = field(default_factory=dict, compare=False)


# -- reading -----------------------------------------------------------------------
def read_links(ipr) -> dict[str, Link]:
    out = {}
    for m in ipr.link("dump"):
        flags = m["flags"]
        name = m.get("ifname")
        out[name] = Link(index=m["index"], name=name, mac=m.get("address") or "",
                         mtu=m.get("mtu") or 0, min_mtu=m.get("min_mtu") or 0,
                         max_mtu=m.get("max_mtu") or 0, up=bool(flags & IFF_UP),
                         carrier=bool(flags & IFF_LOWER_UP))
    return out


def read_live(ipr, profile: Profile, sysctl_root: str = SYSCTL_ROOT) -> LiveState:
    links = read_links(ipr)
    addrs: dict[int, set[str]] = {}
    for m in ipr.addr("dump", family=2):
        addrs.setdefault(m["index"], set()).add(f"{m.get('address')}/{m['prefixlen']}")
    tables = profile.tables
    routes, down = set(), set()
    for m in ipr.route("dump", family=2):
        table = m.get("table") or m["table"]
        if m["type"] != RTN_UNICAST:
            continue
        if table not in tables and not (table == MAIN_TABLE and m["proto"] == RTPROT_LINGJUN):
            continue
        dst = f"{m.get('dst') or '0.0.0.0'}/{m['dst_len']}"
        r = Route(table=table, dst=dst, priority=m.get("priority") or 0, oif=m.get("oif") or 0,
                  gateway=m.get("gateway") or "", prefsrc=m.get("prefsrc") or "", scope=m["scope"])
        routes.add(r)
        if m["flags"] & RTNH_F_LINKDOWN:
            down.add(r)
    rules = set()
    for m in ipr.rule("dump", family=2):
        table = m.get("table") or m["table"]
        if table in tables:
            rules.add(Rule(priority=m.get("priority") or 0,
                           src=f"{m.get('src') or '0.0.0.0'}/{m['src_len']}", table=table))
    sysctl = {}
    uplinks = profile.uplink_members()
    for i in profile.interfaces:
        for key in i.sysctls(uplink=i.name in uplinks):
            try:
                sysctl[(i.name, key)] = int(Path(sysctl_root, i.name, key).read_text())
            except (OSError, ValueError):
                pass
    return LiveState(links=links, addrs={k: frozenset(v) for k, v in addrs.items()},
                     routes=frozenset(routes), rules=frozenset(rules), sysctl=sysctl,
                     linkdown=frozenset(down))


# -- deciding ------------------------------------------------------------------------
def desired_routes(profile: Profile, links: dict[str, Link],
                   active: dict[str, str]) -> tuple[set[Route], set[Rule]]:
    """What the owned tables and rules should hold, given which uplink is active."""
    routes, rules = set(), set()
    for i in profile.interfaces:
        if not i.table or i.name not in links:
            continue
        idx = links[i.name].index
        ip = ipaddress.ip_interface(i.address)
        routes.add(Route(table=i.table, dst=str(ip.network), oif=idx, prefsrc=str(ip.ip),
                         scope=SCOPE_LINK))
        if i.gateway:
            routes.add(Route(table=i.table, dst="0.0.0.0/0", oif=idx, gateway=i.gateway))
        rules.add(Rule(priority=i.priority, src=f"{ip.ip}/32", table=i.table))
    for u in profile.uplinks:
        if u.primary not in links or u.backup not in links:
            continue
        first = active.get(u.name, failover.PRIMARY)
        pair = [(u.primary, u.primary_gateway), (u.backup, u.backup_gateway)]
        if first == failover.BACKUP:
            pair.reverse()
        for (name, gw), metric in zip(pair, (failover.ACTIVE_METRIC, failover.STANDBY_METRIC)):
            routes.add(Route(table=MAIN_TABLE, dst=str(ipaddress.IPv4Network(u.target)),
                             priority=metric, oif=links[name].index, gateway=gw,
                             prefsrc=u.source, scope=SCOPE_UNIVERSE if gw else SCOPE_LINK))
    return routes, rules


def plan(profile: Profile, live: LiveState, active: dict[str, str] | None = None) -> list[Change]:
    """The changes that make ``live`` match ``profile``; [] when it already does.

    Order matters: links come up before addresses and routes can use them;
    ``ignore_routes_with_linkdown`` is set before uplink routes exist; stale
    addresses go before new ones are added (deleting a primary address also
    deletes its secondaries); routes before the rules that send traffic to them.
    """
    active = active or {}
    changes: list[Change] = []
    links = live.links
    uplinks = profile.uplink_members()
    for i in profile.interfaces:
        link = links[i.name]
        if i.mtu and link.mtu != i.mtu:
            changes.append(Change(f"{i.name}: mtu {link.mtu} -> {i.mtu}", "link",
                                  {"index": link.index, "mtu": i.mtu}))
        if not link.up:
            changes.append(Change(f"{i.name}: set up", "link", {"index": link.index, "state": "up"}))
    for i in profile.interfaces:
        for key, value in sorted(i.sysctls(uplink=i.name in uplinks).items()):
            have = live.sysctl.get((i.name, key))
            if have != value:
                changes.append(Change(f"{i.name}: {key} {have} -> {value}", "sysctl",
                                      {"ifname": i.name, "key": key, "value": value}))
    for i in profile.interfaces:
        if not i.address:
            continue
        idx = links[i.name].index
        have = live.addrs.get(idx, frozenset())
        for extra in sorted(have - {i.address}):
            a, plen = extra.split("/")
            changes.append(Change(f"{i.name}: addr del {extra}", "addr_del",
                                  {"index": idx, "address": a, "prefixlen": int(plen)}))
        if i.address not in have:
            a, plen = i.address.split("/")
            changes.append(Change(f"{i.name}: addr add {i.address}", "addr_add",
                                  {"index": idx, "address": a, "prefixlen": int(plen)}))
    want_routes, want_rules = desired_routes(profile, links, active)
    names = {l.index: l.name for l in links.values()}
    for r in sorted(want_routes - live.routes):
        changes.append(Change(f"route {_route_words(r, names)}: add", "route", r.args()))
    replaced = {r.ident() for r in want_routes - live.routes}
    for r in sorted(live.routes - want_routes):
        if r.ident() in replaced:
            continue
        changes.append(Change(f"route {_route_words(r, names)}: del", "route_del", r.args()))
    for r in sorted(want_rules - live.rules):
        a, plen = r.src.split("/")
        changes.append(Change(f"rule {r.priority}: from {a} lookup {r.table}: add", "rule",
                              {"priority": r.priority, "src": a, "src_len": int(plen),
                               "table": r.table}))
    for r in sorted(live.rules - want_rules):
        a, plen = r.src.split("/")
        changes.append(Change(f"rule {r.priority}: from {a} lookup {r.table}: del", "rule_del",
                              {"priority": r.priority, "src": a, "src_len": int(plen),
                               "table": r.table}))
    return changes


def _route_words(r: Route, names: dict[int, str]) -> str:
    via = f" via {r.gateway}" if r.gateway else ""
    metric = f" metric {r.priority}" if r.priority else ""
    table = "" if r.table == MAIN_TABLE else f" table {r.table}"
    return f"{r.dst}{via} dev {names.get(r.oif, r.oif)}{metric}{table}"


# -- applying --------------------------------------------------------------------------
# Each netlink change: the IPRoute method and its verb.
_NETLINK = {
    "link": ("link", "set"),
    "addr_add": ("addr", "add"), "addr_del": ("addr", "del"),
    "route": ("route", "replace"), "route_del": ("route", "del"),
    "rule": ("rule", "add"), "rule_del": ("rule", "del"),
}

def apply(ipr, changes: list[Change], sysctl_root: str = SYSCTL_ROOT) -> list[str]:
    """Carry out each change (one netlink request or sysctl write each); the
    errors, in words. A failed change does not stop the others: the next
    reconcile retries what is still different."""
    from pyroute2 import NetlinkError
    errors = []
    for c in changes:
        try:
            if c.op == "sysctl":
                Path(sysctl_root, c.args["ifname"], c.args["key"]).write_text(f"{c.args['value']}\n")
            else:
                method, verb = _NETLINK[c.op]
                getattr(ipr, method)(verb, **c.args)
            log.info("network: %s", c.what)
        except NetlinkError as e:
            if c.op.endswith("_del") and e.code in (errno.ESRCH, errno.EADDRNOTAVAIL, errno.ENOENT):
                continue              # already gone: what we wanted
            errors.append(f"{c.what}: {e.args[1] if len(e.args) > 1 else e}")
        except OSError as e:
            errors.append(f"{c.what}: {e.strerror or e}")
    return errors
