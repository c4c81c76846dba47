"""The first node's share of ``--launcher``: the port, the host files, the head.

The controller names the launcher and the first node's address; only this
node can know which port is free on it, so the agent binds port 0 here and
hands the number to the job (MASTER_PORT, RAY_ADDRESS) and back to the
controller (BatchStarted.launcher_port), which starts the workers elsewhere.
Host files are rendered from SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE,
the same facts a user's script could read, and live in the job's directory,
so they go when the agent forgets the job.

A port found free here can still be taken by someone else before the job
binds it; Slurm users' own ``MASTER_PORT=$(random)`` idiom has the same window,
narrowed here to the moment between this bind and the script's start.
"""
from __future__ import annotations

import asyncio
import shutil
import socket
import sys
from pathlib import Path
from typing import Callable

from lingjun import launchers, slurm


def job_python(env: dict[str, str]) -> str:
    """The job's python3 (its PATH's, which has the job's torch), else ours."""
    return shutil.which("python3", path=env.get("PATH") or None) or sys.executable


def free_port() -> int:
    """A TCP port nobody listens on, on any address of this node."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def prepare(name: str, env: dict[str, str], job_dir: Path) -> tuple[int, dict[str, str]]:
    """Add the port and host file variables to ``env``; return the port and
    the host files to write (file name -> contents)."""
    addr = env.get("MASTER_ADDR", "127.0.0.1")
    port = free_port()
    env.update(launchers.port_environment(name, addr, port))
    hosts = slurm.expand_hostlist(env.get("SLURM_JOB_NODELIST", ""))
    counts = slurm.expand_counts(env.get("SLURM_TASKS_PER_NODE", "")) or [1] * len(hosts)
    files = {}
    for var, (fname, text) in launchers.host_files(name, list(zip(hosts, counts))).items():
        env[var] = str(job_dir / fname)
        files[fname] = text
    return port, files


async def wait_listening(addr: str, port: int, timeout: float,
                         alive: Callable[[], bool]) -> bool:
    """True once something accepts connections at addr:port; False if ``alive``
    turns false (the head exited) or ``timeout`` passes first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.05
    while loop.time() < deadline and alive():
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(addr, port), 1.0)
        except (OSError, TimeoutError):
            # Nothing to be told of: a starting server gives no event to wait on.
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)
            continue
        writer.close()
        return True
    return False
