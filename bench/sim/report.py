"""The simulator's figures, from what one run collected.

Sources: the driver's clock (submissions, commands), the agents' clock
(when each job's script was launched), the controller's log (``sim-probe``
pass times and loop lag from ``probe.py``; its own lines about streams and
DOWN nodes) and psutil samples of the controller process.
"""
from __future__ import annotations

import collections
import re
import statistics
from dataclasses import dataclass, field

from bench.sim.agents import FleetStats
from bench.sim.controller import Sample
from bench.sim.replay import Submission

PASS_RE = re.compile(r"sim-probe pass ([0-9.]+) s started (\d+)")
LAG_RE = re.compile(r"sim-probe lag max ([0-9.]+) s")
CLOSED_RE = re.compile(r"node=(\S+): agent stream closed")
DOWN_RE = re.compile(r"node=(\S+): not responding for .* set DOWN")
SILENT_RE = re.compile(r"node=(\S+): no heartbeat for")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(p / 100 * (len(v) - 1))))]


@dataclass
class CommandTimes:
    name: str
    wall_s: list[float] = field(default_factory=list)
    failures: int = 0


@dataclass
class RunData:
    nodes: int
    agent_procs: int
    per_channel: int
    register_s: float
    idle_s: float
    workload_s: float
    subs: dict[str, Submission]
    fleet: FleetStats
    samples: list[Sample]
    log_lines: list[str]
    commands: list[CommandTimes]
    down_at_end: list[str]
    silenced: set[str] = field(default_factory=set)
    load: str = ""
    ping_rpc_s: list[float] = field(default_factory=list)


def figures(d: RunData) -> dict:
    passes = [(float(m.group(1)), int(m.group(2))) for l in d.log_lines if (m := PASS_RE.search(l))]
    lags = [float(m.group(1)) for l in d.log_lines if (m := LAG_RE.search(l))]
    closed = [m.group(1) for l in d.log_lines if (m := CLOSED_RE.search(l))]
    downs = [m.group(1) for l in d.log_lines if (m := DOWN_RE.search(l))]
    silent = [m.group(1) for l in d.log_lines if (m := SILENT_RE.search(l))]
    idle = [s for s in d.samples if s.phase == "idle"]
    quiet = [s for s in d.samples if s.phase == "quiet"][2:]     # past the switch
    beating = idle[2:] if quiet else []
    busy = [s for s in d.samples if s.phase == "workload"]
    acked = {s.job_id: s.acked_at for s in d.subs.values() if s.job_id}
    starts = []
    for jid, t in d.fleet.launched_at.items():
        parent = d.fleet.array_of.get(jid, jid)
        if parent in acked:
            starts.append(t - acked[parent])
    launch_times = sorted(d.fleet.launched_at.values())
    window = (launch_times[-1] - launch_times[0]) if len(launch_times) > 1 else 0.0
    sub_lat = [s.latency_s for s in d.subs.values() if s.job_id]
    pass_s = [p for p, _ in passes]
    out = {
        "nodes": d.nodes, "agent_processes": d.agent_procs, "streams_per_channel": d.per_channel,
        "machine_load": d.load,
        "register_all_s": round(d.register_s, 2),
        "idle_cpu_pct_mean": _mean([s.cpu_pct for s in idle]),
        "idle_cpu_pct_max": max((s.cpu_pct for s in idle), default=float("nan")),
        "quiet_cpu_pct_mean": _mean([s.cpu_pct for s in quiet]),
        # what K agents' heartbeats cost: the idle CPU with them less without
        "heartbeat_cpu_pct": (_mean([s.cpu_pct for s in beating]) - _mean([s.cpu_pct for s in quiet])
                              if quiet else float("nan")),
        "workload_cpu_pct_mean": _mean([s.cpu_pct for s in busy]),
        "rss_mb_max": max((s.rss_mb for s in d.samples), default=float("nan")),
        "agents_cpu_pct_idle": _mean([s.agents_cpu_pct for s in idle]),
        "agents_cpu_pct_workload": _mean([s.agents_cpu_pct for s in busy]),
        "jobs_submitted": len(acked),
        "submit_errors": sum(1 for s in d.subs.values() if s.error and not s.job_id),
        "submit_error_kinds": dict(collections.Counter(
            s.error[:60] for s in d.subs.values() if s.error and not s.job_id).most_common(3)),
        "submit_latency_p50_s": pct(sub_lat, 50), "submit_latency_p99_s": pct(sub_lat, 99),
        "launches": len(d.fleet.launched_at), "batch_finished": d.fleet.finished,
        "jobs_started_per_s": round(len(launch_times) / window, 2) if window > 0 else float("nan"),
        "time_to_start_p50_s": pct(starts, 50), "time_to_start_p99_s": pct(starts, 99),
        "time_to_start_max_s": max(starts, default=float("nan")),
        "passes": len(passes), "pass_p50_s": pct(pass_s, 50), "pass_p99_s": pct(pass_s, 99),
        "pass_max_s": max(pass_s, default=float("nan")),
        "loop_lag_max_s": max(lags, default=float("nan")),
        "ping_rpc_p50_s": pct(d.ping_rpc_s, 50), "ping_rpc_max_s": max(d.ping_rpc_s, default=float("nan")),
        "heartbeats_sent": d.fleet.heartbeats,
        "stream_disconnects_agents": d.fleet.disconnects,
        "stream_closed_controller_log": len(closed),
        "streams_closed_for_silence": len(silent),
        "failed_connects": d.fleet.failed_connects,
        "failed_connect_kinds": dict(d.fleet.failures.most_common(3)),
        "nodes_falsely_down": len({n for n in downs if n not in d.silenced}),
        "nodes_down_at_end": len([n for n in d.down_at_end if n not in d.silenced]),
    }
    for c in d.commands:
        out[f"cmd_{c.name}_p50_s"] = pct(c.wall_s, 50)
        out[f"cmd_{c.name}_max_s"] = max(c.wall_s, default=float("nan"))
        out[f"cmd_{c.name}_runs"] = len(c.wall_s)
        out[f"cmd_{c.name}_failures"] = c.failures
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


def _mean(v: list[float]) -> float:
    return statistics.fmean(v) if v else float("nan")


def text(f: dict) -> str:
    width = max(len(k) for k in f)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in f.items()) + "\n"
