"""Time one pass of the pure scheduling core over hand-built snapshots.

    python bench/core_pass.py                           # the whole N x P grid
    python bench/core_pass.py --nodes 10000 --pending 100000 --situation nothing
    python bench/core_pass.py --timeout 150 --repeat 3
    python bench/core_pass.py --nodes 10000 --pending 100000 --backfill

Each grid point builds a ``Snapshot`` with the core's own types (no
controller, no store) and times ``schedule(snapshot, now)`` alone, in a
child process of its own (so one point's memory does not weigh on the next
and a point that runs past ``--timeout`` is cut off and shown as ``> T s``).

The cluster: N nodes of 8 GPUs, 128 CPUs and 1 TB each, typed ``h100`` with
feature ``ib``; partition ``batch`` holds every node, ``debug`` (a tenth of
them, MaxTime 60 min) overlaps it. The queue: P pending jobs (array tasks
count one each), a seeded mix of 1-GPU jobs, whole-node 8-GPU jobs, 8-, 64-
and 256-node gangs of 8 GPUs per node, arrays of 1-GPU tasks, plus a few
held, dependent and GPU-type-constrained jobs; priorities random (seeded),
so gangs and small jobs interleave.

``--gpu-topology`` gives every node a GPU layout (NVLink islands 0-3 and
4-7 on NUMA nodes 0 and 1, one NIC per pair), so the core packs devices by
topology; without it the nodes report none and get the lowest free indices.

Situations:

- ``nothing``: every node is fully allocated by running jobs, so nothing can
  start; the pass only decides reasons.
- ``fill``: every node is idle; the pass starts what fits in priority order
  until a job that does not fit blocks its partition.

``--lend`` spreads the jobs over 100 accounts, each with GrpTRES of half
its even share of the GPUs, and turns lending idle quota on
(``sched/lending.py``): in ``nothing`` half the running jobs are borrowed
(every job that does not fit asks which of them to preempt), in ``fill``
the jobs past their account's quota borrow what the others left.

``--backfill`` runs the pass with sched/backfill at Slurm's defaults
(``sched/backfill.py``): the jobs that cannot start get reservations (up to
bf_max_job_test of them) and lower jobs start in front of them where they may.

Prints one line per point as it goes, then a Markdown table of medians:
wall-clock time of the pass and the CPU time the process spent in it (on a
shared machine the second says what the pass costs, the first what it took).
``requests`` counts what the core walks: an array's pending tasks are one
request (``--no-arrays`` makes every pending job a request of its own,
``--no-gangs`` puts whole-node jobs where the gangs were, so a fill starts
nearly every job).
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lingjund.sched.backfill import Backfill  # noqa: E402
from lingjund.sched import limits as L  # noqa: E402
from lingjund.sched.cycle import schedule  # noqa: E402
from lingjund.sched.gpu_topology import GpuTopology  # noqa: E402
from lingjund.sched.plugins import DEFAULT_PROFILE  # noqa: E402
from lingjund.sched.snapshot import (UNLIMITED, JobRequest, NodeView, PartitionView,  # noqa: E402
                                     RunningJob, Snapshot)

NOW = 1_000_000.0
GPUS, CPUS, MEM = 8, 128, 1_024_000
GRID_NODES = (100, 1_000, 10_000)
GRID_PENDING = (1_000, 10_000, 100_000)
SITUATIONS = ("nothing", "fill")


def topology() -> GpuTopology:
    """An 8-GPU board: NVLink islands 0-3 and 4-7, NUMA nodes 0 and 1, a NIC per pair."""
    peers = [[j for j in range(4 * (i // 4), 4 * (i // 4) + 4) if j != i] for i in range(GPUS)]
    return GpuTopology.build(GPUS, peers, [i // 4 for i in range(GPUS)],
                             [f"mlx5_{i // 2}" for i in range(GPUS)])


def build(nodes: int, pending: int, situation: str, seed: int = 14,
          arrays: bool = True, gangs: bool = True, gpu_topology: bool = False) -> Snapshot:
    """The snapshot of one grid point; the same arguments give the same snapshot."""
    rnd = random.Random(seed)
    names = [f"gpu{i:05d}" for i in range(1, nodes + 1)]
    debug = names[: max(1, nodes // 10)]
    in_debug = set(debug)
    full = situation == "nothing"
    views, running = [], []
    for i, name in enumerate(names):
        parts = ("batch", "debug") if name in in_debug else ("batch",)
        views.append(NodeView(
            name=name, cpus=CPUS, memory_mb=MEM, gpus=GPUS,
            alloc_cpus=CPUS if full else 0, alloc_memory_mb=MEM // 2 if full else 0,
            alloc_gpus=GPUS if full else 0, running_jobs=1 if full else 0,
            alloc_gpu_ids=tuple(range(GPUS)) if full else (),
            partitions=parts, features=("ib",), gpu_type="h100",
            gpu_topology=topology() if gpu_topology else None))
        if full:
            running.append(RunningJob(job_id=10_000_000 + i, nodes=(name,), end_time=NOW + 3600,
                                      cpus_per_node=(CPUS,), mem_per_node_mb=(MEM // 2,),
                                      gpus_per_node=(GPUS,), partition="batch",
                                      gpu_ids_per_node=(tuple(range(GPUS)),),
                                      start_time=NOW - 60))
    partitions = (
        PartitionView(name="batch", nodes=tuple(names), default=True,
                      total_cpus=CPUS * nodes),
        PartitionView(name="debug", nodes=tuple(debug), max_time_min=60,
                      total_cpus=CPUS * len(debug)),
    )
    jobs: list[JobRequest] = []
    counted = 0
    job_id = 1
    while counted < pending:
        kind = rnd.random()
        common = dict(job_id=job_id, priority=rnd.randint(1, 10_000),
                      submit_time=NOW - 100_000 + job_id, time_limit_min=rnd.choice((30, 60, 240)))
        if kind < 0.02:
            common["held"] = True
        elif kind < 0.04:
            common["dependency"] = "Dependency"
        part = "debug" if rnd.random() < 0.1 else "batch"
        shape = rnd.random()
        if shape < 0.60:        # one GPU, its share of CPUs and memory
            j = JobRequest(partition=part, cpus_per_task=16, gpus_per_node=1,
                           mem_per_node_mb=64_000,
                           gpu_type="h100" if rnd.random() < 0.1 else "", **common)
            n = 1
        elif shape < 0.80:      # one whole node
            j = JobRequest(partition=part, ntasks_per_node=8, cpus_per_task=16,
                           gpus_per_node=GPUS, mem_per_node_mb=0, **common)
            n = 1
        elif shape < 0.90 and arrays:      # an array of 1-GPU tasks
            k = min(rnd.choice((10, 50, 100)), pending - counted)
            j = JobRequest(partition=part, cpus_per_task=16, gpus_per_node=1,
                           mem_per_node_mb=64_000, array_tasks=tuple(range(k)),
                           array_slots=rnd.choice((UNLIMITED, UNLIMITED, 20)), **common)
            n = k
        elif not gangs:         # no gangs: one whole node instead
            j = JobRequest(partition=part, ntasks_per_node=8, cpus_per_task=16,
                           gpus_per_node=GPUS, mem_per_node_mb=0, **common)
            n = 1
        else:                   # a gang of whole 8-GPU nodes
            size = rnd.choices((8, 64, 256), weights=(0.80, 0.15, 0.05))[0]
            j = JobRequest(partition="batch", min_nodes=size, ntasks_per_node=8,
                           cpus_per_task=16, gpus_per_node=GPUS, mem_per_node_mb=512_000,
                           constraint="ib" if rnd.random() < 0.5 else "", **common)
            n = 1
        jobs.append(j)
        counted += n
        job_id += 1
    return Snapshot(nodes=tuple(views), partitions=partitions, pending=tuple(jobs),
                    running=tuple(running))


ACCOUNTS = 100


def with_lending(snap: Snapshot, nodes: int, seed: int = 16) -> Snapshot:
    """``snap`` with its jobs spread over ACCOUNTS accounts, each with GrpTRES
    gres/gpu of half its even share, half the running jobs borrowed, lending on."""
    rnd = random.Random(seed)
    quota = max(1, nodes * GPUS // ACCOUNTS // 2)
    names = [f"acct{i}" for i in range(ACCOUNTS)]
    pending = tuple(replace(j, account=rnd.choice(names), user="u") for j in snap.pending)
    running = tuple(replace(r, account=rnd.choice(names), borrowed=rnd.random() < 0.5)
                    for r in snap.running)
    usage: dict = {}
    for r in running:
        L.add_usage(usage, (("assoc", r.account, "u"),),
                    (sum(r.cpus_per_node), len(r.nodes), sum(r.gpus_per_node)), r.borrowed)
    limits = L.Limits(assoc={(a, "u"): ((("assoc", a, "u"), L.assoc_grp(gpu=quota)),)
                             for a in names},
                      chain={(a, "u"): (("assoc", a, "u"),) for a in names},
                      usage={k: tuple(v) for k, v in usage.items()}, lend=True)
    return replace(snap, pending=pending, running=running, limits=limits)


def one_point(nodes: int, pending: int, situation: str, repeat: int, once_above: float,
              arrays: bool = True, gangs: bool = True, gpu_topology: bool = False,
              backfill: bool = False, lend: bool = False) -> dict:
    snap = build(nodes, pending, situation, arrays=arrays, gangs=gangs, gpu_topology=gpu_topology)
    if lend:
        snap = with_lending(snap, nodes)
    profile = replace(DEFAULT_PROFILE, backfill=Backfill()) if backfill else DEFAULT_PROFILE
    times, cpu, starts, reserved = [], [], 0, 0
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        plan = schedule(snap, NOW, profile)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        starts, reserved = len(plan.starts), len(plan.expected)
        borrowed, preempted = sum(s.borrowed for s in plan.starts), len(plan.preemptions)
        if times[-1] > once_above:
            break
    return {"nodes": nodes, "pending": pending, "requests": len(snap.pending),
            "situation": situation, "starts": starts, "backfill": backfill,
            "reserved": reserved, "lend": lend, "borrowed": borrowed, "preempted": preempted,
            "median_s": statistics.median(times), "median_cpu_s": statistics.median(cpu),
            "runs": len(times)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="*", default=list(GRID_NODES))
    ap.add_argument("--pending", type=int, nargs="*", default=list(GRID_PENDING))
    ap.add_argument("--situation", nargs="*", choices=SITUATIONS, default=list(SITUATIONS))
    ap.add_argument("--repeat", type=int, default=3, help="passes per point (median shown)")
    ap.add_argument("--once-above", type=float, default=5.0,
                    help="stop repeating a point once a pass took longer than this (s)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="give up on a point after this long, building its snapshot included (s)")
    ap.add_argument("--no-arrays", action="store_true",
                    help="no arrays in the mix: every pending job is a request of its own")
    ap.add_argument("--no-gangs", action="store_true",
                    help="no multi-node gangs in the mix (whole-node jobs instead)")
    ap.add_argument("--gpu-topology", action="store_true",
                    help="every node reports a GPU layout (two NVLink islands of 4)")
    ap.add_argument("--backfill", action="store_true",
                    help="schedule with sched/backfill (Slurm's default parameters)")
    ap.add_argument("--lend", action="store_true",
                    help="100 accounts with GPU quotas, lending idle quota on")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        print(json.dumps(one_point(args.nodes[0], args.pending[0], args.situation[0],
                                   args.repeat, args.once_above, not args.no_arrays,
                                   not args.no_gangs, args.gpu_topology, args.backfill,
                                   args.lend)))
        return 0

    rows = []
    for situation in args.situation:
        for n in args.nodes:
            for p in args.pending:
                cmd = [sys.executable, __file__, "--child", "--nodes", str(n), "--pending", str(p),
                       "--situation", situation, "--repeat", str(args.repeat),
                       "--once-above", str(args.once_above)]
                cmd += ["--no-arrays"] if args.no_arrays else []
                cmd += ["--no-gangs"] if args.no_gangs else []
                cmd += ["--gpu-topology"] if args.gpu_topology else []
                cmd += ["--backfill"] if args.backfill else []
                cmd += ["--lend"] if args.lend else []
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                         timeout=args.timeout)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                except subprocess.TimeoutExpired:
                    row = {"nodes": n, "pending": p, "requests": None, "situation": situation,
                           "starts": None, "median_s": None, "median_cpu_s": None, "runs": 0}
                except subprocess.CalledProcessError as e:
                    print(e.stderr, file=sys.stderr)
                    raise
                rows.append(row)
                print(json.dumps(row), flush=True)

    print()
    print("| nodes | pending | requests | situation | starts | one pass (median) | CPU (median) "
          "| passes |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        took = (f"> {args.timeout:.0f} s (cut off)" if r["median_s"] is None
                else f"{r['median_s']:.3f} s")
        starts = "?" if r["starts"] is None else f"{r['starts']:,}"
        requests = "?" if r["requests"] is None else f"{r['requests']:,}"
        cpu = "?" if r.get("median_cpu_s") is None else f"{r['median_cpu_s']:.3f} s"
        print(f"| {r['nodes']:,} | {r['pending']:,} | {requests} | {r['situation']} | {starts} "
              f"| {took} | {cpu} | {r['runs']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
