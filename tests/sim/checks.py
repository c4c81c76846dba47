"""What the scenarios assert, over the controller's own records (JobInfo, as
squeue and sacct print them): whole gangs, no node given more than it has."""
from __future__ import annotations

import collections

from lingjun import slurm
from lingjun.v1 import api_pb2

GPUS_PER_NODE = 8


def partial_gangs(jobs: list[api_pb2.JobInfo], want_nodes: dict[int, int]) -> list[str]:
    """Jobs that run (or ran) on other than the number of nodes they asked for."""
    bad = []
    for j in jobs:
        want = want_nodes.get(j.array_job_id or j.job_id)
        if want is None or j.state == slurm.PENDING or not j.start_time:
            continue
        if len(j.node_names) != want or len(set(j.node_names)) != want:
            bad.append(f"job {j.job_id} ({j.name}) {j.state}: want {want} nodes, "
                       f"got {len(set(j.node_names))}: {j.nodes}")
    return bad


def overbooked_now(running: list[api_pb2.JobInfo]) -> list[str]:
    """Nodes that the running jobs of one moment hold more GPUs of than exist."""
    used: dict[str, int] = collections.Counter()
    for j in running:
        for n in j.node_names:
            used[n] += j.gpus_per_node
    return [f"{n}: {g} GPUs held of {GPUS_PER_NODE}" for n, g in used.items() if g > GPUS_PER_NODE]


def overbooked_history(jobs: list[api_pb2.JobInfo]) -> list[str]:
    """Nodes whose GPUs were held past their count at some moment, from each
    run's start and end (a run that ends at t frees its GPUs before one that
    starts at t takes them: the times are whole seconds)."""
    events: dict[str, list[tuple[int, int, int]]] = collections.defaultdict(list)
    for j in jobs:
        if not j.start_time or not j.end_time:
            continue
        for n in j.node_names:
            events[n].append((j.start_time, 1, j.gpus_per_node))
            events[n].append((j.end_time, 0, -j.gpus_per_node))
    bad = []
    for n, evs in events.items():
        held = 0
        for t, _, d in sorted(evs):
            held += d
            if held > GPUS_PER_NODE:
                bad.append(f"{n}: {held} GPUs held at {t}")
                break
    return bad
