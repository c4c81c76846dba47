"""The simulated agents in child processes, driven from the simulator's process.

The fleet runs apart from the driver (which submits the workload and runs
the commands), so the two do not share one interpreter lock, and a big
fleet can be split over a few processes (``procs``): node i goes to process
i mod procs. Each child (``python -m bench.sim.fleet``) runs one asyncio
loop with its ``agents.Fleet``; the driver sends it one JSON command per
line on its stdin and reads one JSON answer per line on its stdout:

    ["registered"]          -> how many of its nodes are registered
    ["silence", node]       -> the node goes silent for good
    ["break", node]         -> the node's stream breaks; it reconnects
    ["beat", on]            -> heartbeats on or off (the streams stay open)
    ["stats"]               -> its FleetStats
    ["stop"]                -> stops, answers its last FleetStats
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.sim.agents import Fleet, FleetStats, NodeShape

REPO = Path(__file__).resolve().parents[2]


# -- the child -------------------------------------------------------------------------
def stats_json(s: FleetStats) -> dict:
    d = s.summary()
    d["first_registered"] = s.first_registered
    d["launched_at"] = {str(k): v for k, v in s.launched_at.items()}
    d["launch_host"] = {str(k): v for k, v in s.launch_host.items()}
    d["array_of"] = {str(k): v for k, v in s.array_of.items()}
    d["ended"] = {str(k): list(v) for k, v in s.ended.items()}
    return d


def stats_from_json(d: dict) -> FleetStats:
    s = FleetStats()
    for k, v in d.items():
        if isinstance(v, int) and hasattr(s, k):
            setattr(s, k, v)
    s.messages.update(d.get("messages", {}))
    s.failures.update(d.get("failures", {}))
    s.first_registered = dict(d.get("first_registered", {}))
    s.launched_at = {int(k): v for k, v in d.get("launched_at", {}).items()}
    s.launch_host = {int(k): v for k, v in d.get("launch_host", {}).items()}
    s.array_of = {int(k): v for k, v in d.get("array_of", {}).items()}
    s.ended = {int(k): tuple(v) for k, v in d.get("ended", {}).items()}
    return s


async def child_main(args) -> None:
    from lingjun import auth
    loop = asyncio.get_running_loop()
    names = Path(args.names_file).read_text().split()
    shape = NodeShape(cpus=args.cpus, memory_mb=args.memory_mb, gpus=args.gpus)
    fleet = Fleet(args.address, auth.ClusterKey.load(args.key_file), names, shape=shape,
                  per_channel=args.per_channel, connect_rate=args.connect_rate)
    commands: asyncio.Queue = asyncio.Queue()
    out = sys.stdout

    def reader() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(commands.put_nowait, json.loads(line))
        loop.call_soon_threadsafe(commands.put_nowait, ["stop"])

    def answer(value) -> None:
        out.write(json.dumps(["ok", value]) + "\n")
        out.flush()

    await fleet.start()
    threading.Thread(target=reader, daemon=True).start()
    while True:
        cmd = await commands.get()
        op = cmd[0]
        if op == "registered":
            answer(fleet.registered())
        elif op == "silence":
            fleet.silence(cmd[1])
            answer(True)
        elif op == "break":
            fleet.break_stream(cmd[1])
            answer(True)
        elif op == "beat":
            fleet.beating = bool(cmd[1])
            answer(True)
        elif op == "stats":
            answer(stats_json(fleet.stats))
        elif op == "stop":
            await fleet.stop()
            answer(stats_json(fleet.stats))
            return
        else:
            out.write(json.dumps(["error", f"unknown command {op!r}"]) + "\n")
            out.flush()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.sim.fleet")
    p.add_argument("--address", required=True)
    p.add_argument("--key-file", required=True)
    p.add_argument("--names-file", required=True)
    p.add_argument("--cpus", type=int, default=64)
    p.add_argument("--memory-mb", type=int, default=512_000)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--per-channel", type=int, default=1)
    p.add_argument("--connect-rate", type=float, default=0.0)
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s sim-agents %(levelname)s %(message)s")
    asyncio.run(child_main(args))


# -- the driver's side ------------------------------------------------------------------------
class FleetProcesses:
    """Simulated nodes ``names`` in ``procs`` child processes (stopped by ``stop``)."""

    def __init__(self, address: str, key_file: str, names: list[str], workdir: Path, *,
                 procs: int = 1, shape: NodeShape = NodeShape(), per_channel: int = 1,
                 connect_rate: float = 0.0):
        self.names = names
        self.procs = max(1, min(procs, len(names)))
        self._children: list[tuple[subprocess.Popen, set[str]]] = []
        self._lock = threading.Lock()
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        for i in range(self.procs):
            part = names[i::self.procs]
            names_file = workdir / f"agents-{i}.names"
            names_file.write_text("\n".join(part))
            log = open(workdir / f"agents-{i}.log", "ab")
            p = subprocess.Popen(
                [sys.executable, "-m", "bench.sim.fleet", "--address", address,
                 "--key-file", str(key_file), "--names-file", str(names_file),
                 "--cpus", str(shape.cpus), "--memory-mb", str(shape.memory_mb),
                 "--gpus", str(shape.gpus), "--per-channel", str(per_channel),
                 "--connect-rate", str(connect_rate / self.procs)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                cwd=REPO, env=env, start_new_session=True)
            log.close()
            self._children.append((p, set(part)))

    @property
    def pids(self) -> list[int]:
        return [p.pid for p, _ in self._children]

    def _ask(self, i: int, *cmd):
        p, _ = self._children[i]
        with self._lock:
            p.stdin.write(json.dumps(list(cmd)) + "\n")
            p.stdin.flush()
            line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"simulated agents process {i} (pid {p.pid}) is gone")
        status, value = json.loads(line)
        if status != "ok":
            raise RuntimeError(f"simulated agents process {i}: {value}")
        return value

    def _owner(self, node: str) -> int:
        return next(i for i, (_, part) in enumerate(self._children) if node in part)

    def registered(self) -> int:
        return sum(self._ask(i, "registered") for i in range(self.procs))

    def wait_registered(self, count: int, timeout: float) -> float:
        """Seconds until ``count`` nodes are registered; TimeoutError past ``timeout``."""
        t0 = time.monotonic()
        while True:
            n = self.registered()
            if n >= count:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"only {n} of {count} simulated nodes registered in {timeout:g} s")
            time.sleep(0.2)

    def silence(self, node: str) -> None:
        self._ask(self._owner(node), "silence", node)

    def break_stream(self, node: str) -> None:
        self._ask(self._owner(node), "break", node)

    def beat(self, on: bool) -> None:
        """Every node heartbeats (True) or stays silent on its open stream."""
        for i in range(self.procs):
            self._ask(i, "beat", on)

    def stats(self) -> FleetStats:
        return merge([stats_from_json(self._ask(i, "stats")) for i in range(self.procs)])

    def stop(self) -> FleetStats:
        parts = []
        for i, (p, _) in enumerate(self._children):
            if p.poll() is None:
                try:
                    parts.append(stats_from_json(self._ask(i, "stop")))
                except (OSError, RuntimeError, ValueError):
                    pass
                try:
                    p.stdin.close()
                    p.wait(15)
                except (OSError, subprocess.TimeoutExpired):
                    p.kill()            # our own child, by its handle
                    p.wait(5)
        return merge(parts)


def merge(parts: list[FleetStats]) -> FleetStats:
    out = FleetStats()
    for s in parts:
        for k, v in s.__dict__.items():
            if isinstance(v, int):
                setattr(out, k, getattr(out, k) + v)
        out.messages.update(s.messages)
        out.failures.update(s.failures)
        out.first_registered.update(s.first_registered)
        out.launched_at.update({j: t for j, t in s.launched_at.items()
                                if j not in out.launched_at or t < out.launched_at[j]})
        out.launch_host.update(s.launch_host)
        out.array_of.update(s.array_of)
        out.ended.update(s.ended)
    return out


if __name__ == "__main__":
    main()
