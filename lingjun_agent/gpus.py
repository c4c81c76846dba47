"""This host's GPUs as devices: NVML for what each GPU is, sysfs for where it sits.

For every GPU NVML counts: its index, UUID, name and Slurm type word, total
memory, PCI bus id and NVLink peers (NVML); its NUMA node and the RDMA NIC
under the same PCIe switch (sysfs). ``discover`` returns them with whether
NVML answered at all: a host without the driver or the binding has no
devices, and says why once (``Discovery.error``), which is not the same as a
host whose NVML counts zero GPUs.

NVML (``pynvml``, from nvidia-ml-py) is imported by module name when first
needed, so a test puts a small fake module in its place, as the GPU probe's
tests do; the sysfs root is a parameter, so a test hands a fake tree.

Example: on a DGX-like host GPU 0 is "NVIDIA A100-SXM4-80GB" at
``0000:07:00.0``; /sys/bus/pci/devices/0000:07:00.0 resolves to
``.../pci0000:00/0000:00:01.1/0000:05:00.0/0000:06:08.0/0000:07:00.0``,
and /sys/class/infiniband/mlx5_0/device to ``.../0000:05:00.0/0000:06:10.0/
0000:08:00.0``: the deepest place the two paths share is ``0000:05:00.0``,
a PCI bridge (the switch), so mlx5_0 is GPU 0's NIC and ``0000:05:00.0`` its
switch. A NIC that meets the GPU only at the host bridge (``pci0000:00``)
does not share its switch.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from lingjun.v1 import api_pb2

# NVML reports at most this many NVLinks per GPU (NVML_NVLINK_MAX_LINKS, H100: 18).
NVLINK_MAX_LINKS = 18
# Brand words that come before the model in NVML's names.
_BRANDS = frozenset({"nvidia", "tesla", "geforce", "quadro"})
# Family words that name nothing alone: "RTX A6000" is rtx_a6000, not rtx.
_FAMILIES = frozenset({"rtx", "gtx", "titan"})
_PCI_ADDR = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def gpu_type(name: str) -> str:
    """Slurm's type word for an NVML device name: lower case, brand words
    (NVIDIA, Tesla, GeForce, Quadro) dropped, then the first word up to a
    hyphen; a family word (RTX, GTX, Titan) keeps the word after it, joined by
    "_".

    >>> [gpu_type(n) for n in ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3",
    ...                        "Tesla V100-SXM2-16GB", "NVIDIA RTX A6000", "NVIDIA L40S")]
    ['a100', 'h100', 'v100', 'rtx_a6000', 'l40s']
    """
    words = [w for w in re.split(r"[\s]+", name.strip().lower()) if w and w not in _BRANDS]
    if not words:
        return ""
    first = words[0].split("-", 1)[0]
    if first in _FAMILIES and len(words) > 1:
        return f"{first}_{words[1].split('-', 1)[0]}"
    return first


def bus_id(raw: str | bytes) -> str:
    """NVML's "00000000:07:00.0" in sysfs's spelling "0000:07:00.0" (lower case)."""
    if isinstance(raw, bytes):
        raw = raw.decode()
    raw = raw.strip().lower()
    domain, sep, rest = raw.partition(":")
    if not sep:
        return raw
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return raw


@dataclass(frozen=True)
class Discovery:
    """What ``discover`` found: ``nvml`` False means no NVML on this host
    (then ``devices`` is empty and ``error`` says why)."""

    nvml: bool
    devices: tuple[api_pb2.GpuDevice, ...] = ()
    error: str = ""


def discover(nvml_module: str = "pynvml", sysfs_root: str = "/sys") -> Discovery:
    try:
        lib = importlib.import_module(nvml_module)
        lib.nvmlInit()
    except Exception as e:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, DriverNotLoaded
        return Discovery(nvml=False, error=f"{type(e).__name__}: {e}".rstrip(": "))
    try:
        return Discovery(nvml=True, devices=_read(lib, Path(sysfs_root)))
    except Exception as e:  # noqa: BLE001 - a GPU that fell off the bus raises here
        return Discovery(nvml=False, error=f"{type(e).__name__}: {e}")
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:   # noqa: BLE001 - the fake has none; a real one that fails changes nothing
            pass


def _opt(fn, default):
    try:
        return fn()
    except Exception:   # noqa: BLE001 - NVML_ERROR_NOT_SUPPORTED on this model
        return default


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _read(lib, sysfs: Path) -> tuple[api_pb2.GpuDevice, ...]:
    count = lib.nvmlDeviceGetCount()
    handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    buses = [bus_id(_opt(lambda h=h: lib.nvmlDeviceGetPciInfo(h).busId, "")) for h in handles]
    index_of_bus = {b: i for i, b in enumerate(buses) if b}
    nics = _rdma_nics(sysfs)
    out = []
    for i, h in enumerate(handles):
        name = _text(_opt(lambda: lib.nvmlDeviceGetName(h), ""))
        mem = _opt(lambda: lib.nvmlDeviceGetMemoryInfo(h).total, 0)
        peers = _nvlink_peers(lib, handles, i, index_of_bus)
        where = _pci_path(sysfs, buses[i]) if buses[i] else None
        nic, switch = _nearest_nic(where, nics) if where else ("", "")
        out.append(api_pb2.GpuDevice(
            index=i, uuid=_text(_opt(lambda: lib.nvmlDeviceGetUUID(h), "")), name=name,
            type=gpu_type(name), memory_mb=int(mem) // (1 << 20),
            numa_node=_numa_node(sysfs, buses[i]) if buses[i] else -1, pci_bus_id=buses[i],
            nvlink_peers=peers, nic=nic, pcie_switch=switch or _switch_of(where)))
    return tuple(out)


def _nvlink_peers(lib, handles, i: int, index_of_bus: dict[str, int]) -> list[int]:
    """GPUs ``i`` reaches over NVLink: NVML's P2P status (which sees through
    NVSwitch), else its active links' remote PCI devices."""
    peers: set[int] = set()
    nvlink_cap = getattr(lib, "NVML_P2P_CAPS_INDEX_NVLINK", None)
    ok = getattr(lib, "NVML_P2P_STATUS_OK", 0)
    if nvlink_cap is not None:
        for j, other in enumerate(handles):
            if j != i and _opt(lambda: lib.nvmlDeviceGetP2PStatus(handles[i], other, nvlink_cap),
                               None) == ok:
                peers.add(j)
    if not peers:
        enabled = getattr(lib, "NVML_FEATURE_ENABLED", 1)
        for link in range(NVLINK_MAX_LINKS):
            if _opt(lambda: lib.nvmlDeviceGetNvLinkState(handles[i], link), None) != enabled:
                continue
            remote = _opt(lambda: _remote_bus(lib, handles[i], link), "")
            j = index_of_bus.get(bus_id(remote)) if remote else None
            if j is not None and j != i:
                peers.add(j)
    return sorted(peers)


def _remote_bus(lib, h, link: int) -> str:
    fn = getattr(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or lib.nvmlDeviceGetNvLinkRemotePciInfo
    return fn(h, link).busId


# -- sysfs --------------------------------------------------------------------------
def _pci_path(sysfs: Path, bus: str) -> tuple[str, ...] | None:
    """The PCI device's place in the tree: its resolved path's parts from the
    host bridge (``pci0000:00``) down to the device itself."""
    try:
        real = (sysfs / "bus" / "pci" / "devices" / bus).resolve(strict=True)
    except OSError:
        return None
    parts = real.parts
    for k, part in enumerate(parts):
        if part.startswith("pci") and ":" in part:
            return parts[k:]
    return None


def _rdma_nics(sysfs: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(RDMA device name, its PCI path) for each /sys/class/infiniband entry."""
    base = sysfs / "class" / "infiniband"
    out = []
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return out
    for d in entries:
        try:
            real = (d / "device").resolve(strict=True)
        except OSError:
            continue
        parts = real.parts
        for k, part in enumerate(parts):
            if part.startswith("pci") and ":" in part:
                out.append((d.name, parts[k:]))
                break
    return out


def _nearest_nic(gpu: tuple[str, ...], nics) -> tuple[str, str]:
    """The NIC whose path meets the GPU's deepest below the host bridge, and
    the bridge where they meet (the switch); ("", "") when every NIC meets it
    only at the host bridge or at its root port (a different switch, or none)."""
    best = ("", "", 0)
    for name, path in nics:
        common = 0
        for a, b in zip(gpu, path):
            if a != b:
                break
            common += 1
        # parts: host bridge, root port, then the switch's ports: sharing only
        # the root port is a direct link, not a shared switch.
        if common >= 3 and _PCI_ADDR.match(gpu[common - 1]) and common > best[2]:
            best = (name, gpu[common - 1], common)
    return best[0], best[1]


def _switch_of(path: tuple[str, ...] | None) -> str:
    """The switch's upstream port above a GPU (the bridge below its root port),
    "" when it hangs off the root port directly or the path is not known."""
    if not path or len(path) < 4:
        return ""
    return path[2] if _PCI_ADDR.match(path[2]) else ""


def _numa_node(sysfs: Path, bus: str) -> int:
    try:
        return int((sysfs / "bus" / "pci" / "devices" / bus / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return -1
