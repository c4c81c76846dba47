"""A fake sysfs tree of a GPU host: the PCI tree, NUMA nodes, RDMA NICs.

``eight_gpu_host(root)`` builds the host the GPU tests use: 8 GPUs in four
PCIe switches of two GPUs and one ConnectX NIC each (``mlx5_0`` .. ``mlx5_3``),
switches 0-1 on NUMA node 0 and 2-3 on NUMA node 1, as on a DGX-like
board. Paths and links are as the kernel makes them: ``bus/pci/devices/<bus>``
and ``class/infiniband/<dev>/device`` are relative symlinks into
``devices/pci0000:00/<root port>/<switch up>/<switch down>/<endpoint>``.
``EIGHT_GPUS`` is the matching fake NVML description: NVLink islands
0-3 and 4-7, fully connected inside each.
"""
from __future__ import annotations

import os
from pathlib import Path


def gpu_bus(i: int) -> str:
    """GPU i's bus id in sysfs's spelling."""
    pair, k = divmod(i, 2)
    return f"0000:{0x10 * (pair + 1) + 2 + k:02x}:00.0"


def nic_bus(pair: int) -> str:
    return f"0000:{0x10 * (pair + 1) + 4:02x}:00.0"


def _endpoint(root: Path, pair: int, down: int, bus: str, numa: int) -> Path:
    base = 0x10 * (pair + 1)
    path = (root / "devices" / "pci0000:00" / f"0000:00:{pair + 1:02x}.0"
            / f"0000:{base:02x}:00.0" / f"0000:{base + 1:02x}:{down:02x}.0" / bus)
    path.mkdir(parents=True)
    (path / "numa_node").write_text(f"{numa}\n")
    link = root / "bus" / "pci" / "devices" / bus
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(path, link.parent), link)
    return path


def eight_gpu_host(root: Path, nics: bool = True) -> Path:
    for pair in range(4):
        numa = 0 if pair < 2 else 1
        for k in range(2):
            _endpoint(root, pair, k, gpu_bus(2 * pair + k), numa)
        if nics:
            nic = _endpoint(root, pair, 2, nic_bus(pair), numa)
            ib = root / "class" / "infiniband" / f"mlx5_{pair}"
            ib.mkdir(parents=True)
            os.symlink(os.path.relpath(nic, ib), ib / "device")
    return root


def nvml_bus(i: int) -> str:
    """GPU i's bus id as NVML spells it (8-digit domain, upper case)."""
    return "0000" + gpu_bus(i).upper()


EIGHT_GPUS = [dict(name="NVIDIA A100-SXM4-80GB", uuid=f"GPU-{i:08x}-aaaa-bbbb-cccc-000000000000",
                   memory_mb=81920, bus=nvml_bus(i),
                   nvlink=[j for j in range(4 * (i // 4), 4 * (i // 4) + 4) if j != i])
              for i in range(8)]
