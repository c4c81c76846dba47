"""Time one scheduling pass through the service layer: live state -> snapshot -> core -> commit.

    python bench/service_pass.py                                  # both situations, 10,000 nodes
    python bench/service_pass.py --nodes 10000 --pending 100000 --situation nothing
    python bench/service_pass.py --nodes 10000 --pending 10000 --situation fill --profile

Unlike ``core_pass.py`` (the pure core over hand-built snapshots), this runs
``lingjund.service.scheduling.run_pass`` on a real ``Controller`` over a real
SQLite store: N registered nodes of 8 GPUs and 64 CPUs (each with a stand-in
agent connection whose commands go to an in-memory queue), one partition,
and P pending jobs written as a submission writes them. It times a first
pass (after a fresh start: everything read back from the store) and the
passes after it, split into the snapshot, the core and the commit.

``--gpu-topology``: every agent reported 8 GPU devices (NVLink islands 0-3
and 4-7, NUMA nodes 0 and 1, a NIC per pair), so the snapshot carries each
node's layout (built in the first pass, kept after) and the core packs by it.

``--switch-tree``: [topology] topology/tree over the nodes (leaves of 32, spines
of 8 leaves, one core); ``--gang-nodes N``: in ``fill`` the pending jobs ask N
whole nodes each, so placement goes by switch (single-node jobs do not).

Situations:

- ``nothing``: every node runs a whole-node job; P pending 1-GPU jobs wait
  (Resources, then Priority): no job can start.
- ``fill``: half the nodes run a whole-node job; P pending whole-node jobs:
  the pass starts one job per free node (N/2 starts).

``--limits``: [accounting] enforce = ["limits"]; alice and bob in account
``ml`` (GrpTRES=gres/gpu=10000000, never reached: the chain is checked and
charged), QOS ``normal`` MaxTRESPerUser=gres/gpu=6 x nodes: in ``fill`` alice
holds 4 x nodes GPUs, so a quarter of the nodes start and her other jobs pend
QOSMaxGRESPerUser; in ``nothing`` bob's jobs are under every limit.

Backfill is on, as a controller's default; ``--no-backfill`` turns it off.
With it the first pass also gives up to bf_max_job_test waiting jobs a
reservation and stores them; later passes store only what changed.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lingjun import config, slurm  # noqa: E402
from lingjun.v1 import agent_pb2, api_pb2  # noqa: E402
from lingjund.daemon import tune_gc  # noqa: E402
from lingjund.service import associations, scheduling  # noqa: E402
from lingjund.service.agents import Connection  # noqa: E402
from lingjund.service.context import Controller  # noqa: E402
from lingjund.store.store import Store  # noqa: E402

NOW = 1_000_000.0
GPUS, CPUS, MEM = 8, 64, 512_000


class Sink:
    """A stand-in agent connection: what the controller sends is counted, not sent."""
    def __init__(self) -> None:
        self.sent = 0

    def put_nowait(self, msg) -> None:
        self.sent += 1


def devices() -> list[api_pb2.GpuDevice]:
    return [api_pb2.GpuDevice(index=i, type="h100", numa_node=i // 4, nic=f"mlx5_{i // 2}",
                              nvlink_peers=[j for j in range(4 * (i // 4), 4 * (i // 4) + 4)
                                            if j != i])
            for i in range(GPUS)]


def switch_tree(nodes: int, leaf: int = 32, spine: int = 8) -> str:
    """[topology]: leaves of ``leaf`` nodes, spines over ``spine`` leaves, one core."""
    out = ['[topology]', 'plugin = "topology/tree"']
    leaves = []
    for k, first in enumerate(range(1, nodes + 1, leaf)):
        last = min(first + leaf - 1, nodes)
        leaves.append(f"leaf{k}")
        out += ["[[topology.switch]]", f'name = "leaf{k}"',
                f'nodes = "gpu[{first:05d}-{last:05d}]"']
    spines = []
    for k in range(0, len(leaves), spine):
        spines.append(f"spine{k // spine}")
        out += ["[[topology.switch]]", f'name = "{spines[-1]}"',
                f'switches = "{",".join(leaves[k:k + spine])}"']
    out += ["[[topology.switch]]", 'name = "core"', f'switches = "{",".join(spines)}"']
    return "\n".join(out) + "\n"


def build(tmp: str, nodes: int, pending: int, situation: str,
          gpu_topology: bool = False, backfill: bool = True, tree: bool = False,
          gang_nodes: int = 1, limits: bool = False) -> tuple[Controller, list]:
    names = [f"gpu{i:05d}" for i in range(1, nodes + 1)]
    conf = config.parse(f"""
[controller]
heartbeat_timeout_s = 1e9
[[nodes]]
names = "gpu[00001-{nodes:05d}]"
cpus = {CPUS}
memory_mb = {MEM}
gpus = {GPUS}
[[partitions]]
name = "batch"
nodes = "gpu[00001-{nodes:05d}]"
default = true
[scheduler]
backfill = {"true" if backfill else "false"}
{'[accounting]' + chr(10) + 'enforce = ["limits"]' if limits else ""}
{switch_tree(nodes) if tree else ""}""")
    path = os.path.join(tmp, "db.sqlite")
    store = Store(path, synchronous="OFF", now=NOW)
    inv = agent_pb2.Inventory(cpus=CPUS, real_memory_mb=MEM, gpus=GPUS)
    if gpu_topology:
        inv.gpus_discovered = True
        inv.gpu_devices.extend(devices())
    busy = nodes if situation == "nothing" else nodes // 2
    whole = api_pb2.JobSpec(name="train", user="alice", uid=1000, min_nodes=1, num_tasks=1,
                            cpus_per_task=CPUS, gpus_per_node=8, exclusive=True, batch=True,
                            script="#!/bin/sh\ntrue\n")
    gang = api_pb2.JobSpec(name="train", user="alice", uid=1000, min_nodes=gang_nodes,
                           ntasks_per_node=1, cpus_per_task=CPUS, gpus_per_node=8,
                           exclusive=True, batch=True, script="#!/bin/sh\ntrue\n")
    small = api_pb2.JobSpec(name="eval", user="bob", uid=1001, min_nodes=1, num_tasks=1,
                            cpus_per_task=1, gpus_per_node=1, batch=True,
                            script="#!/bin/sh\ntrue\n")
    if limits:
        for spec in (whole, gang, small):
            spec.account = "ml"
    with store.transaction() as st:
        for n in names:
            st.put_node(n, registered=True, inventory=inv, agent_start_time=NOW, last_seen=NOW)
        for i in range(busy):
            st.insert_job(name="train", user="alice", uid=1000, partition="batch",
                          state=slurm.RUNNING, reason="None", priority=10, submit_time=NOW - 100,
                          start_time=NOW - 50, end_time=NOW + 3600, time_limit_min=60,
                          nodes=(names[i],), cpus_per_node=(CPUS,), mem_per_node=(MEM,),
                          gpus_per_node=(GPUS,), gpu_ids=(tuple(range(GPUS)),),
                          tasks_per_node=(1,), exclusive=True,
                          batch_host=names[i], launched=True, spec=whole)
        spec = small if situation == "nothing" else whole if gang_nodes == 1 else gang
        for i in range(pending):
            st.insert_job(name=spec.name, user=spec.user, uid=spec.uid, partition="batch",
                          state=slurm.PENDING, reason="None", priority=1_000_000 - i,
                          submit_time=NOW - 10, time_limit_min=60, exclusive=spec.exclusive,
                          spec=spec)
    store.close()
    store = Store(path, synchronous="OFF", now=NOW)      # a fresh start: all read back
    ctl = Controller(config=conf, store=store, clock=lambda: NOW)
    if limits:
        def acctmgr(verb, entity, names, **set_):
            associations.acctmgr(ctl, api_pb2.AcctMgrRequest(
                verb=verb, entity=entity, names=names, set=set_, requester_uid=0))
        acctmgr("add", "account", ["ml"], grptres="gres/gpu=10000000")
        acctmgr("add", "user", ["alice", "bob"], account="ml")
        acctmgr("modify", "qos", ["normal"], maxtresperuser=f"gres/gpu={6 * nodes}")
    sinks = []
    for n in names:
        conn = Connection(node=n)
        conn.outbox = Sink()
        sinks.append(conn.outbox)
        ctl.agents.attach(conn)
    return ctl, sinks


def timed_pass(ctl: Controller) -> dict:
    t = {"snapshot": 0.0, "core": 0.0}
    build_snapshot, schedule = scheduling.build_snapshot, scheduling.schedule

    def snap(*a, **k):
        t0 = time.process_time()
        try:
            return build_snapshot(*a, **k)
        finally:
            t["snapshot"] += time.process_time() - t0

    def core(*a, **k):
        t0 = time.process_time()
        try:
            return schedule(*a, **k)
        finally:
            t["core"] += time.process_time() - t0

    scheduling.build_snapshot, scheduling.schedule = snap, core
    try:
        c0, w0 = time.process_time(), time.perf_counter()
        started = scheduling.run_pass(ctl)
        t["cpu"], t["wall"] = time.process_time() - c0, time.perf_counter() - w0
    finally:
        scheduling.build_snapshot, scheduling.schedule = build_snapshot, schedule
    t["rest"] = t["cpu"] - t["snapshot"] - t["core"]
    t["started"] = started
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pending", type=int, nargs="+", default=None)
    ap.add_argument("--situation", nargs="+", default=["nothing", "fill"],
                    choices=["nothing", "fill"])
    ap.add_argument("--passes", type=int, default=3, help="passes after the first")
    ap.add_argument("--profile", action="store_true", help="cProfile the second pass")
    ap.add_argument("--gpu-topology", action="store_true",
                    help="every node reported a GPU layout (two NVLink islands of 4)")
    ap.add_argument("--switch-tree", action="store_true",
                    help="[topology] topology/tree: leaves of 32 nodes, spines of 8 leaves, a core")
    ap.add_argument("--gang-nodes", type=int, default=1,
                    help="fill: pending jobs ask this many whole nodes each (default 1)")
    ap.add_argument("--limits", action="store_true",
                    help="[accounting] enforce limits, with a QOS MaxTRESPerUser (see above)")
    ap.add_argument("--no-backfill", action="store_true",
                    help="[scheduler] backfill = false (sched/builtin), as before backfill")
    args = ap.parse_args()
    for situation in args.situation:
        for pending in args.pending or ([100_000] if situation == "nothing" else [10_000]):
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                ctl, sinks = build(tmp, args.nodes, pending, situation, args.gpu_topology,
                                   not args.no_backfill, args.switch_tree, args.gang_nodes,
                                   args.limits)
                setup = time.perf_counter() - t0
                tune_gc()           # as lingjund does once it has loaded its state
                first = timed_pass(ctl)
                if args.profile:
                    prof = cProfile.Profile()
                    prof.enable()
                later = [timed_pass(ctl) for _ in range(args.passes)]
                if args.profile:
                    prof.disable()
                    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                med = {k: statistics.median(p[k] for p in later)
                       for k in ("cpu", "wall", "snapshot", "core", "rest")}
                print(f"{situation:8s} nodes={args.nodes} pending={pending} setup={setup:.1f}s "
                      f"rss={rss:.0f}MB | first pass: {first['cpu']:.3f}s cpu "
                      f"({first['started']} started; snapshot {first['snapshot']:.3f}, "
                      f"core {first['core']:.3f}, commit+send {first['rest']:.3f}) | "
                      f"later passes (median of {args.passes}): {med['cpu']:.3f}s cpu, "
                      f"{med['wall']:.3f}s wall (snapshot {med['snapshot']:.3f}, "
                      f"core {med['core']:.3f}, rest {med['rest']:.3f}) | "
                      f"messages sent {sum(s.sent for s in sinks)}", flush=True)


if __name__ == "__main__":
    main()
