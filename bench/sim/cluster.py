"""A simulated cluster: the real controller plus K simulated agents, as one thing.

    with SimCluster(tmp_path, ClusterShape(nodes=200)) as cl:
        cl.fleet.silence("node7")
        api = cl.api()
        ...

Starts ``lingjund``, then the agents, and waits until every node has
registered; on leaving stops the agents, then the controller (each by the
handle this process holds, never by name).
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bench.sim.agents import NodeShape
from bench.sim.controller import ClusterShape, SimController
from bench.sim.fleet import FleetProcesses


class SimCluster:
    def __init__(self, root: Path, shape: ClusterShape, *, agent_procs: int = 1,
                 per_channel: int = 1, connect_rate: float = 0.0, probe: bool = True,
                 register_timeout: float = 120.0):
        self.root = Path(root)
        self.shape = shape
        self.controller = SimController(self.root, shape, probe=probe)
        self.agent_procs = agent_procs
        self.per_channel = per_channel
        self.connect_rate = connect_rate
        self.register_timeout = register_timeout
        self.fleet: FleetProcesses | None = None
        self.register_s = float("nan")
        self.final_stats = None

    def start(self, keep_partial: bool = False) -> "SimCluster":
        """Start and wait for every node to register. Past ``register_timeout``:
        TimeoutError, after stopping everything unless ``keep_partial`` (a
        benchmark then goes on with the nodes that did register)."""
        self.controller.start()
        try:
            self.fleet = FleetProcesses(
                self.controller.address, str(self.controller.key_file), self.controller.names,
                self.root / "agents", procs=self.agent_procs,
                shape=NodeShape(cpus=self.shape.cpus, memory_mb=self.shape.memory_mb,
                                gpus=self.shape.gpus),
                per_channel=self.per_channel, connect_rate=self.connect_rate)
            self.controller.watch_agents(self.fleet.pids)
            self.register_s = self.fleet.wait_registered(self.shape.nodes, self.register_timeout)
        except TimeoutError:
            if not keep_partial:
                self.stop()
            raise
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self.fleet is not None:
            self.final_stats = self.fleet.stop()
            self.fleet = None
        self.controller.stop()
        return self.final_stats

    def api(self):
        return self.controller.api()

    def command(self, argv: list[str], timeout: float = 60.0) -> tuple[subprocess.CompletedProcess, float]:
        """Run one of the commands (squeue, sbatch...) against this cluster; (result, wall s)."""
        t0 = time.monotonic()
        p = subprocess.run(argv, env=self.controller.env, cwd=self.root, capture_output=True,
                           text=True, timeout=timeout)
        return p, time.monotonic() - t0

    def __enter__(self) -> "SimCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
