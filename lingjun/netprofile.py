"""A node's network profile: what its NICs should look like, and whether that is sane.

A profile names interfaces (by kernel name or MAC) and says, for each, the
IPv4 address, the MTU, the per-rail routing table that multi-NIC RDMA needs
and the sysctls that go with it; and optional uplink pairs (primary/backup)
through which a target prefix is reached. Example, one RoCE rail and an
uplink pair to the storage network::

    Profile(name="rails", interfaces=(
        Interface(name="rail0", address="10.0.0.2/24", mtu=4200, table=100,
                  gateway="10.0.0.1"),
        Interface(name="upa", address="10.10.0.2/24"),
        Interface(name="upb", address="10.11.0.2/24")),
      uplinks=(Uplink(name="storage", primary="upa", backup="upb",
                      target="192.0.2.0/24", primary_gateway="10.10.0.1",
                      backup_gateway="10.11.0.1"),))

A rail with ``table`` gets, in that table, its subnet route (scope link, source
its address) and a default route through ``gateway``; a rule ``from ADDRESS
lookup TABLE``; and ``arp_ignore=1 arp_announce=2 rp_filter=2`` so the kernel
neither answers ARP for one rail on another nor drops replies that arrive on
the "wrong" rail (the multi-rail source-routing recipe).

Validation comes in two parts, both before anything is changed:
``check_static`` needs only the profile (overlapping subnets, a table or rule
priority used twice, an MTU outside what Linux allows, an uplink naming an
interface the profile lacks); ``check_live`` compares it with the node
(an interface that does not exist, an MTU beyond the link's own maximum).
It lives on the ground floor (``lingjun/``), not in the agent's
``network/``, because three programs use it: the configuration parser checks
each ``[[network.profile]]`` at load (in every program that reads the file),
the controller sends each node its own (``to_spec``), and the agent applies
what it receives (``from_spec``, then ``lingjun_agent/network/``). So it
imports nothing from pyroute2, and protobuf only to put a profile on the wire.
"""
from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, fields

MTU_MIN, MTU_MAX = 68, 65535          # IPv4's minimum; the largest IFLA_MTU any driver takes
RESERVED_TABLES = {0, 253, 254, 255}  # unspec, default, main, local
RAIL_SYSCTLS = {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 2}
# Only per-interface IPv4 keys whose meaning we know may be set from a profile.
ALLOWED_SYSCTLS = {"arp_ignore", "arp_announce", "rp_filter", "accept_local",
                   "ignore_routes_with_linkdown", "arp_filter"}
RULE_PRIORITY_BASE = 1000             # rule priority of a rail = base + table (unless given)


class ProfileError(ValueError):
    """The profile cannot be applied; the message says why. Nothing was changed."""


@dataclass(frozen=True)
class Interface:
    name: str = ""                    # kernel name; or
    mac: str = ""                     # the NIC's MAC address (the name is looked up)
    address: str = ""                 # "10.0.0.2/24"; "" = addresses not managed
    mtu: int = 0                      # 0 = not managed
    table: int = 0                    # per-rail policy routing table; 0 = none
    gateway: str = ""                 # default route in the rail's table
    rule_priority: int = 0            # 0 = RULE_PRIORITY_BASE + table
    sysctl: tuple[tuple[str, int], ...] = ()   # overrides, per interface
    rdma_device: str = ""             # RDMA device expected on this NIC ("mlx5_0")

    @property
    def label(self) -> str:
        return self.name or self.mac

    @property
    def priority(self) -> int:
        return self.rule_priority or RULE_PRIORITY_BASE + self.table

    def sysctls(self, uplink: bool = False) -> dict[str, int]:
        want = dict(RAIL_SYSCTLS) if self.table else {}
        if uplink:
            # Lets the kernel skip a route whose NIC lost carrier at once,
            # before the agent has even seen the event (see failover.py).
            want["ignore_routes_with_linkdown"] = 1
        want.update(dict(self.sysctl))
        return want


@dataclass(frozen=True)
class Uplink:
    name: str
    primary: str                      # interface names (as the profile names them)
    backup: str
    target: str                       # the prefix reached through the pair
    primary_gateway: str = ""         # "" = target is on the link
    backup_gateway: str = ""
    source: str = ""                  # preferred source address of the routes ("" = kernel's choice)
    hold_down_s: float = 5.0          # primary must stay up this long before traffic returns
    probe: str = ""                   # an address answering ICMP echo behind both NICs ("" = carrier only)
    probe_interval_s: float = 0.5
    probe_timeout_s: float = 1.5      # a NIC whose probes went unanswered this long counts as down


@dataclass(frozen=True)
class Profile:
    name: str = ""
    interfaces: tuple[Interface, ...] = ()
    uplinks: tuple[Uplink, ...] = ()

    def interface(self, label: str) -> Interface | None:
        return next((i for i in self.interfaces if label in (i.name, i.mac)), None)

    @property
    def tables(self) -> set[int]:
        return {i.table for i in self.interfaces if i.table}

    def uplink_members(self) -> set[str]:
        return {n for u in self.uplinks for n in (u.primary, u.backup)}


# -- building from plain tables (TOML, JSON) ---------------------------------------
def _build(cls, table: dict, where: str):
    known = {f.name for f in fields(cls)}
    unknown = set(table) - known
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    try:
        return cls(**table)
    except TypeError as e:
        raise ProfileError(f"{where}: {e}") from None


def from_table(table: dict, where: str = "profile") -> Profile:
    """A profile from a TOML/JSON table: {name, interface: [...], uplink: [...]}."""
    table = dict(table)
    ifaces = []
    for i, t in enumerate(table.pop("interface", table.pop("interfaces", []))):
        t = dict(t)
        if "sysctl" in t:
            if not isinstance(t["sysctl"], dict):
                raise ProfileError(f"{where} interface #{i + 1}: sysctl must be a table")
            t["sysctl"] = tuple(sorted(t["sysctl"].items()))
        ifaces.append(_build(Interface, t, f"{where} interface #{i + 1}"))
    uplinks = [_build(Uplink, dict(t), f"{where} uplink #{i + 1}")
               for i, t in enumerate(table.pop("uplink", table.pop("uplinks", [])))]
    name = table.pop("name", "")
    if table:
        raise ProfileError(f"{where}: unknown key(s) {', '.join(sorted(table))}")
    return Profile(name=str(name), interfaces=tuple(ifaces), uplinks=tuple(uplinks))


def to_table(p: Profile) -> dict:
    d = asdict(p)
    out = {"name": d["name"], "interface": [], "uplink": d["uplinks"]}
    for i in d["interfaces"]:
        i["sysctl"] = dict(i["sysctl"])
        out["interface"].append(i)
    return out


def for_node(p: Profile, offset: int) -> Profile:
    """The profile one node of a group gets: every address (and uplink
    source) is the group's base address plus the node's position ``offset``
    in the group's hostlist (node1 keeps the base, node2 gets base+1...)."""
    def bump(addr: str) -> str:
        if not addr:
            return addr
        iface = ipaddress.ip_interface(addr)
        ip = iface.ip + offset
        if ip not in iface.network or ip in (iface.network.network_address,
                                             iface.network.broadcast_address) and iface.network.prefixlen < 31:
            raise ProfileError(f"profile {p.name}: address {addr} plus {offset} for node "
                               f"#{offset + 1} leaves its subnet {iface.network}")
        return f"{ip}/{iface.network.prefixlen}"
    ifaces = tuple(Interface(**{**asdict(i), "sysctl": i.sysctl, "address": bump(i.address)})
                   for i in p.interfaces)
    ups = tuple(Uplink(**{**asdict(u), "source": str(ipaddress.ip_address(u.source) + offset)
                          if u.source else ""}) for u in p.uplinks)
    return Profile(name=p.name, interfaces=ifaces, uplinks=ups)


# -- validation ------------------------------------------------------------------------
def _iface(addr: str, where: str) -> ipaddress.IPv4Interface:
    try:
        iface = ipaddress.ip_interface(addr)
    except ValueError:
        raise ProfileError(f"{where}: {addr!r} is not an address/prefix like 10.0.0.2/24") from None
    if iface.version != 4 or "/" not in addr:
        raise ProfileError(f"{where}: {addr!r} is not an IPv4 address/prefix like 10.0.0.2/24")
    return iface


def _ip(addr: str, where: str) -> ipaddress.IPv4Address:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        raise ProfileError(f"{where}: {addr!r} is not an IPv4 address") from None
    if ip.version != 4:
        raise ProfileError(f"{where}: {addr!r} is not an IPv4 address")
    return ip


def check_static(p: Profile) -> None:
    """Raise ProfileError for what is wrong with the profile itself."""
    where = f"profile {p.name or '(unnamed)'}"
    seen: dict[str, str] = {}
    nets: list[tuple[ipaddress.IPv4Network, str]] = []
    tables: dict[int, str] = {}
    prios: dict[int, str] = {}
    for i in p.interfaces:
        label = i.label
        if not label:
            raise ProfileError(f"{where}: an interface needs a name or a mac")
        w = f"{where}: interface {label}"
        for key in (i.name, i.mac.lower()):
            if key and key in seen:
                raise ProfileError(f"{where}: interface {label} is listed twice")
            if key:
                seen[key] = label
        if i.mtu and not MTU_MIN <= i.mtu <= MTU_MAX:
            raise ProfileError(f"{w}: MTU {i.mtu} is out of range ({MTU_MIN}-{MTU_MAX})")
        if i.address:
            net = _iface(i.address, w).network
            for other, olabel in nets:
                if net.overlaps(other):
                    raise ProfileError(f"{where}: overlapping subnets: {olabel} has {other} "
                                       f"and {label} has {net}")
            nets.append((net, label))
            if i.gateway and _ip(i.gateway, f"{w} gateway") not in net:
                raise ProfileError(f"{w}: gateway {i.gateway} is not in its subnet {net}")
        if i.table:
            if i.table in RESERVED_TABLES or not 0 < i.table < 2 ** 32:
                raise ProfileError(f"{w}: table {i.table} is reserved or out of range "
                                   f"(1-4294967295 except 253, 254, 255)")
            if i.table in tables:
                raise ProfileError(f"{where}: table {i.table} is used by both "
                                   f"{tables[i.table]} and {label}")
            tables[i.table] = label
            if not i.address:
                raise ProfileError(f"{w}: table {i.table} needs an address to route from")
            if i.priority in prios:
                raise ProfileError(f"{where}: rule priority {i.priority} is used by both "
                                   f"{prios[i.priority]} and {label}")
            prios[i.priority] = label
        elif i.gateway:
            raise ProfileError(f"{w}: a gateway needs a table to hold its default route")
        for key, value in i.sysctl:
            if key not in ALLOWED_SYSCTLS:
                raise ProfileError(f"{w}: sysctl {key} is not one of "
                                   f"{', '.join(sorted(ALLOWED_SYSCTLS))}")
            if not isinstance(value, int) or isinstance(value, bool):
                raise ProfileError(f"{w}: sysctl {key} must be an integer")
    names = set()
    for u in p.uplinks:
        w = f"{where}: uplink {u.name}"
        if u.name in names:
            raise ProfileError(f"{where}: uplink {u.name} is listed twice")
        names.add(u.name)
        if u.primary == u.backup:
            raise ProfileError(f"{w}: primary and backup are the same interface {u.primary}")
        for role, label, gw in (("primary", u.primary, u.primary_gateway),
                                ("backup", u.backup, u.backup_gateway)):
            iface = p.interface(label)
            if iface is None or not iface.name:
                raise ProfileError(f"{w}: {role} {label!r} is not an interface of the profile "
                                   f"named by its kernel name")
            if gw:
                ip = _ip(gw, f"{w} {role}_gateway")
                if iface.address and ip not in _iface(iface.address, w).network:
                    raise ProfileError(f"{w}: {role}_gateway {gw} is not in {label}'s subnet")
        try:
            ipaddress.IPv4Network(u.target)
        except ValueError:
            raise ProfileError(f"{w}: target {u.target!r} is not an IPv4 prefix like 192.0.2.0/24") from None
        if u.source:
            _ip(u.source, f"{w} source")
        if u.hold_down_s < 0:
            raise ProfileError(f"{w}: hold_down_s must not be negative")
        if u.probe:
            _ip(u.probe, f"{w} probe")
            if not 0 < u.probe_interval_s < u.probe_timeout_s:
                raise ProfileError(f"{w}: want 0 < probe_interval_s < probe_timeout_s, got "
                                   f"{u.probe_interval_s} and {u.probe_timeout_s}")


@dataclass(frozen=True)
class LinkFacts:
    """What validation needs to know of one live link."""
    name: str
    mac: str
    min_mtu: int = 0                  # 0 = the kernel does not say
    max_mtu: int = 0


def resolve_names(p: Profile, links: list[LinkFacts]) -> Profile:
    """The profile with every interface named by its kernel name (MACs looked
    up); ProfileError for an interface the node does not have."""
    by_name = {l.name: l for l in links}
    by_mac = {l.mac.lower(): l for l in links if l.mac}
    out = []
    for i in p.interfaces:
        link = by_name.get(i.name) if i.name else by_mac.get(i.mac.lower())
        if link is None:
            raise ProfileError(f"profile {p.name or '(unnamed)'}: unknown interface {i.label}: "
                               f"no such link on this node")
        if i.name and i.mac and link.mac.lower() != i.mac.lower():
            raise ProfileError(f"profile {p.name}: interface {i.name} has MAC {link.mac}, "
                               f"not {i.mac}")
        out.append(Interface(**{**asdict(i), "sysctl": i.sysctl, "name": link.name}))
    return Profile(name=p.name, interfaces=tuple(out), uplinks=p.uplinks)


def check_live(p: Profile, links: list[LinkFacts]) -> Profile:
    """Static checks, then the checks against this node's links. Returns the
    profile with names resolved; raises ProfileError before any change."""
    check_static(p)
    resolved = resolve_names(p, links)
    by_name = {l.name: l for l in links}
    for i in resolved.interfaces:
        link = by_name[i.name]
        if i.mtu and ((link.max_mtu and i.mtu > link.max_mtu) or (link.min_mtu and i.mtu < link.min_mtu)):
            raise ProfileError(f"profile {p.name}: interface {i.name}: MTU {i.mtu} is out of range "
                               f"for this link ({link.min_mtu}-{link.max_mtu})")
    return resolved


# -- on the wire (agent.proto NetProfileSpec) -----------------------------------------------
def to_spec(p: Profile):
    from lingjun.v1 import agent_pb2     # here: the configuration parser needs no protobuf
    return agent_pb2.NetProfileSpec(
        name=p.name,
        interfaces=[agent_pb2.NetInterfaceSpec(
            name=i.name, mac=i.mac, address=i.address, mtu=i.mtu, table=i.table, gateway=i.gateway,
            rule_priority=i.rule_priority, sysctl=dict(i.sysctl), rdma_device=i.rdma_device)
            for i in p.interfaces],
        uplinks=[agent_pb2.NetUplinkSpec(
            name=u.name, primary=u.primary, backup=u.backup, target=u.target,
            primary_gateway=u.primary_gateway, backup_gateway=u.backup_gateway, source=u.source,
            hold_down_s=u.hold_down_s, probe=u.probe, probe_interval_s=u.probe_interval_s,
            probe_timeout_s=u.probe_timeout_s) for u in p.uplinks])


def from_spec(spec) -> Profile:
    return Profile(
        name=spec.name,
        interfaces=tuple(Interface(
            name=i.name, mac=i.mac, address=i.address, mtu=i.mtu, table=i.table, gateway=i.gateway,
            rule_priority=i.rule_priority, sysctl=tuple(sorted(i.sysctl.items())),
            rdma_device=i.rdma_device) for i in spec.interfaces),
        uplinks=tuple(Uplink(
            name=u.name, primary=u.primary, backup=u.backup, target=u.target,
            primary_gateway=u.primary_gateway, backup_gateway=u.backup_gateway, source=u.source,
            hold_down_s=u.hold_down_s, probe=u.probe, probe_interval_s=u.probe_interval_s,
            probe_timeout_s=u.probe_timeout_s) for u in spec.uplinks))
