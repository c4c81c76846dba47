#!/usr/bin/env python3
"""Node loss to running again: seconds from ``kill -9`` of an agent (and of the
job processes it ran) until the job runs again on nodes without it.

A private local cluster (``lingjun up`` in a temporary folder, 4 nodes,
heartbeat timeout HB seconds, restart backoff BACKOFF seconds; the e2e
tests' ``Cluster`` helper) runs TRIES 2-node ``--requeue`` jobs one after
another, each with an srun step on both nodes. Odd tries lose the batch
host, even tries the other node, so both ways of stopping a gang are timed.
After each try the job is cancelled and the lost agent restarted.

The figure is bounded below by the heartbeat timeout plus the backoff; the
rest is the scheduler pass that notices (every HB/2 s at most), stopping the
survivors, and the start.

    python bench/faulttol_requeue.py               # 5 tries, HB=3, BACKOFF=1
    TRIES=9 HB=5 python bench/faulttol_requeue.py
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lingjun import slurm  # noqa: E402
from tests.e2e.conftest import Cluster  # noqa: E402
from tests.e2e.test_faulttol import lose_node, node_processes, running_on  # noqa: E402


def wait(check, timeout: float, step: float = 0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(step)
    raise SystemExit(f"gave up after {timeout} s")


def main() -> int:
    tries = int(os.environ.get("TRIES", 5))
    hb = float(os.environ.get("HB", 3))
    backoff = float(os.environ.get("BACKOFF", 1))
    with tempfile.TemporaryDirectory(prefix="lingjun-bench-") as tmp:
        c = Cluster(Path(tmp), heartbeat_timeout=hb, up_args=("--restart-backoff", str(backoff)))
        c.up()
        times = []
        try:
            for i in range(tries):
                jid = c.sbatch("-N", "2", "--requeue", "-o", "/dev/null", "--wrap", "srun -N2 sleep 600")
                first = wait(lambda: running_on(c, jid), 30)
                victim = first[0] if i % 2 == 0 else first[1]
                wait(lambda: node_processes(c, victim, jid), 30)
                t0 = time.time()
                lose_node(c, victim, jid)
                second = wait(lambda: (n := running_on(c, jid)) and victim not in n and n, 60)
                took = time.time() - t0
                times.append(took)
                print(f"try {i + 1}: lost {victim} ({'batch host' if i % 2 == 0 else 'other node'}) "
                      f"of {slurm.compress_hostlist(first)} -> running on "
                      f"{slurm.compress_hostlist(second)} after {took:.2f} s", flush=True)
                c.run(["scancel", str(jid)], check=True)
                c.wait_state(jid, ("CANCELLED",), timeout=30)
                c.restart(victim)
                c.wait_nodes_up()
        finally:
            c.down()
    print(f"kill -9 of an agent -> running elsewhere: median {statistics.median(times):.2f} s "
          f"over {len(times)} tries (min {min(times):.2f}, max {max(times):.2f}; "
          f"heartbeat timeout {hb:g} s, backoff {backoff:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
