"""Live agent connections: which node is on which stream.

The transport registers a connection when an agent's Register has been
accepted and removes it when the stream ends. Service code sends commands
through ``send``; a node without a live stream gets nothing, and the
reconcile at its next registration repairs whatever it missed.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field

from lingjun.v1 import agent_pb2

log = logging.getLogger("lingjund.agents")


@dataclass(eq=False)
class Connection:
    node: str
    outbox: asyncio.Queue = field(default_factory=asyncio.Queue)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    last_heartbeat: float = 0.0
    # the newest heartbeat answered (or the registration) and how long after it
    # the next one is answered (nodes.heartbeat, nodes.echo_after_s)
    echoed_at: float = 0.0
    echo_after_s: float = 0.0
    # ReadOutput requests awaiting their OutputChunk, by read_id (service/joboutput.py);
    # a closed stream answers each with None
    reads: dict = field(default_factory=dict)

    def send(self, msg: agent_pb2.ControllerMessage) -> None:
        self.outbox.put_nowait(msg)

    def close(self) -> None:
        self.closed.set()
        self.outbox.put_nowait(None)
        for fut in self.reads.values():
            if not fut.done():
                fut.set_result(None)
        self.reads.clear()


class AgentRegistry:
    def __init__(self) -> None:
        self._by_node: dict[str, Connection] = {}
        # the pending wake-up of the scheduler for nodes that registered (nodes.register)
        self.capacity_wake: asyncio.TimerHandle | None = None
        # registrations waiting for this turn's batch: (conn, Register, future)
        self.registering: list = []
        # ids of ReadOutput requests (service/joboutput.py), unique across nodes
        self.read_ids = itertools.count(1)

    def attach(self, conn: Connection) -> None:
        old = self._by_node.get(conn.node)
        if old is not None and old is not conn:
            log.info("node=%s: a new stream replaces the old one", conn.node)
            old.close()
        self._by_node[conn.node] = conn

    def detach(self, conn: Connection) -> bool:
        """Forget ``conn``; True when it was the node's current stream."""
        if self._by_node.get(conn.node) is conn:
            del self._by_node[conn.node]
            return True
        return False

    def connected(self, node: str) -> bool:
        return node in self._by_node

    def nodes(self) -> set[str]:
        return set(self._by_node)

    def get(self, node: str) -> Connection | None:
        return self._by_node.get(node)

    def send(self, node: str, msg: agent_pb2.ControllerMessage) -> bool:
        conn = self._by_node.get(node)
        if conn is None:
            log.warning("node=%s: not connected, dropping %s", node, msg.WhichOneof("msg"))
            return False
        conn.send(msg)
        return True

    def close_all(self) -> None:
        for conn in list(self._by_node.values()):
            conn.close()
        self._by_node.clear()
