"""The simulator's own cost: the agents against a stand-in controller that only listens.

    python -m bench.sim.stub --nodes 10000 --seconds 30 [--agent-procs 2] [--per-channel 50]

A minimal AgentService (challenge, ``auth.verify_proof``, RegisterReply,
then it reads and drops whatever comes) in a child process, and K simulated
agents against it; prints how long they took to register and the CPU of
the agents' processes while they heartbeat. It says whether one process of
simulated agents carries K streams, apart from how the real controller
copes with them.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import psutil

from lingjun import auth
from lingjun.v1 import agent_pb2, agent_pb2_grpc

REPO = Path(__file__).resolve().parents[2]


class StubAgentService(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, key: auth.ClusterKey, interval: float):
        self.key = key
        self.interval = interval
        self.nonces = auth.NonceBook()

    async def Connect(self, request_iterator, context):
        it = request_iterator.__aiter__()
        hello = (await it.__anext__()).auth_hello      # the agent speaks first
        nonce = self.nonces.issue()
        yield agent_pb2.ControllerMessage(auth_challenge=agent_pb2.AuthChallenge(
            nonce=nonce, controller_mac=auth.controller_proof_mac(
                self.key, hello.nonce, nonce, hello.node_name)))
        proof = (await it.__anext__()).auth_proof
        auth.verify_proof(self.key, nonce, self.nonces, proof.node_name, proof.nonce,
                          proof.time_ms, proof.mac, 30.0)
        await it.__anext__()                # Register
        yield agent_pb2.ControllerMessage(register_reply=agent_pb2.RegisterReply(
            accepted=True, heartbeat_interval_s=self.interval))
        async for _ in it:
            pass


async def serve(port: int, key_file: str, interval: float) -> None:
    from lingjund.transport.server import PENDING_CALLS
    server = grpc.aio.server(options=[
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        # as the controller (transport/server.py): a burst of new streams queues
        ("grpc.server.max_pending_requests", PENDING_CALLS),
        ("grpc.server.max_pending_requests_hard_limit", PENDING_CALLS),
        ("grpc.server_max_unrequested_time_in_server", 300)])
    agent_pb2_grpc.add_AgentServiceServicer_to_server(
        StubAgentService(auth.ClusterKey.load(key_file), interval), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sim.stub")
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--agent-procs", type=int, default=1)
    p.add_argument("--per-channel", type=int, default=1)
    p.add_argument("--heartbeat-interval", type=float, default=5.0)
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)      # the child: serve on this port
    p.add_argument("--key-file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.key_file, args.heartbeat_interval))
        return 0
    from bench.sim.controller import free_port
    from bench.sim.fleet import FleetProcesses
    root = Path(tempfile.mkdtemp(prefix="lingjun-sim-stub-"))
    key_file = root / "cluster.key"
    auth.write_key(key_file)
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    stub = subprocess.Popen([sys.executable, "-m", "bench.sim.stub", "--serve", str(port),
                             "--key-file", str(key_file),
                             "--heartbeat-interval", str(args.heartbeat_interval)],
                            cwd=REPO, env=env, start_new_session=True)
    time.sleep(1.5)
    names = [f"node{i}" for i in range(1, args.nodes + 1)]
    fleet = FleetProcesses(f"127.0.0.1:{port}", str(key_file), names, root,
                           procs=args.agent_procs, per_channel=args.per_channel)
    try:
        try:
            reg = fleet.wait_registered(args.nodes, 300)
        except TimeoutError as e:
            print(e)
            reg = float("nan")
        procs = [psutil.Process(pid) for pid in fleet.pids]
        for pr in procs:
            pr.cpu_percent(None)
        stub_ps = psutil.Process(stub.pid)
        stub_ps.cpu_percent(None)
        time.sleep(args.seconds)
        cpu = sum(pr.cpu_percent(None) for pr in procs)
        rss = sum(pr.memory_info().rss for pr in procs) / 2**20
        stats = fleet.stats()
        print(f"nodes {args.nodes}  agent processes {len(procs)}  streams per channel "
              f"{args.per_channel}  heartbeat {args.heartbeat_interval:g} s")
        print(f"registered in {reg:.1f} s; agents CPU {cpu:.0f}% (summed) RSS {rss:.0f} MB "
              f"over {args.seconds:g} s; stand-in controller CPU {stub_ps.cpu_percent(None):.0f}%; "
              f"heartbeats {stats.heartbeats}, failed connects {stats.failed_connects} "
              f"{dict(stats.failures)}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        fleet.stop()
        os.kill(stub.pid, signal.SIGTERM)       # the stand-in we started, by its PID
        stub.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
