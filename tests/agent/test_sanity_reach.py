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


def test_bandwidth_with_live_peers_passes_and_a_floor_above_the_link_or_a_dead_peer_fails():
    async def go():
        a, b, c = reach.Listener("node1"), reach.Listener("node2"), reach.Listener("node3")
        ports = [await x.start("127.0.0.1") for x in (a, b, c)]
        peers = [agent_pb2.SanityPeer(node=f"node{i + 1}", address="127.0.0.1", port=p)
                 for i, p in enumerate(ports)]
        ok = await reach.bandwidth("node1", peers, 4 << 20, 10.0, 10.0)
        too_fast = await reach.bandwidth("node1", peers, 1 << 20, 1e9, 10.0)
        c.server.close()
        await c.server.wait_closed()
        dead = await reach.bandwidth("node1", peers, 1 << 20, 10.0, 10.0)
        alone = await reach.bandwidth("node1", peers[:1], 1 << 20, 10.0, 10.0)
        for x in (a, b):
            x.server.close()
        return ok, too_fast, dead, alone, ports
    ok, too_fast, dead, alone, ports = asyncio.run(go())
    assert ok.ok and ok.severity == "drain" and ok.name == "tcp_bandwidth", ok
    assert not too_fast.ok
    assert too_fast.reason.startswith("node2: ") and "Mbit/s, want 1e+09" in too_fast.reason
    assert not dead.ok and f"node3 (127.0.0.1:{ports[2]}): " in dead.reason, dead.reason
    assert "node2" not in dead.reason, "the live peer still passed"
    assert not alone.ok and alone.reason == "no healthy peer to test with"
