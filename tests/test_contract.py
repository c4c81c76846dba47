"""The committed stubs match proto/, and the server speaks health and reflection."""
from __future__ import annotations

import asyncio
import filecmp
import subprocess
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]


def test_committed_stubs_are_generated_from_the_current_protos(tmp_path):
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT / "proto"),
                    f"--python_out={tmp_path}", f"--pyi_out={tmp_path}",
                    f"--grpc_python_out={tmp_path}", *protos], check=True)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py*"))
    assert generated, "protoc produced nothing"
    stale = [str(g) for g in generated
             if not (ROOT / g).exists() or not filecmp.cmp(tmp_path / g, ROOT / g, shallow=False)]
    assert stale == [], f"stale stubs, regenerate with scripts in README: {stale}"


def test_server_answers_health_and_lists_services_by_reflection(tmp_path):
    from lingjun.config import Config
    from lingjund.service.context import Controller
    from lingjund.store.store import Store
    from lingjund.transport.server import build_server
    from tests.signing import server_auth

    async def go():
        ctl = Controller(config=Config(), store=Store(str(tmp_path / "db.sqlite")))
        server, port, hs = build_server(ctl, "127.0.0.1:0", server_auth())
        await server.start()
        await hs.set("", health_pb2.HealthCheckResponse.SERVING)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                h = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
                stub = reflection_pb2_grpc.ServerReflectionStub(ch)
                names = []
                async for r in stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])):
                    names = [s.name for s in r.list_services_response.service]
                return h.status, names
        finally:
            await server.stop(0)

    status, names = asyncio.run(go())
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert {"lingjun.v1.SlurmApi", "lingjun.v1.AgentService", "grpc.health.v1.Health"} <= set(names)
