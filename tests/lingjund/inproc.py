"""An in-process controller on port 0 and signed channels to it: the one server
bootstrap of the tests that talk to ``build_server`` directly."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass
from typing import Iterator

import grpc
from grpc_health.v1 import health_pb2

from lingjun import config
from lingjun.v1 import api_pb2_grpc
from lingjund.service.context import Controller
from lingjund.store.store import Store
from lingjund.transport.server import build_server
from tests.signing import server_auth, signed_channel


@dataclass
class Served:
    stub: api_pb2_grpc.SlurmApiStub
    store: Store
    channel: grpc.Channel
    ctl: Controller
    raw_channel: grpc.Channel
    address: str
    key: object            # the cluster key (lingjun.auth.ClusterKey) its tokens are signed with

    def raw(self, method: str, payload: bytes, timeout: float = 5.0) -> bytes:
        """Call SlurmApi/METHOD with bytes as they are (no serializer), as ``raw_uid``."""
        return self.raw_channel.unary_unary(f"/lingjun.v1.SlurmApi/{method}")(payload, timeout=timeout)


@contextlib.contextmanager
def serve(tmp_path, conf: str, raw_uid: int = 0, admission=None) -> Iterator[Served]:
    """``raw_uid``: who the raw-byte calls come from (the transport takes the
    caller from the token, not from the bytes). ``admission``: the counts of
    each user's calls the server keeps (lingjun/admission.py; one of its own
    when None), for a test that plays the daemon's other doors."""
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    store = Store(str(tmp_path / "db.sqlite"))
    ctl = Controller(config=config.parse(conf), store=store)
    sa = server_auth()

    async def start():
        server, port, hs = build_server(ctl, "127.0.0.1:0", sa, admission=admission)
        await server.start()
        await hs.set("", health_pb2.HealthCheckResponse.SERVING)
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    ch = signed_channel(f"127.0.0.1:{port}", sa.key)   # each message as who it claims to be
    raw = signed_channel(f"127.0.0.1:{port}", sa.key, uid=raw_uid)
    try:
        yield Served(api_pb2_grpc.SlurmApiStub(ch), store, ch, ctl, raw, f"127.0.0.1:{port}", sa.key)
    finally:
        raw.close()
        ch.close()
        asyncio.run_coroutine_threadsafe(server.stop(0), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        store.close()
