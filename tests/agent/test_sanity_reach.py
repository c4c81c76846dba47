"""The TCP all-to-all check between real listeners on loopback."""
from __future__ import annotations

import asyncio
import socket

from lingjun.v1 import agent_pb2
from lingjun_agent.sanity import reach


def test_each_node_reaches_live_peers_and_names_the_ones_it_cannot():
    async def go():
        a, b = reach.Listener("node1"), reach.Listener("node2")
        pa, pb = await a.start("127.0.0.1"), await b.start("127.0.0.1")
        with socket.socket() as s:          # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        impostor = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        pi = impostor.sockets[0].getsockname()[1]
        peers = [agent_pb2.SanityPeer(node="node1", address="127.0.0.1", port=pa),
                 agent_pb2.SanityPeer(node="node2", address="127.0.0.1", port=pb)]
        ok = await reach.check("node1", peers, 1.0)
        bad = await reach.check("node1", peers + [
            agent_pb2.SanityPeer(node="node3", address="127.0.0.1", port=dead),
            agent_pb2.SanityPeer(node="node4", address="127.0.0.1", port=pi)], 1.0)
        for srv in (a.server, b.server, impostor):
            srv.close()
        return ok, bad, dead, pi
    (ok, ok_missing), (bad, missing), dead, pi = asyncio.run(go())
    assert ok.ok and ok_missing == [] and ok.severity == "warn"
    assert missing == ["node3", "node4"]
    assert bad.reason == (f"cannot reach node3 (127.0.0.1:{dead}): Connection refused; "
                          f"node4 (127.0.0.1:{pi}): answered as ''"), bad.reason
