"""Which switch this node hangs off: its LLDP neighbours, as lldpd reports them.

Source: ``lldpctl -f json`` (lldpd, run on the node; most switch vendors
send LLDP by default). Each interface that hears a switch names it as a
chassis; the leaf switch is the chassis heard on the most interfaces (a
rail-optimised node hears one leaf per rail: the first by name among equals).
A site checks it with the same command on a node: ``lldpctl -f json`` (or
plain ``lldpctl``) lists, per interface, ``chassis`` -> the switch's name.
On an InfiniBand fabric without LLDP the equivalent is the switch's node
GUID from ``ibnetdiscover``; not read here.

The agent reports the name at registration (``Inventory.leaf_switch``); the
controller compares it with ``[topology]`` and the configuration wins
(``lingjund/service/nodes.py`` logs a disagreement). No lldpd: "" and
nothing is reported.

    >>> leaf_switch(parse('{"lldp": {"interface": {"eth0": {"chassis": {"leaf7": {}}}}}}'))
    'leaf7'
"""
from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Neighbour:
    interface: str
    switch: str                       # the chassis name ("" when it sent none)
    port: str = ""


def _items(value) -> list[tuple[str, dict]]:
    """lldpctl's JSON gives one entry as an object and several as a list of objects."""
    out = []
    for part in value if isinstance(value, list) else [value]:
        if isinstance(part, dict):
            out.extend((k, v) for k, v in part.items() if isinstance(v, dict))
    return out


def parse(text: str) -> list[Neighbour]:
    """The neighbours in ``lldpctl -f json`` output; [] for anything unreadable."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    lldp = data.get("lldp") if isinstance(data, dict) else None
    if not isinstance(lldp, dict):
        return []
    out = []
    for ifname, iface in _items(lldp.get("interface", [])):
        chassis = _items(iface.get("chassis", []))
        name = chassis[0][0] if chassis else ""
        if name == "id":              # a chassis that sent no name: {"id": {...}}
            name = ""
        port = iface.get("port", {})
        pid = port.get("id", {}) if isinstance(port, dict) else {}
        out.append(Neighbour(interface=ifname, switch=name,
                             port=str(pid.get("value", "")) if isinstance(pid, dict) else ""))
    return out


def leaf_switch(neighbours: list[Neighbour]) -> str:
    """The switch heard on the most interfaces ("" for none)."""
    counts = Counter(n.switch for n in neighbours if n.switch)
    if not counts:
        return ""
    return min(counts, key=lambda s: (-counts[s], s))


def discover(command: str = "lldpctl", timeout_s: float = 5.0) -> str:
    """Ask lldpd through ``command`` (a path or a name on PATH; "" = off) for the leaf
    switch; "" when there is no lldpctl, it fails, or it hears nothing."""
    if not command:
        return ""
    exe = shutil.which(command)
    if exe is None:
        return ""
    try:
        p = subprocess.run([exe, "-f", "json"], capture_output=True, text=True,
                           timeout=timeout_s, cwd="/", check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if p.returncode != 0:
        return ""
    return leaf_switch(parse(p.stdout))
