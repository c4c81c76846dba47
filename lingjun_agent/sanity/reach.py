"""TCP all-to-all reachability among a multi-node job's agents (its prolog).

Each agent listens on a port of its own (port 0: the kernel picks one, so the
local cluster's agents, all on 127.0.0.1, never collide) and greets whoever
connects with its node name. Before a multi-node job starts, every node of it
connects to every other one and checks the greeting (a port answered by
another program is not the peer). The node reports the peers it could not
reach; the controller blames a node only when most of its peers could not
reach it (lingjund/service/health.py), so one node with a broken NIC does not
drain the whole gang.
"""
from __future__ import annotations

import asyncio
import os
import time

from lingjun_agent.sanity.checks import WARN, Result

PROBE = "tcp"


class Listener:
    def __init__(self, node: str):
        self.node = node
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, host: str) -> int:
        async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                writer.write(f"lingjun {self.node}\n".encode())
                await writer.drain()
            except OSError:
                pass
            finally:
                writer.close()
        self.server = await asyncio.start_server(greet, host, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port


async def _one(node: str, address: str, port: int, timeout_s: float) -> str:
    """"" when the peer answered as itself, else why not."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(address, port), timeout_s)
    except asyncio.TimeoutError:
        return f"{node} ({address}:{port}): no answer in {timeout_s:g} s"
    except OSError as e:
        return f"{node} ({address}:{port}): {os.strerror(e.errno) if e.errno else e}"
    try:
        line = await asyncio.wait_for(reader.readline(), timeout_s)
    except (asyncio.TimeoutError, OSError):
        line = b""
    finally:
        writer.close()
    if line.decode(errors="replace").strip() != f"lingjun {node}":
        return f"{node} ({address}:{port}): answered as {line.decode(errors='replace').strip()!r}"
    return ""


async def check(me: str, peers, timeout_s: float, phase: str = "prolog") -> tuple[Result, list[str]]:
    """Reach every peer but ourselves at once; the result and the peers not reached."""
    t0, wall = time.monotonic(), time.time()
    others = [p for p in peers if p.node != me]
    why = await asyncio.gather(*(_one(p.node, p.address, p.port, timeout_s) for p in others))
    bad = [(p.node, w) for p, w in zip(others, why) if w]
    # warn: the node that cannot reach is not necessarily the broken one
    res = Result(name=PROBE, severity=WARN, ok=not bad,
                 reason="cannot reach " + "; ".join(w for _, w in bad) if bad else "",
                 duration_s=time.monotonic() - t0, time=wall, phase=phase)
    return res, [n for n, _ in bad]
