"""A real ``lingjund`` for the simulator: its configuration, its process, its figures.

``SimController(root, nodes=K)`` writes ``root/lingjun.toml`` (K nodes
``node[1-K]`` with ``gpus`` GPUs each, one default partition holding all,
the cluster key and credential socket as ``lingjun up`` makes them),
starts ``lingjund`` from it (through ``bench/sim/probe.py`` unless
``probe=False``) on a free loopback port, and stops exactly that process by
its PID. ``env`` is what the commands (``squeue``, ``sbatch``...) need to
find it; ``api()`` is a client of its API.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psutil

from lingjun import auth
from lingjun.client import Api, ControllerUnreachable
from lingjun.v1 import api_pb2

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ClusterShape:
    nodes: int
    cpus: int = 64
    memory_mb: int = 512_000
    gpus: int = 8
    heartbeat_interval_s: float = 2.0       # what `lingjun up` configures
    heartbeat_timeout_s: float = 30.0
    scheduler_interval_s: float = 2.0
    kill_wait_s: float = 2.0
    restart_backoff_s: float = 10.0
    max_array_size: int = 10001
    controller: tuple[tuple[str, str], ...] = ()     # more [controller] keys: (key, TOML value)
    extra: str = ""                         # more TOML tables, appended


def config_text(shape: ClusterShape, port: int, root: Path) -> str:
    sock = str(root / "auth.sock")
    if len(sock.encode()) >= 100:
        sock = f"/tmp/lingjun-sim-{port}.sock"
    return f"""# written by bench/sim: a simulated cluster of {shape.nodes} nodes
cluster_name = "sim"

[controller]
listen = "127.0.0.1:{port}"
state_dir = "{root / 'controller'}"
heartbeat_interval_s = {shape.heartbeat_interval_s:g}
heartbeat_timeout_s = {shape.heartbeat_timeout_s:g}
kill_wait_s = {shape.kill_wait_s:g}
scheduler_interval_s = {shape.scheduler_interval_s:g}
max_array_size = {shape.max_array_size}
{"".join(f"{k} = {v}" + chr(10) for k, v in shape.controller)}
[[nodes]]
names = "node[1-{shape.nodes}]"
cpus = {shape.cpus}
memory_mb = {shape.memory_mb}
gpus = {shape.gpus}

[[partitions]]
name = "gpu"
nodes = "ALL"
default = true

[faulttol]
restart_backoff_s = {shape.restart_backoff_s:g}

[auth]
key_file = "{root / 'cluster.key'}"
socket = "{sock}"
{shape.extra}"""


@dataclass
class Sample:
    t: float
    cpu_pct: float
    rss_mb: float
    phase: str
    agents_cpu_pct: float = 0.0         # the simulated agents' processes, summed


class SimController:
    def __init__(self, root: Path, shape: ClusterShape, probe: bool = True):
        self.root = Path(root).absolute()
        self.root.mkdir(parents=True, exist_ok=True)
        self.shape = shape
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.key_file = self.root / "cluster.key"
        if not self.key_file.exists():
            auth.write_key(self.key_file)
        self.conf = self.root / "lingjun.toml"
        text = config_text(shape, self.port, self.root)
        self.conf.write_text(text)
        from lingjun import config
        self.config = config.parse(text, str(self.conf))
        self.log_path = self.root / "lingjund.log"
        self.probe = probe
        self.proc: subprocess.Popen | None = None
        self.ps: psutil.Process | None = None
        self.samples: list[Sample] = []
        self.phase = "start"
        self._sampler: threading.Thread | None = None
        self._stop_sampling = threading.Event()
        self.agent_procs: list[psutil.Process] = []

    def watch_agents(self, pids: list[int]) -> None:
        """Sample these processes' CPU too (the simulated agents: the simulator's own cost)."""
        procs = [psutil.Process(p) for p in pids]
        for p in procs:
            p.cpu_percent(None)
        self.agent_procs = procs

    @property
    def names(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.shape.nodes + 1)]

    @property
    def socket(self) -> str:
        return self.config.auth.socket

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
                    "LINGJUN_CONTROLLER": self.address, "LINGJUN_AUTH_SOCKET": self.socket,
                    "LINGJUN_HOME": str(self.root / "home"), "LINGJUN_TLS_CA": ""})
        env.pop("LINGJUN_CONF", None)
        env.pop("SLURM_JOB_ID", None)
        return env

    def api(self) -> Api:
        return Api(self.address, socket_path=self.socket, ca_file="")

    def start(self, timeout: float = 60.0) -> None:
        module = "bench.sim.probe" if self.probe else "lingjund.daemon"
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        with open(self.log_path, "ab") as f:
            self.proc = subprocess.Popen([sys.executable, "-m", module, "-c", str(self.conf)],
                                         stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         cwd=REPO, env=env)
        self.ps = psutil.Process(self.proc.pid)
        api = self.api()
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    if Path(self.socket).exists():
                        api.call("Ping", api_pb2.PingRequest(), timeout=2)
                        break
                except ControllerUnreachable:
                    pass
                except grpc.RpcError as e:
                    # the socket's file is there a moment before it listens: the call
                    # went without a credential and was refused; ask again
                    if e.code() not in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNAVAILABLE):
                        raise
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"lingjund did not start; see {self.log_path}:\n"
                                       + self.log_tail())
                time.sleep(0.1)
        finally:
            api.close()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        ps = self.ps
        try:
            ps.cpu_percent(None)
            while not self._stop_sampling.wait(1.0):
                agents = 0.0
                for p in self.agent_procs:
                    try:
                        agents += p.cpu_percent(None)
                    except psutil.Error:
                        pass
                self.samples.append(Sample(time.time(), ps.cpu_percent(None),
                                           ps.memory_info().rss / 2**20, self.phase, agents))
        except psutil.Error:
            pass

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def stop(self) -> None:
        self._stop_sampling.set()
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)      # the process we started, by its PID
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self) -> "SimController":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
