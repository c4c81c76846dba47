"""An in-process controller on port 0 with its channel, for tests that send raw bytes."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass
from typing import Iterator

import grpc

from lingjun import config
from lingjun.v1 import api_pb2_grpc
from lingjund.service.context import Controller
from lingjund.store.store import Store
from lingjund.transport.server import build_server


@dataclass
class Served:
    stub: api_pb2_grpc.SlurmApiStub
    store: Store
    channel: grpc.Channel
    ctl: Controller

    def raw(self, method: str, payload: bytes, timeout: float = 5.0) -> bytes:
        """Call SlurmApi/METHOD with bytes as they are (no serializer)."""
        return self.channel.unary_unary(f"/lingjun.v1.SlurmApi/{method}")(payload, timeout=timeout)


@contextlib.contextmanager
def serve(tmp_path, conf: str) -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    store = Store(str(tmp_path / "db.sqlite"))
    ctl = Controller(config=config.parse(conf), store=store)

    async def start():
        server, port, _ = build_server(ctl, "127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Served(api_pb2_grpc.SlurmApiStub(ch), store, ch, ctl)
    finally:
        ch.close()
        asyncio.run_coroutine_threadsafe(server.stop(0), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        store.close()
