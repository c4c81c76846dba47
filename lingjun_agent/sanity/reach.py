"""TCP all-to-all reachability among a multi-node job's agents (its prolog).

Each agent listens on a port of its own (port 0: the kernel picks one, so the
local cluster's agents, all on 127.0.0.1, never collide) and greets whoever
connects with its node name. Before a multi-node job starts, every node of it
connects to every other one and checks the greeting (a port answered by
another program is not the peer). The node reports the peers it could not
reach; the controller blames a node only when most of its peers could not
reach it (lingjund/service/health.py), so one node with a broken NIC does not
drain the whole gang.

Bandwidth (a suspect node's extended check, lingjund/service/quarantine.py):
after the greeting the client may ask ``bw N``; the listener then reads N
bytes and sends N back, and the client times both directions. The suspect
runs it with each healthy peer the controller names, all at once, so every
pair's link carries traffic both ways together (a small all-to-all). It is
TCP over whatever carries the agents' addresses; NCCL/InfiniBand bandwidth
(nccl-tests, ib_write_bw) would go here where GPUs and RDMA exist: not on
this host, so not done.
"""
from __future__ import annotations

import asyncio
import os
import time

from lingjun_agent.sanity.checks import DRAIN, WARN, Result

PROBE = "tcp"
BANDWIDTH_PROBE = "tcp_bandwidth"
CHUNK = 1 << 20
MAX_BANDWIDTH_BYTES = 1 << 30          # what a listener agrees to echo


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
                ask = await asyncio.wait_for(reader.readline(), 10.0)
                if ask.startswith(b"bw "):
                    await _echo(reader, writer, min(int(ask[3:]), MAX_BANDWIDTH_BYTES))
            except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError):
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


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    """Take ``n`` bytes, then send as many back."""
    left = n
    while left:
        left -= len(await reader.readexactly(min(CHUNK, left)))
    block = bytes(min(CHUNK, n))
    left = n
    while left:
        writer.write(block[:min(CHUNK, left)])
        left -= min(CHUNK, left)
        await writer.drain()


async def _bandwidth_one(node: str, address: str, port: int, nbytes: int,
                         timeout_s: float) -> tuple[float, str]:
    """Mbit/s both ways with one peer (``nbytes`` each way), or (0, why not)."""
    async def exchange() -> float:
        reader, writer = await asyncio.open_connection(address, port)
        try:
            line = (await reader.readline()).decode(errors="replace").strip()
            if line != f"lingjun {node}":
                raise ConnectionError(f"answered as {line!r}")
            t0 = time.monotonic()
            writer.write(f"bw {nbytes}\n".encode())
            block, left = bytes(min(CHUNK, nbytes)), nbytes

            async def send() -> None:
                nonlocal left
                while left:
                    writer.write(block[:min(CHUNK, left)])
                    left -= min(CHUNK, left)
                    await writer.drain()

            async def receive() -> None:
                got = 0
                while got < nbytes:
                    got += len(await reader.readexactly(min(CHUNK, nbytes - got)))

            await asyncio.gather(send(), receive())
            return 2 * nbytes * 8 / max(time.monotonic() - t0, 1e-6) / 1e6
        finally:
            writer.close()
    try:
        return await asyncio.wait_for(exchange(), timeout_s), ""
    except asyncio.TimeoutError:
        return 0.0, f"{node} ({address}:{port}): not done in {timeout_s:g} s"
    except (OSError, asyncio.IncompleteReadError) as e:
        return 0.0, f"{node} ({address}:{port}): {e}"


async def bandwidth(me: str, peers, nbytes: int, min_mbps: float, timeout_s: float,
                    phase: str = "suspect") -> Result:
    """TCP bandwidth with every peer but ourselves, all at once: a drain probe
    that fails below ``min_mbps`` (Mbit/s, each direction's and the return's
    bytes over the exchange's time) or when a peer cannot be reached."""
    t0, wall = time.monotonic(), time.time()
    others = [p for p in peers if p.node != me]
    got = await asyncio.gather(*(_bandwidth_one(p.node, p.address, p.port, nbytes, timeout_s)
                                 for p in others))
    bad = [why or f"{p.node}: {mbps:.0f} Mbit/s, want {min_mbps:g}"
           for p, (mbps, why) in zip(others, got) if why or mbps < min_mbps]
    if not others:
        bad = ["no healthy peer to test with"]
    return Result(name=BANDWIDTH_PROBE, severity=DRAIN, ok=not bad, reason="; ".join(bad),
                  duration_s=time.monotonic() - t0, time=wall, phase=phase)
