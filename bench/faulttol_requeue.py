#!/usr/bin/env python3
"""Failure to running again: seconds from a failure until the job runs again
on nodes without the failed one, split into detection and restart.

A private local cluster (``lingjun up`` in a temporary folder; the e2e
tests' ``Cluster`` helper) runs TRIES jobs one after another per case, each
with an srun step on every node of the job. Cases (CASES, comma-separated):

    lost            2-node --requeue job, 4 nodes; kill -9 of one node's agent
                    and of the job processes it ran (odd tries the batch host,
                    even tries the other node); backoff BACKOFF s
    lost-expedite   the same with --requeue=expedite, 5 nodes, one a spare
                    (spare_nodes = 1): no backoff, the restart takes the spare
    straggler       4-node --requeue=expedite --hang-timeout=HANG job, 5 nodes,
                    one a spare; SIGSTOP of rank 2's task (the others beat on)

Detection: the failure until the controller acts on it (its log line "node
lost" or "hang"); bounded below by the heartbeat timeout HB (lost) or the
hang timeout plus a heartbeat interval (straggler). Restart: from then until
the job's next attempt starts (its log line "attempt N started"): stopping
the survivors, their cleanup, the backoff, the scheduler pass and the start.
Both are read from the controller's log (millisecond stamps), not from
polling commands.

    python bench/faulttol_requeue.py          # 5 tries per case, HB=3, BACKOFF=1, HANG=4
    TRIES=9 CASES=lost-expedite python bench/faulttol_requeue.py
"""
from __future__ import annotations

import datetime
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lingjun import slurm  # noqa: E402
from tests.e2e.conftest import Cluster  # noqa: E402
from tests.e2e.test_faulttol import lose_node, node_processes, running_on  # noqa: E402

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")

RANK_LOOP = """\
import lingjun.heartbeat, time
lingjun.heartbeat.start(0.5)
time.sleep(600)
"""


def wait(check, timeout: float, step: float = 0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(step)
    raise SystemExit(f"gave up after {timeout} s")


def log_time(c: Cluster, pattern: str, after: float) -> float | None:
    """The first controller log line at or after ``after`` matching ``pattern``."""
    text = (c.state / "logs" / "lingjund.log").read_text(errors="replace")
    for line in text.splitlines():
        m = STAMP.match(line)
        if m and re.search(pattern, line):
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if t >= after - 0.001:
                return t
    return None


def rank_task(c: Cluster, job_id: int, rank: int):
    import psutil
    for p in psutil.process_iter():
        try:
            env = p.environ()
            if (env.get("SLURM_JOB_ID") == str(job_id) and env.get("SLURM_PROCID") == str(rank)
                    and "rank_loop.py" in " ".join(p.cmdline())):
                return p, env["SLURMD_NODENAME"]
        except psutil.Error:
            continue
    return None


def run_case(case: str, tries: int, hb: float, backoff: float, hang: int) -> list[tuple[float, float]]:
    spare = case != "lost"
    nodes = 5 if spare else 4
    up = ["--restart-backoff", str(backoff)]
    if spare:
        up += ["--spare-nodes", "1"]
    out = []
    with tempfile.TemporaryDirectory(prefix="lingjun-bench-") as tmp:
        c = Cluster(Path(tmp), nodes=nodes, heartbeat_timeout=hb, up_args=tuple(up))
        c.up()
        (c.work / "rank_loop.py").write_text(RANK_LOOP)
        try:
            for i in range(tries):
                if case == "straggler":
                    jid = c.sbatch("-N", "4", "--requeue=expedite", f"--hang-timeout=0:{hang:02d}",
                                   "-o", "/dev/null", "--wrap",
                                   f"srun -N4 -n4 {sys.executable} rank_loop.py")
                else:
                    jid = c.sbatch("-N", "2", "--requeue=expedite" if spare else "--requeue",
                                   "-o", "/dev/null", "--wrap", "srun -N2 sleep 600")
                first = wait(lambda: running_on(c, jid), 30)
                if case == "straggler":
                    proc, victim = wait(lambda: rank_task(c, jid, 2), 30)
                    time.sleep(1.0)          # every rank beating
                    t0 = time.time()
                    proc.send_signal(signal.SIGSTOP)
                    detect_pat = rf"job={jid} hang: rank 2 on {victim}"
                else:
                    victim = first[0] if i % 2 == 0 else first[1]
                    wait(lambda: node_processes(c, victim, jid), 30)
                    t0 = time.time()
                    lose_node(c, victim, jid)
                    detect_pat = rf"job={jid} node={victim}: node lost"
                second = wait(lambda: (n := running_on(c, jid)) and victim not in n and n, 90)
                started = wait(lambda: log_time(c, rf"job={jid} restarted: attempt", t0), 10)
                detected = log_time(c, detect_pat, t0)
                out.append((detected - t0, started - detected))
                print(f"{case} try {i + 1}: {victim} of {slurm.compress_hostlist(first)} -> "
                      f"{slurm.compress_hostlist(second)}: detected {detected - t0:.2f} s, "
                      f"restarted {started - detected:.2f} s later, total {started - t0:.2f} s",
                      flush=True)
                c.run(["scancel", str(jid)], check=True)
                c.wait_state(jid, ("CANCELLED",), timeout=30)
                if case == "straggler":
                    c.run(["scontrol", "update", f"NodeName={victim}", "State=RESUME"])
                else:
                    c.restart(victim)
                c.wait_nodes_up()
                wait(lambda: "drain" not in c.run(["sinfo", "-h", "-N", "-o", "%t"]).stdout, 30)
        finally:
            c.down()
    return out


def main() -> int:
    tries = int(os.environ.get("TRIES", 5))
    hb = float(os.environ.get("HB", 3))
    backoff = float(os.environ.get("BACKOFF", 1))
    hang = int(os.environ.get("HANG", 4))
    cases = os.environ.get("CASES", "lost,lost-expedite,straggler").split(",")
    summary = []
    for case in cases:
        got = run_case(case, tries, hb, backoff, hang)
        det = statistics.median(d for d, _ in got)
        res = statistics.median(r for _, r in got)
        tot = statistics.median(d + r for d, r in got)
        summary.append(f"{case:14s} median over {len(got)} tries: failure -> running {tot:.2f} s "
                       f"= detection {det:.2f} s + restart {res:.2f} s "
                       f"(total min {min(d + r for d, r in got):.2f}, "
                       f"max {max(d + r for d, r in got):.2f})")
    print(f"heartbeat timeout {hb:g} s, backoff {backoff:g} s (lost only), hang timeout {hang} s")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
