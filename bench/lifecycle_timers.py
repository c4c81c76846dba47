#!/usr/bin/env python3
"""What the lifecycle's timers cost the scheduler loop at the scale we design for.

Builds a view of NODES nodes (each with an agent stream) and RUNNING running
jobs, every job with a time limit, a --signal warning, a --deadline and a
--hang-timeout (the worst case: every timer live), and times the two pure
calls the loop makes each pass: ``lifecycle.next_deadline`` (when to wake)
and ``lifecycle.decide`` (what is due), at a moment when nothing is due and at
one when a tenth of the jobs reach their time limit. Prints one line per
figure: ``NAME VALUE UNIT`` (median of REPEAT runs).

    python bench/lifecycle_timers.py                  # 10,000 nodes, 10,000 jobs
    python bench/lifecycle_timers.py --nodes 1000 --running 100000
"""
from __future__ import annotations

import argparse
import statistics
import time

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund import lifecycle
from lingjund.store.store import JobRecord, NodeRecord


def build(n_nodes: int, n_running: int, now: float) -> lifecycle.View:
    names = [f"node{i}" for i in range(1, n_nodes + 1)]
    nodes = {n: NodeRecord(n, registered=True, last_seen=now) for n in names}
    streams = {n: now - 1.0 for n in names}
    spec = api_pb2.JobSpec(batch=True, signal=10, signal_time_s=60, hang_timeout_s=600)
    jobs = []
    for i in range(n_running):
        start = now - 3000 + (i % 10) * 300     # a tenth of them end at now + 600
        jobs.append(JobRecord(
            job_id=i + 1, name="j", user="u", uid=1, partition="p", state=slurm.RUNNING,
            reason="", priority=1, submit_time=start, time_limit_min=60, spec=spec,
            start_time=start, end_time=start + 3600, nodes=(names[i % n_nodes],),
            batch_host=names[i % n_nodes], launched=True, deadline=start + 7200))
    return lifecycle.View(holding=tuple(jobs), nodes=nodes, streams=streams,
                          activity={j.job_id: now for j in jobs},
                          limits=lifecycle.Limits(heartbeat_timeout_s=30.0, started_at=0.0))


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--running", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    now = 1_000_000.0
    view = build(a.nodes, a.running, now)
    later = build(a.nodes, a.running, now + 600)    # the same jobs; the agents still beat
    later = lifecycle.View(holding=view.holding, nodes=later.nodes, streams=later.streams,
                           activity=later.activity, limits=later.limits)
    due = lifecycle.next_deadline(view, now)
    quiet = lifecycle.decide(view, now)
    busy = lifecycle.decide(later, now + 600)
    print(f"view {a.nodes} nodes, {a.running} running jobs; next deadline in {due - now:.0f} s; "
          f"due now {len(quiet)}, due at +600 s {len(busy)}")
    print(f"next_deadline {timed(lambda: lifecycle.next_deadline(view, now), a.repeat) * 1e3:.1f} ms")
    print(f"decide_nothing_due {timed(lambda: lifecycle.decide(view, now), a.repeat) * 1e3:.1f} ms")
    print(f"decide_tenth_due {timed(lambda: lifecycle.decide(later, now + 600), a.repeat) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
