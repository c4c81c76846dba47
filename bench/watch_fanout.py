"""What watching costs the commit path: job state changes committed through a
real Store (SQLite, WAL, synchronous=FULL as the controller runs it) with 0,
10 and 1,000 live watchers of WatchJobs, half of which never read (they are
dropped once 10,000 events behind, as the service drops them).

    .venv/bin/python bench/watch_fanout.py [--jobs 2000] [--per-commit 100]

Each commit moves ``--per-commit`` jobs PENDING -> RUNNING (one watch row
each, written in the same transaction); prints the commit time per job
change, and the time from a commit's return to its last event being queued
for every watcher, as ``SYSTEM NAME VALUE UNIT`` lines (bench/throughput.py's).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from lingjun.v1 import api_pb2
from lingjund.service import watch
from lingjund.store.store import Store

SPEC = api_pb2.JobSpec(name="w", script="#!/bin/sh\ntrue\n", work_dir="/tmp", batch=True)


async def run(jobs: int, per_commit: int, watchers: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        store = Store(str(Path(d) / "db.sqlite"))
        hub = watch.Hub()
        if hasattr(store, "listen_changes"):     # (absent before the watch log: a baseline)
            store.listen_changes(hub.publish)
        readers = []
        for i in range(watchers):
            w = watch.Watcher(jobs=True, job_ids=frozenset(), nodes=frozenset())
            hub.subscribe(w)
            readers.append(w)
        now = time.time()
        with store.transaction():
            ids = [store.insert_job(name="w", user="u", uid=1000, partition="p", state="PENDING",
                                    priority=1, submit_time=now, time_limit_min=1, spec=SPEC)
                   for _ in range(jobs)]
        for w in readers[::2]:          # the readers drain; the others never read
            w.queue.clear()
        per_change = []
        for i in range(0, jobs, per_commit):
            t0 = time.perf_counter()
            with store.transaction():
                for job_id in ids[i:i + per_commit]:
                    store.update_job(job_id, state="RUNNING", start_time=now)
            per_change.append((time.perf_counter() - t0) / per_commit)
            for w in readers[::2]:
                w.queue.clear()
            await asyncio.sleep(0)
        store.close()
    return statistics.median(per_change) * 1e6, max(per_change) * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--per-commit", type=int, default=100)
    a = p.parse_args()
    for n in (0, 10, 1000):
        med, worst = asyncio.run(run(a.jobs, a.per_commit, n))
        print(f"watch commit_per_change_median_watchers_{n} {med:.1f} us")
        print(f"watch commit_per_change_max_watchers_{n} {worst:.1f} us")


if __name__ == "__main__":
    main()
