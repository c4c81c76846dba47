"""What a job's cgroups cost a supervisor per job on this machine.

    .venv/bin/python bench/cgroup_setup.py [--jobs 100]

For each job, under a parent this run owns and removes: ``create`` (freezer
only, then with limits: memory, cpuset, devices, pids, cpuacct), the batch
step's cgroup below it (``create_step``, in every hierarchy the job is in),
start ``true`` inside the step's, wait for it, read the step's ``oom_kills``
and ``usage``, ``kill`` and ``remove`` the job (its step with it). Prints the median, p90 and max of each phase in milliseconds
(``SYSTEM NAME VALUE UNIT`` lines, as bench/throughput.py does). Needs root
and the v1 hierarchies.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
import uuid

from lingjun_agent.launcher import cgroups


def _ms(xs: list[float]) -> tuple[float, float, float]:
    xs = sorted(xs)
    return (statistics.median(xs) * 1e3, xs[int(len(xs) * 0.9) - 1] * 1e3, xs[-1] * 1e3)


def run(jobs: int, limits: cgroups.Limits | None) -> dict[str, list[float]]:
    base = cgroups.FREEZER / f"lingjun-bench-{uuid.uuid4().hex[:8]}"
    phases: dict[str, list[float]] = {"create": [], "create_step": [], "start+wait": [],
                                      "read": [], "kill+remove": []}
    try:
        for j in range(jobs):
            t0 = time.perf_counter()
            cg = cgroups.create("bench", j, base, limits)
            t1 = time.perf_counter()
            step = cgroups.create_step(cg, "batch", limits)
            t2 = time.perf_counter()
            with cgroups.inside(step):
                p = subprocess.Popen(["true"])
            p.wait()
            t3 = time.perf_counter()
            cgroups.oom_kills(step)
            cgroups.usage(step)
            t4 = time.perf_counter()
            cgroups.kill(cg)
            cgroups.remove(cg)
            t5 = time.perf_counter()
            for name, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                phases[name].append(dt)
    finally:
        cgroups.remove_node("bench", base)
        rel = base.relative_to(cgroups.FREEZER)
        for h in ("freezer", *cgroups.LIMITED):
            try:
                os.rmdir(cgroups.ROOT / h / rel)
            except OSError:
                pass
    return phases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100)
    args = ap.parse_args()
    if not cgroups.available():
        print("lingjun cgroups not available here (needs root and the v1 freezer)")
        return
    host = tuple(sorted(os.sched_getaffinity(0)))
    full = cgroups.Limits(memory_bytes=100 << 20, cpus=host[:1], cpu_ids=(0,),
                          deny_devices=("c 195:0",))
    for label, limits in (("freezer", None), ("limited", full)):
        for phase, xs in run(args.jobs, limits).items():
            med, p90, top = _ms(xs)
            print(f"lingjun cgroup_{label}_{phase}_median {med:.2f} ms")
            print(f"lingjun cgroup_{label}_{phase}_p90 {p90:.2f} ms")
            print(f"lingjun cgroup_{label}_{phase}_max {top:.2f} ms")


if __name__ == "__main__":
    main()
