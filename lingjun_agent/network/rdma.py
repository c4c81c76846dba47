"""RDMA devices as sysfs shows them, and whether they match a profile.

pyroute2 has no RDMA netlink family, so the inventory reads
``/sys/class/infiniband`` (the root is configurable, so tests and the local
cluster use a fake tree): for each device and port its state
(``4: ACTIVE``), physical state (``5: LinkUp``), link layer (``Ethernet`` for
RoCE, ``InfiniBand``), rate, and the netdev it maps to
(``<dev>/device/net/<netdev>``, or ``ports/<p>/gid_attrs/ndevs/0`` for RoCE).

``mismatches`` is the check the node's sanity probe uses: a profile
interface that names an RDMA device must find it present, ACTIVE, and bound
to that interface.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = "/sys/class/infiniband"


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str = ""                   # "ACTIVE", "DOWN", ... (the word after "4: ")
    phys_state: str = ""              # "LinkUp", "Disabled", ...
    link_layer: str = ""              # "Ethernet" (RoCE) or "InfiniBand"
    rate: str = ""                    # "400 Gb/sec (4X NDR)"
    netdev: str = ""                  # the Ethernet/IPoIB interface it maps to


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _word(value: str) -> str:
    # "4: ACTIVE" -> "ACTIVE"
    return value.split(":", 1)[1].strip() if ":" in value else value


def inventory(root: str = DEFAULT_ROOT) -> list[RdmaPort]:
    """Every port of every RDMA device under ``root``; [] when there is none."""
    base = Path(root)
    if not base.is_dir():
        return []
    out = []
    for dev in sorted(base.iterdir()):
        netdevs = sorted(p.name for p in (dev / "device" / "net").glob("*")) \
            if (dev / "device" / "net").is_dir() else []
        ports = dev / "ports"
        if not ports.is_dir():
            continue
        for port in sorted(ports.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            if not port.name.isdigit():
                continue
            netdev = _read(port / "gid_attrs" / "ndevs" / "0") or (netdevs[0] if netdevs else "")
            out.append(RdmaPort(
                device=dev.name, port=int(port.name), state=_word(_read(port / "state")),
                phys_state=_word(_read(port / "phys_state")),
                link_layer=_read(port / "link_layer"), rate=_read(port / "rate"), netdev=netdev))
    return out


def mismatches(profile, ports: list[RdmaPort]) -> list[str]:
    """What is wrong between the profile's RDMA NICs and the devices, in words."""
    out = []
    for iface in profile.interfaces:
        if not iface.rdma_device:
            continue
        mine = [p for p in ports if p.device == iface.rdma_device]
        if not mine:
            out.append(f"{iface.label}: RDMA device {iface.rdma_device} not found")
            continue
        if iface.name and not any(p.netdev == iface.name for p in mine):
            out.append(f"{iface.label}: RDMA device {iface.rdma_device} is bound to "
                       f"{','.join(sorted({p.netdev or '-' for p in mine}))}, not {iface.name}")
        for p in mine:
            if p.state != "ACTIVE":
                out.append(f"{iface.label}: RDMA device {p.device} port {p.port} is "
                           f"{p.state or 'in no state'}, not ACTIVE")
    return out
