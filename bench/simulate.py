"""Simulate a cluster of K nodes: a real lingjund, simulated agents, a workload.

    python bench/simulate.py --nodes 500 --jobs 300 --workload mixed --duration 90
    python bench/simulate.py --nodes 100 --trace my.jsonl --duration 60
    python bench/simulate.py --nodes 100 --jobs 50 --save-trace /tmp/w.jsonl --duration 30

Phases, each bounded in time:

1. start lingjund (K nodes x 8 GPUs, node[1-K], one partition) and the
   simulated agents; time until all K have registered (``--register-timeout``);
2. idle (``--idle`` s): the controller's CPU with K agents heartbeating;
   then, with ``--quiet S``, S seconds with the same K streams open and no
   heartbeats: the difference is what the heartbeats cost the controller
   (S must stay under half the heartbeat timeout, or nodes go DOWN);
3. workload (at most ``--duration`` s): the trace is replayed through the
   API (``--clients`` concurrent clients) while ``squeue``, ``scontrol ping``
   and ``sbatch`` are run every ``--probe-every`` s and timed; the phase ends
   when every submitted job has finished or the time is up; skipped with
   ``--jobs 0 --duration 0`` (registration and heartbeat cost only);

then prints the report (bench/sim/report.py; ``--json FILE`` keeps it). The
state, the controller's log and the agents' logs stay in ``--dir`` (a new
temporary folder by default). Nothing is left running.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lingjun import slurm                                               # noqa: E402
from lingjun.v1 import api_pb2                                          # noqa: E402
from bench.sim import report, workload                                  # noqa: E402
from bench.sim.cluster import SimCluster                                # noqa: E402
from bench.sim.controller import ClusterShape                           # noqa: E402
from bench.sim.replay import Replay, job_ids                            # noqa: E402


def probe_commands(cl: SimCluster, stop: threading.Event, every: float, max_runs: int,
                   ping_rpc: list[float]) -> list[report.CommandTimes]:
    cmds = {"squeue": ["squeue", "-h"], "scontrol_ping": ["scontrol", "ping"],
            "sbatch": ["sbatch", "--parsable", "-J", "probe", "-o", "/dev/null", "-t", "2",
                       "--wrap", "# lingjun-sim: run=1\nsleep 1"],
            # the floor under the others: Python and the command's imports, no controller
            "sbatch_version": ["sbatch", "--version"]}
    times = {k: report.CommandTimes(k) for k in cmds}
    api = cl.api()
    runs = 0
    while not stop.is_set() and runs < max_runs:
        for name, argv in cmds.items():
            try:
                p, wall = cl.command(argv, timeout=60)
                times[name].wall_s.append(wall)
                if p.returncode != 0:
                    times[name].failures += 1
            except Exception:       # noqa: BLE001 - a timeout is a failure to report
                times[name].failures += 1
        t0 = time.monotonic()
        try:
            api.call("Ping", api_pb2.PingRequest(), timeout=30)
            ping_rpc.append(time.monotonic() - t0)
        except Exception:           # noqa: BLE001
            pass
        runs += 1
        stop.wait(every)
    api.close()
    return list(times.values())


class _Window:
    """The controller's CPU seconds and the heartbeats the agents sent over a stretch of time."""

    def __init__(self, cl: SimCluster):
        self.cl = cl
        self.t0, self.cpu0, self.hb0 = self._now()

    def _now(self) -> tuple[float, float, int]:
        c = self.cl.controller.ps.cpu_times()
        return time.monotonic(), c.user + c.system, self.cl.fleet.stats().heartbeats

    def close(self) -> None:
        t1, cpu1, hb1 = self._now()
        self.seconds = t1 - self.t0
        self.cpu_share = (cpu1 - self.cpu0) / self.seconds      # of one core
        self.heartbeats_per_s = (hb1 - self.hb0) / self.seconds


def _per_heartbeat(beating: _Window, quiet: _Window) -> dict:
    """What one heartbeat costs the controller (its CPU with heartbeats less
    without, over the rate sent), and that at 2,000 a second (10,000 agents
    every 5 s): comparable between runs the machine's load slowed down
    differently, which the plain CPU share is not."""
    extra = beating.cpu_share - quiet.cpu_share
    rate = beating.heartbeats_per_s
    us = extra / rate * 1e6 if rate > 0 else float("nan")
    return {"heartbeats_per_s_idle": round(rate, 1),
            "controller_cpu_pct_beating": round(100 * beating.cpu_share, 2),
            "controller_cpu_pct_quiet": round(100 * quiet.cpu_share, 2),
            "controller_us_per_heartbeat": round(us, 1),
            "heartbeat_cpu_pct_at_2000_per_s": round(us * 2000 / 1e4, 2)}


class _NoWorkload(Exception):
    """The run ends after the idle phases (``--jobs 0 --duration 0``)."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="simulate.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--jobs", type=int, default=100, help="jobs to generate (without --trace)")
    p.add_argument("--workload", choices=sorted(workload.MIXES), default="mixed")
    p.add_argument("--rate", type=float, default=5.0, help="generated jobs arrive at this rate per s (0: all at once)")
    p.add_argument("--run", default="5,60", help="generated run times: MIN,MAX seconds")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--trace", help="replay this trace (JSON lines) instead of generating one")
    p.add_argument("--save-trace", help="write the workload's trace here")
    p.add_argument("--duration", type=float, default=90.0, help="most seconds of the workload phase")
    p.add_argument("--idle", type=float, default=20.0, help="seconds of the idle phase")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--probe-every", type=float, default=10.0)
    p.add_argument("--agent-procs", type=int, default=1)
    p.add_argument("--per-channel", type=int, default=1,
                   help="agent streams per gRPC channel (1: a connection each, as real agents)")
    p.add_argument("--connect-rate", type=float, default=0.0, help="new agent streams per s at start (0: all at once)")
    p.add_argument("--interval", "--heartbeat-interval", dest="heartbeat_interval", type=float,
                   default=2.0, help="heartbeat interval, s (2: what `lingjun up` configures; "
                   "0: the controller's default, 5 s, longer past 5,000 nodes)")
    p.add_argument("--quiet", type=float, default=0.0,
                   help="seconds with heartbeats off after the idle phase (their cost is the difference)")
    p.add_argument("--heartbeat-timeout", type=float, default=30.0)
    p.add_argument("--register-timeout", type=float, default=180.0)
    p.add_argument("--dir", help="state and logs (default: a new temporary folder)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    if args.quiet and args.quiet > args.heartbeat_timeout / 2:
        p.error(f"--quiet {args.quiet:g} must stay under half of --heartbeat-timeout "
                f"({args.heartbeat_timeout:g} s), or the silent nodes go DOWN")

    root = Path(args.dir or tempfile.mkdtemp(prefix="lingjun-sim-"))
    if args.trace:
        jobs = workload.load(args.trace)
    else:
        lo, hi = (float(x) for x in args.run.split(","))
        mix = workload.MIXES[args.workload]
        mix = workload.Mix(**{**mix.__dict__, "run": (lo, hi)})
        jobs = workload.generate(args.jobs, args.seed, args.nodes, mix=mix, rate=args.rate)
    if args.save_trace:
        workload.save(jobs, args.save_trace, f"bench/simulate.py --nodes {args.nodes} "
                      f"--jobs {args.jobs} --workload {args.workload} --seed {args.seed}")
    shape = ClusterShape(nodes=args.nodes, heartbeat_interval_s=args.heartbeat_interval,
                         heartbeat_timeout_s=args.heartbeat_timeout)
    load = "load average %.2f %.2f %.2f on %d CPUs" % (*os.getloadavg(), os.cpu_count())
    print(f"simulating {args.nodes} nodes, {len(jobs)} jobs; state and logs in {root}", flush=True)
    cl = SimCluster(root, shape, agent_procs=args.agent_procs, per_channel=args.per_channel,
                    connect_rate=args.connect_rate, register_timeout=args.register_timeout)
    ctl = cl.controller
    commands: list[report.CommandTimes] = []
    ping_rpc: list[float] = []
    subs = {}
    down: list[str] = []
    t_work = 0.0
    active = 0
    registered_at_end = 0
    log_lines: list[str] = []
    per_hb: dict = {}
    try:
        registered_at_start = args.nodes
        try:
            cl.start(keep_partial=True)
        except TimeoutError as e:
            print(f"simulate: {e}; going on with those", flush=True)
            registered_at_start = cl.fleet.registered()
        print(f"registered: {cl.register_s:.1f} s", flush=True)
        ctl.phase = "idle"
        settle = min(2.0, args.idle / 2)
        time.sleep(settle)
        beating = _Window(cl)
        time.sleep(args.idle - settle)
        beating.close()
        if args.quiet:
            cl.fleet.beat(False)
            ctl.phase = "quiet"
            settle = min(2.0, args.quiet / 2)
            time.sleep(settle)
            quiet = _Window(cl)
            time.sleep(args.quiet - settle)
            quiet.close()
            per_hb.update(_per_heartbeat(beating, quiet))
            cl.fleet.beat(True)
            ctl.phase = "idle-again"
            time.sleep(min(3.0, args.quiet))
        ctl.phase = "workload"
        if not jobs and args.duration <= 0:
            ctl.phase = "end"
            registered_at_end = cl.fleet.registered()
            log_lines = ctl.log_lines()
            api = cl.api()
            try:
                down = [n.name for n in api.call("GetNodes", api_pb2.GetNodesRequest(), timeout=60).nodes
                        if n.state == slurm.NODE_DOWN]
            finally:
                api.close()
            raise _NoWorkload
        stop = threading.Event()
        box: dict = {}
        prober = threading.Thread(target=lambda: box.setdefault("c", probe_commands(
            cl, stop, args.probe_every, int(args.duration / max(args.probe_every, 1)) + 1, ping_rpc)),
            daemon=True)
        t0 = time.monotonic()
        prober.start()
        replay = Replay(cl.api, jobs, clients=args.clients, workdir=root, deadline_s=args.duration)
        subs = replay.run()
        api = cl.api()
        ids = job_ids(subs)
        while ids:
            live = [j for j in api.call("GetJobs", api_pb2.GetJobsRequest(), timeout=60).jobs
                    if j.name != "probe"]
            active = len(live)
            if not live or time.monotonic() - t0 >= args.duration:
                break
            time.sleep(2)
        t_work = time.monotonic() - t0
        stop.set()
        prober.join(120)
        commands = box.get("c", [])
        ctl.phase = "end"
        registered_at_end = cl.fleet.registered()
        log_lines = ctl.log_lines()     # what follows is our own shutdown
        try:
            down = [n.name for n in api.call("GetNodes", api_pb2.GetNodesRequest(), timeout=60).nodes
                    if n.state == slurm.NODE_DOWN]
        except Exception:       # noqa: BLE001
            pass
        api.close()
    except _NoWorkload:
        pass
    finally:
        fleet = cl.stop() or cl.final_stats
    if not log_lines:
        log_lines = ctl.log_lines()
    data = report.RunData(
        nodes=args.nodes, agent_procs=args.agent_procs, per_channel=args.per_channel,
        register_s=cl.register_s, idle_s=args.idle, workload_s=t_work, subs=subs,
        fleet=fleet, samples=ctl.samples, log_lines=log_lines, commands=commands,
        down_at_end=down, load=load, ping_rpc_s=ping_rpc)
    figs = report.figures(data)
    figs["workload_phase_s"] = round(t_work, 1)
    figs["jobs_active_at_end"] = active
    figs["registered_by_timeout"] = registered_at_start
    figs["registered_at_end"] = registered_at_end
    figs.update(per_hb)
    sys.stdout.write(report.text(figs))
    if args.json:
        Path(args.json).write_text(json.dumps(figs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
