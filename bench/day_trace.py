"""A day of three accounts' GPU jobs through the pure scheduling core, with and without backfill.

    python bench/day_trace.py                       # the committed trace, both ways
    python bench/day_trace.py --make-trace          # write the trace again (seeded)
    python bench/day_trace.py --nodes 200 --hours 6 # smaller and quicker

A discrete-event simulation in simulated time: no controller, no agents, the
core's own ``schedule(snapshot, now, profile)`` deciding every pass (what
the controller runs each pass, ``lingjund/sched/cycle.py``), the simulator
playing the cluster around it: jobs arrive at their submit times, the starts
of each plan take their nodes' CPUs, memory and GPUs, and each run ends
after its real duration (shorter than its time limit, as real runs are:
backfill plans with the limits and gains from the early ends too).

The trace (``bench/sim/traces/day-3accounts.jsonl``, seeded, committed so
each run replays the same day): 1,000 nodes of 8 GPUs; accounts ``a``,
``b`` and ``c`` (shares 50/30/20 in ``--shares``) each submitting more than
its share (offered load 0.6, 0.45 and 0.35 of the cluster), more by day than
by night; jobs of 1 GPU, one whole node, and gangs of 4, 16 and 64 nodes;
durations from 5 minutes to 8 hours, time limits 1.2 to 3 times the
duration (users ask for more than they use).

Passes run when something changed, at most one per ``--interval`` seconds
of simulated time (Slurm's backfill runs every 30 s). Printed per mode:

- utilization: GPU-seconds used over GPU-seconds there were, from the
  first submission to the end of the day;
- per account, its share of the GPU-hours delivered while all three had
  jobs waiting ("once all are busy"), against its configured share;
- waits: median and worst wait by job size; how many jobs started later
  than the first start time backfill reserved for them, and by how much;
- the cost of the core: passes, median and worst time of one pass.

Priority is the queue's order (``--priority``): ``basic`` is submission
order (priority/basic); ``multifactor`` is priority/multifactor with
Lingjun's default weights (fair share 10,000, age 1,000, max age 7 days)
and each account's Fair Tree factor (``lingjund/sched/fairshare.py``, the
one sshare shows) from its GPU-seconds, decayed with ``--half-life``, over
accounts a, b and c under root with RawShares from ``--shares``: the
controller's ``[accounting]`` usage charging, played here per pass.

    python bench/day_trace.py --priority basic,multifactor --modes on

``--dump FILE`` (not in --help) writes every pass's starts and reservations,
one a line, so that two versions of the core can be compared byte for byte
on the same trace: a change meant to be faster only must leave it identical.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lingjund.sched import fairshare  # noqa: E402
from lingjund.sched.backfill import Backfill  # noqa: E402
from lingjund.sched.cycle import schedule  # noqa: E402
from lingjund.sched.plugins.multifactor import MultifactorPriority, Weights  # noqa: E402
from lingjund.sched.plugins import DEFAULT_PROFILE  # noqa: E402
from lingjund.sched.snapshot import JobRequest, NodeView, PartitionView, RunningJob, Snapshot  # noqa: E402

TRACE = Path(__file__).resolve().parent / "sim" / "traces" / "day-3accounts.jsonl"
GPUS, CPUS, MEM = 8, 128, 1_024_000
DAY = 24 * 3600.0
T0 = 1_767_225_600.0          # 2026-01-01 00:00 UTC: the day's midnight


@dataclass
class TraceJob:
    id: int
    submit: float             # seconds after midnight
    account: str
    nodes: int                # 1 for a job within one node
    gpus: int                 # per node
    duration: float           # what the run really takes (s)
    limit_min: int            # what it asked for


def make_trace(path: Path, nodes: int, seed: int = 16, hours: float = 24.0) -> int:
    """Write a day's trace; the number of jobs."""
    rnd = random.Random(seed)
    load = {"a": 0.60, "b": 0.45, "c": 0.35}
    shapes = [  # (nodes, GPUs per node, weight of submissions)
        (1, 1, 0.45), (1, 8, 0.30), (4, 8, 0.15), (16, 8, 0.08), (64, 8, 0.02)]
    capacity = nodes * GPUS
    jobs: list[TraceJob] = []
    horizon = hours * 3600
    for account, share in load.items():
        t = 0.0
        # mean GPU-seconds of one job of this mix, to pace arrivals to the load
        mean_dur = 5400.0
        mean_gpus = sum(n * g * w for n, g, w in shapes) / sum(w for *_, w in shapes)
        rate = share * capacity / (mean_gpus * mean_dur)      # jobs per second, on average
        while True:
            hour = (t / 3600) % 24
            daytime = 1.5 if 8 <= hour < 20 else 0.5          # more by day than by night
            t += rnd.expovariate(rate * daytime)
            if t >= horizon:
                break
            n, g, _ = rnd.choices(shapes, weights=[w for *_, w in shapes])[0]
            dur = min(8 * 3600.0, max(300.0, rnd.lognormvariate(math.log(3600), 0.9)))
            limit = max(10, math.ceil(dur * rnd.uniform(1.2, 3.0) / 60 / 10) * 10)
            jobs.append(TraceJob(0, round(t, 1), account, n, g, round(dur, 1), int(limit)))
    jobs.sort(key=lambda j: j.submit)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for i, j in enumerate(jobs, 1):
            j.id = i
            f.write(json.dumps(j.__dict__) + "\n")
    return len(jobs)


def load_trace(path: Path, hours: float) -> list[TraceJob]:
    with open(path) as f:
        jobs = [TraceJob(**json.loads(line)) for line in f]
    return [j for j in jobs if j.submit < hours * 3600]


@dataclass
class Node:
    name: str
    cpus: int = 0
    mem: int = 0
    gpu_ids: set = field(default_factory=set)
    jobs: int = 0


@dataclass
class Run:
    job: TraceJob
    start: float
    nodes: tuple
    cpus: tuple
    mem: tuple
    gpu_ids: tuple


def request(j: TraceJob, priority: int, fs: float = 1.0) -> JobRequest:
    common = dict(job_id=j.id, priority=priority, submit_time=T0 + j.submit,
                  partition="batch", time_limit_min=j.limit_min, account=j.account,
                  user=f"u{j.account}", fairshare=fs)
    if j.nodes == 1 and j.gpus < GPUS:
        return JobRequest(cpus_per_task=16 * j.gpus, gpus_per_node=j.gpus,
                          mem_per_node_mb=64_000 * j.gpus, **common)
    return JobRequest(min_nodes=j.nodes, ntasks_per_node=8, cpus_per_task=16,
                      gpus_per_node=GPUS, mem_per_node_mb=512_000, **common)


def simulate(trace: list[TraceJob], nodes: int, backfill: bool, interval: float,
             hours: float, priority: str = "basic", shares: dict[str, float] | None = None,
             half_life_s: float = 7 * 86400, dump=None) -> dict:
    names = [f"gpu{i:04d}" for i in range(1, nodes + 1)]
    state = {n: Node(n) for n in names}
    part = PartitionView(name="batch", nodes=tuple(names), default=True, total_cpus=CPUS * nodes)
    profile = replace(DEFAULT_PROFILE, backfill=Backfill()) if backfill else DEFAULT_PROFILE
    multifactor = priority == "multifactor"
    if multifactor:
        profile = replace(profile, queue_sort=MultifactorPriority(
            Weights(age=1000, fairshare=10000, max_age_s=7 * 86400)))
    raw_shares = {a: max(1, round((shares or {}).get(a, 1 / 3) * 100)) for a in "abc"}
    usage = {a: 0.0 for a in "abc"}       # decayed GPU-seconds, as [accounting] charges them
    fs = {a: 1.0 for a in "abc"}
    horizon = hours * 3600
    arrivals = list(trace)
    ai = 0
    pending: dict[int, TraceJob] = {}
    running: dict[int, Run] = {}
    ends: list[tuple[float, int]] = []
    started: dict[int, float] = {}
    reserved: dict[int, float] = {}       # first start time backfill promised
    used = {a: 0.0 for a in "abc"}        # GPU-seconds delivered, all day
    busy_used = {a: 0.0 for a in "abc"}   # ... while every account had jobs waiting
    busy_time = 0.0
    pass_times: list[float] = []
    now = 0.0
    last_pass = -interval
    changed = True

    def account_running_gpus() -> dict[str, int]:
        out = {a: 0 for a in "abc"}
        for r in running.values():
            out[r.job.account] += sum(len(g) for g in r.gpu_ids)
        return out

    while now < horizon:
        # the next thing to happen: an arrival, an end, or the next pass
        nxt = horizon
        if ai < len(arrivals):
            nxt = min(nxt, arrivals[ai].submit)
        if ends:
            nxt = min(nxt, ends[0][0])
        if changed:
            nxt = min(nxt, max(now, last_pass + interval))
        nxt = max(nxt, now)
        # account the GPU-seconds of [now, nxt)
        dt = nxt - now
        if dt > 0:
            per = account_running_gpus()
            if multifactor:
                for a in "abc":
                    usage[a] = fairshare.advance(usage[a], now, nxt, per[a] * dt, half_life_s, "NONE")
            all_waiting = len({j.account for j in pending.values()}) == 3
            for a, g in per.items():
                used[a] += g * dt
                if all_waiting:
                    busy_used[a] += g * dt
            if all_waiting:
                busy_time += dt
        now = nxt
        if now >= horizon:
            break
        while ai < len(arrivals) and arrivals[ai].submit <= now:
            pending[arrivals[ai].id] = arrivals[ai]
            ai += 1
            changed = True
        while ends and ends[0][0] <= now:
            _, jid = heapq.heappop(ends)
            r = running.pop(jid)
            for n, c, m, g in zip(r.nodes, r.cpus, r.mem, r.gpu_ids):
                s = state[n]
                s.cpus -= c
                s.mem -= m
                s.gpu_ids -= set(g)
                s.jobs -= 1
            changed = True
        if not changed or now < last_pass + interval:
            continue
        if multifactor:
            tree = fairshare.fair_tree({"root": "", "a": "root", "b": "root", "c": "root"},
                                       [(a, f"u{a}", 1, usage[a]) for a in "abc"], raw_shares)
            fs = {a: tree[(a, f"u{a}")].fairshare for a in "abc"}
        snap = Snapshot(
            nodes=tuple(NodeView(name=s.name, cpus=CPUS, memory_mb=MEM, gpus=GPUS,
                                 alloc_cpus=s.cpus, alloc_memory_mb=s.mem,
                                 alloc_gpus=len(s.gpu_ids), alloc_gpu_ids=tuple(sorted(s.gpu_ids)),
                                 running_jobs=s.jobs, partitions=("batch",))
                        for s in state.values()),
            partitions=(part,),
            pending=tuple(request(j, 1_000_000 - j.id, fs[j.account]) for j in pending.values()),
            running=tuple(RunningJob(job_id=r.job.id, nodes=r.nodes,
                                     end_time=T0 + r.start + r.job.limit_min * 60,
                                     cpus_per_node=r.cpus, mem_per_node_mb=r.mem,
                                     gpus_per_node=tuple(len(g) for g in r.gpu_ids),
                                     gpu_ids_per_node=r.gpu_ids, partition="batch",
                                     start_time=T0 + r.start)
                          for r in running.values()))
        c0 = time.process_time()
        plan = schedule(snap, T0 + now, profile)
        pass_times.append(time.process_time() - c0)
        last_pass = now
        changed = False
        if dump is not None:      # every decision of the pass, to compare two versions of the core
            for s in plan.starts:
                dump.write(f"{now:.1f} start {s.job_id} {','.join(s.nodes)}\n")
            for jid, (t, ns) in sorted(plan.expected.items()):
                dump.write(f"{now:.1f} expect {jid} {t - T0:.1f} {','.join(ns)}\n")
        for jid, (t, _) in plan.expected.items():
            reserved.setdefault(jid, t - T0)
        for s in plan.starts:
            j = pending.pop(s.job_id)
            r = Run(j, now, s.nodes, s.cpus_per_node, s.mem_per_node_mb, s.gpu_ids_per_node)
            running[j.id] = r
            started[j.id] = now
            for n, c, m, g in zip(s.nodes, s.cpus_per_node, s.mem_per_node_mb, s.gpu_ids_per_node):
                st = state[n]
                st.cpus += c
                st.mem += m
                st.gpu_ids |= set(g)
                st.jobs += 1
            heapq.heappush(ends, (now + j.duration, j.id))
            changed = True
    first = trace[0].submit if trace else 0.0
    total_gpu_s = nodes * GPUS * (horizon - first)
    waits: dict[str, list[float]] = {}
    for j in trace:
        if j.id in started:
            key = f"{j.nodes}x{j.gpus}"
            waits.setdefault(key, []).append(started[j.id] - j.submit)
    late = [started[j] - t for j, t in reserved.items() if j in started and started[j] > t + interval]
    busy_total = sum(busy_used.values()) or 1.0
    return {
        "backfill": backfill, "priority": priority, "jobs": len(trace), "started": len(started),
        "still_pending": len(pending), "utilization": sum(used.values()) / total_gpu_s,
        "busy_hours": busy_time / 3600,
        "busy_share": {a: busy_used[a] / busy_total for a in "abc"},
        "gpu_hours": {a: used[a] / 3600 for a in "abc"},
        "waits": {k: (statistics.median(v), max(v), len(v)) for k, v in sorted(waits.items())},
        "reserved": len(reserved), "late_vs_reservation": len(late),
        "worst_late_s": max(late, default=0.0),
        "passes": len(pass_times), "pass_median_s": statistics.median(pass_times) if pass_times else 0,
        "pass_max_s": max(pass_times, default=0.0),
    }


def report(r: dict, shares: dict[str, float]) -> None:
    mode = ("backfill" if r["backfill"] else "no backfill") + ", priority/" + r["priority"]
    print(f"\n== {mode}: {r['jobs']} jobs, {r['started']} started, {r['still_pending']} still "
          f"pending at the end of the day")
    print(f"utilization {r['utilization'] * 100:.1f}% of the GPU-hours from the first submission")
    print(f"all three accounts waiting for {r['busy_hours']:.1f} h; their shares of the GPU-hours "
          "delivered then (configured):")
    for a in "abc":
        print(f"  {a}: {r['busy_share'][a] * 100:5.1f}% ({shares[a] * 100:.0f}%)  "
              f"all day {r['gpu_hours'][a]:,.0f} GPU-h")
    print("waits by shape (nodes x GPUs): median / worst minutes (jobs started)")
    for k, (med, worst, n) in r["waits"].items():
        print(f"  {k:>5}: {med / 60:8.1f} / {worst / 60:8.1f}  ({n})")
    print(f"reservations: {r['reserved']} jobs given one; {r['late_vs_reservation']} started more "
          f"than a pass interval after their first reserved time (worst {r['worst_late_s'] / 60:.1f} min)")
    print(f"core: {r['passes']} passes, median {r['pass_median_s'] * 1000:.1f} ms, "
          f"worst {r['pass_max_s'] * 1000:.1f} ms of CPU")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--make-trace", action="store_true", help="write the trace (seeded) and exit")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--interval", type=float, default=30.0, help="seconds between passes, at most")
    ap.add_argument("--shares", default="a=50,b=30,c=20")
    ap.add_argument("--modes", default="off,on", help="backfill off, on, or both (default)")
    ap.add_argument("--priority", default="basic",
                    help="basic, multifactor, or both (basic,multifactor)")
    ap.add_argument("--half-life", type=float, default=7.0,
                    help="PriorityDecayHalfLife of the usage multifactor weighs, in days")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--dump", type=Path, help=argparse.SUPPRESS)   # every start and reservation
    o = ap.parse_args(argv)
    if o.make_trace:
        n = make_trace(o.trace, o.nodes, hours=o.hours)
        print(f"wrote {n} jobs to {o.trace}")
        return 0
    shares = {k: float(v) / 100 for k, v in (kv.split("=") for kv in o.shares.split(","))}
    trace = load_trace(o.trace, o.hours)
    results = []
    dump = open(o.dump, "w") if o.dump else None
    for prio in o.priority.split(","):
        for mode in o.modes.split(","):
            t0 = time.perf_counter()
            if dump is not None:
                dump.write(f"== {prio} backfill {mode}\n")
            r = simulate(trace, o.nodes, mode == "on", o.interval, o.hours, prio, shares,
                         o.half_life * 86400, dump)
            r["wall_s"] = time.perf_counter() - t0
            report(r, shares)
            results.append(r)
    if len(results) == 2 and results[0]["priority"] == results[1]["priority"]:
        off, on = results
        print(f"\nutilization: {off['utilization'] * 100:.1f}% without backfill, "
              f"{on['utilization'] * 100:.1f}% with it")
    if o.json:
        o.json.write_text(json.dumps(results, indent=1))
    if dump is not None:
        dump.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
