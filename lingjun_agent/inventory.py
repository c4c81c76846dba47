"""What this node has: CPUs, memory, OS, load (psutil); GPUs as devices (NVML
and sysfs: ``lingjun_agent.gpus``)."""
from __future__ import annotations

import os
import platform
import socket

import psutil

from lingjun.v1 import agent_pb2
from lingjun_agent.gpus import Discovery


def collect(cpus: int = 0, memory_mb: int = 0, gpus: int = 0,
            gpu_type: str = "", found: Discovery | None = None,
            leaf_switch: str = "") -> agent_pb2.Inventory:
    """Inventory of this host; non-zero arguments stand in for what it has
    (the local cluster's nodes share one host).

    ``found``: the GPUs NVML answered with (``gpus.discover``); then they are
    the node's count and type, and ``gpus_discovered`` tells the controller
    that the count is the host's own (zero included)."""
    if found is not None and found.nvml:
        gpus = len(found.devices)
        gpu_type = next((d.type for d in found.devices if d.type), gpu_type)
    vm = psutil.virtual_memory()
    logical = psutil.cpu_count(logical=True) or 1
    physical = psutil.cpu_count(logical=False) or logical
    u = platform.uname()
    return agent_pb2.Inventory(
        hostname=socket.gethostname().split(".")[0],
        cpus=cpus or logical,
        real_memory_mb=memory_mb or vm.total // (1024 * 1024),
        free_memory_mb=vm.available // (1024 * 1024),
        gpus=gpus,
        gpu_type=gpu_type,
        sockets=1,
        cores_per_socket=cpus or physical,
        threads_per_core=1 if cpus else max(1, logical // physical),
        arch=u.machine,
        os=f"{u.system} {u.release} {u.version}",
        boot_time=int(psutil.boot_time()),
        cpu_load=os.getloadavg()[0],
        address="127.0.0.1",
        gpu_devices=found.devices if found is not None else (),
        gpus_discovered=bool(found is not None and found.nvml),
        leaf_switch=leaf_switch,
    )


def live_numbers() -> tuple[int, float]:
    return psutil.virtual_memory().available // (1024 * 1024), os.getloadavg()[0]
