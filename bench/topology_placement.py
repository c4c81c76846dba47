"""How many leaf switches a 64-node gang spans, with topology/tree and without.

    python bench/topology_placement.py                      # 1,000 nodes, 32 per leaf
    python bench/topology_placement.py --nodes 200 --leaf 16 --gangs 10 --small 60

Runs the same workload twice on the simulator (bench/sim: a real lingjund,
simulated agents speaking the real protocol): once with a 3-level tree
(``--leaf`` nodes per leaf switch, ``--spine`` leaves per spine switch, one
core switch over the spines) and once with topology/default. The workload:
``--gangs`` gangs of ``--gang-nodes`` nodes x 8 GPUs, a third of them with
``--switches=2@10:00``, and ``--small`` smaller jobs (1-4 nodes, 1-8 GPUs)
arriving among them, so that gangs meet a fragmented cluster. From the
accounting records (sacct's) it prints, per run, the mean and the spread of
the leaves each gang spanned (counted over the same tree in both runs), and
checks that no --switches gang that started within its wait spanned more
leaves than it asked (a failure exits 1).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sim import workload  # noqa: E402
from bench.sim.cluster import SimCluster  # noqa: E402
from bench.sim.controller import ClusterShape  # noqa: E402
from bench.sim.replay import Replay, accounting, job_ids, wait_finished  # noqa: E402
from lingjun import slurm  # noqa: E402
from lingjun.topology import Topology  # noqa: E402

SWITCH_WAIT_S = 600


def tree(nodes: int, leaf: int, spine: int) -> tuple[str, Topology]:
    """The TOML of a 3-level tree over node[1-nodes], and its index."""
    leaves = []
    for k, first in enumerate(range(1, nodes + 1, leaf)):
        leaves.append((f"leaf{k}", f"node[{first}-{min(first + leaf - 1, nodes)}]"))
    spines = []
    for k in range(0, len(leaves), spine):
        spines.append((f"spine{k // spine}", [name for name, _ in leaves[k:k + spine]]))
    toml = ['[topology]', 'plugin = "topology/tree"']
    entries = []
    for name, hosts in leaves:
        toml += ["[[topology.switch]]", f'name = "{name}"', f'nodes = "{hosts}"']
        entries.append((name, tuple(slurm.expand_hostlist(hosts)), (), 1))
    for name, kids in spines:
        toml += ["[[topology.switch]]", f'name = "{name}"', f'switches = "{",".join(kids)}"']
        entries.append((name, (), tuple(kids), 1))
    toml += ["[[topology.switch]]", 'name = "core"',
             f'switches = "{",".join(name for name, _ in spines)}"']
    entries.append(("core", (), tuple(name for name, _ in spines), 1))
    return "\n".join(toml) + "\n", Topology.tree(entries)


def trace(gangs: int, small: int, gang_nodes: int, seed: int) -> list[workload.TraceJob]:
    """Gangs among smaller jobs, arriving over time (seeded: the same for both runs)."""
    rnd = random.Random(seed)
    jobs = []
    t = 0.0
    kinds = ["gang"] * gangs + ["small"] * small
    rnd.shuffle(kinds)
    g = s = 0
    for kind in kinds:
        t += rnd.uniform(0.0, 0.5)
        if kind == "gang":
            g += 1
            jobs.append(workload.TraceJob(
                name=f"gang{g}", submit=round(t, 2), nodes=gang_nodes, gpus=8,
                run=rnd.uniform(15, 30), switches=f"2@{SWITCH_WAIT_S // 60}:00" if g % 3 == 0 else ""))
        else:
            s += 1
            jobs.append(workload.TraceJob(
                name=f"small{s}", submit=round(t, 2), nodes=rnd.choice([1, 1, 1, 2, 4]),
                gpus=rnd.choice([1, 2, 8]), run=rnd.uniform(5, 40)))
    return jobs


def run(root: Path, nodes: int, extra: str, jobs: list[workload.TraceJob], timeout: float):
    """Replay ``jobs`` on a simulated cluster; the accounting records of all of them."""
    shape = ClusterShape(nodes=nodes, heartbeat_interval_s=5.0, extra=extra,
                         scheduler_interval_s=1.0)
    with SimCluster(root, shape, per_channel=100, register_timeout=600) as cl:
        subs = Replay(cl.api, jobs, clients=4, workdir=root, deadline_s=timeout).run()
        api = cl.api()
        ids = job_ids(subs)
        done = wait_finished(api, ids, timeout)
        records = accounting(api, ids)
        api.close()
    by_name = {j.name: j for j in jobs}
    return [(by_name.get(r.name), r) for r in records], done


def spans(records, topo: Topology, gang_nodes: int) -> tuple[list[int], list[str]]:
    """Leaves per started gang; and each --switches gang that broke its limit within its wait."""
    got, broken = [], []
    for job, r in records:
        if job is None or job.nodes != gang_nodes or not r.nodes:
            continue
        n = topo.leaves_spanned(slurm.expand_hostlist(r.nodes))
        got.append(n)
        if job.switches:
            limit = int(job.switches.split("@")[0])
            waited = r.start_time - max(r.submit_time, r.eligible_time)
            if n > limit and waited < SWITCH_WAIT_S:
                broken.append(f"{r.name} (job {r.job_id}): {n} leaves after {waited} s")
    return got, broken


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="topology_placement.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--leaf", type=int, default=32, help="nodes per leaf switch")
    p.add_argument("--spine", type=int, default=8, help="leaf switches per spine switch")
    p.add_argument("--gangs", type=int, default=40)
    p.add_argument("--gang-nodes", type=int, default=64)
    p.add_argument("--small", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0, help="most seconds per run")
    p.add_argument("--dir", help="state and logs (default: a new temporary folder)")
    args = p.parse_args(argv)
    root = Path(args.dir or tempfile.mkdtemp(prefix="lingjun-topo-"))
    toml, topo = tree(args.nodes, args.leaf, args.spine)
    jobs = trace(args.gangs, args.small, args.gang_nodes, args.seed)
    best = -(-args.gang_nodes // args.leaf)
    print(f"{args.nodes} nodes, {len(topo.leaves)} leaves of {args.leaf}, "
          f"{-(-len(topo.leaves) // args.spine)} spines, 1 core; {args.gangs} gangs of "
          f"{args.gang_nodes} nodes (fewest leaves possible: {best}), {args.small} smaller jobs; "
          f"state in {root}", flush=True)
    failed = False
    for label, extra in (("topology/tree", toml), ("topology/default", "")):
        t0 = time.monotonic()
        records, done = run(root / label.split("/")[1], args.nodes, extra, jobs, args.timeout)
        got, broken = spans(records, topo, args.gang_nodes)
        if not got:
            print(f"{label:17s} no gang started", flush=True)
            failed = True
            continue
        hist = {k: got.count(k) for k in sorted(set(got))}
        print(f"{label:17s} mean leaves per {args.gang_nodes}-node gang "
              f"{statistics.mean(got):.2f} (gangs {len(got)}, min {min(got)}, max {max(got)}, "
              f"leaves:count {hist}); all finished: {done}; {time.monotonic() - t0:.0f} s",
              flush=True)
        if label == "topology/tree":
            if broken:
                failed = True
                print("  --switches broken: " + "; ".join(broken), flush=True)
            else:
                print("  --switches=2 gangs within their wait: none over 2 leaves", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
