#!/usr/bin/env python3
"""Preemption latency on a private local cluster (issue 7, show 4's timings).

Each try: a 4-node ``--exclusive --requeue`` job in partition ``low`` (tier 1,
REQUEUE, GraceTime GRACE s) runs with a USR1 trap; a 2-node job arrives in
``high`` (tier 2). Measured from the high job's ``sbatch``:

  - to the victim's trap (its --signal at preemption), from the time the trap
    itself writes;
  - to the high job RUNNING (polled with squeue every 50 ms).

Beside the tries, on node5, one ``-t 1 --signal=B:USR1@5`` job (show 3):
how long before its one-minute limit its trap ran (want 5 s).

The trap exits at once, so the second figure is the controller's round
trip (requeue, cleanup, next pass), not GRACE. With ``--stubborn`` the trap
only notes the signal and the job runs on: then the high job waits for
GRACE and the kill. Prints one line per try and the median.

    python bench/preempt_latency.py              # 5 tries, grace 3 s
    python bench/preempt_latency.py --tries 3 --grace 1 --stubborn
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = str(Path(sys.executable).parent)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=5)
    ap.add_argument("--grace", type=float, default=3.0)
    ap.add_argument("--stubborn", action="store_true", help="the victim ignores its signal")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lingjun-preempt-bench-"))
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               LINGJUN_HOME=str(root / "home"))
    env.pop("LINGJUN_CONF", None)
    port = free_port()
    env["LINGJUN_CONTROLLER"] = f"127.0.0.1:{port}"
    extra = root / "extra.toml"
    extra.write_text(f"""
[preempt]
type = "partition_prio"
mode = "REQUEUE"
[[partitions]]
name = "low"
nodes = "node[1-4]"
grace_time_s = {args.grace}
[[partitions]]
name = "high"
nodes = "node[1-4]"
priority_tier = 2
preempt_mode = "OFF"
""")

    def run(*cmd: str) -> str:
        return subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip()

    def state(jid: str) -> str:
        return run("squeue", "-h", "-t", "all", "-j", jid, "-o", "%T")

    def wait(pred, timeout: float = 60.0, step: float = 0.05) -> None:
        end = time.time() + timeout
        while time.time() < end:
            if pred():
                return
            time.sleep(step)
        raise SystemExit("timed out")

    run("lingjun", "up", "--nodes", "5", "--cpus", "2", "--state-dir", str(root / "state"),
        "--port", str(port), "--kill-wait", "2", "--extra-config", str(extra))
    to_trap, to_start = [], []
    warn_log = root / "warn.log"
    warn = root / "warn.sh"
    warn.write_text("#!/bin/bash\n#SBATCH -w node5 -t 1 --signal=B:USR1@5\n"
                    f"trap 'echo trap $(date +%s.%N) >> {warn_log}; exit 0' USR1\n"
                    f"echo start $(date +%s.%N) >> {warn_log}\n"
                    "while true; do sleep 0.05; done\n")
    try:
        run("sbatch", "-o", "/dev/null", str(warn))
        for i in range(args.tries):
            log = root / f"victim{i}.log"
            script = root / f"victim{i}.sh"
            script.write_text("#!/bin/bash\n#SBATCH -p low -N 4 --exclusive --requeue "
                              "--signal=B:USR1@30 -t 10\n"
                              '[ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] && exit 0\n'
                              f"trap 'echo $(date +%s.%N) > {log}{'' if args.stubborn else '; exit 0'}' USR1\n"
                              f"touch {log}.started\n"
                              "while true; do sleep 0.05; done\n")
            victim = run("sbatch", "--parsable", "-o", "/dev/null", str(script))
            wait(lambda: Path(f"{log}.started").exists())
            t0 = time.time()
            high = run("sbatch", "--parsable", "-p", "high", "-N", "2", "-o", "/dev/null",
                       "--wrap", "sleep 1")
            wait(lambda: state(high) == "RUNNING")
            started = time.time() - t0
            wait(lambda: log.exists() and log.read_text().strip() != "")
            trapped = float(log.read_text()) - t0
            to_trap.append(trapped)
            to_start.append(started)
            print(f"try {i + 1}: trap {trapped:.2f} s, high job running {started:.2f} s", flush=True)
            wait(lambda: state(victim) == "COMPLETED" and state(high) == "COMPLETED")
        wait(lambda: "trap" in warn_log.read_text(), timeout=90, step=0.5)
        marks = dict(line.split() for line in warn_log.read_text().splitlines())
        before = 60 - (float(marks["trap"]) - float(marks["start"]))
    finally:
        subprocess.run(["lingjun", "down", "--state-dir", str(root / "state")], env=env,
                       capture_output=True, timeout=90)
    print(f"median over {args.tries}: submit -> victim trap {statistics.median(to_trap):.2f} s, "
          f"submit -> high job RUNNING {statistics.median(to_start):.2f} s (grace {args.grace:g} s"
          f"{', victim ignores its signal' if args.stubborn else ''})")
    print(f"--signal=B:USR1@5 -t 1: trap {before:.2f} s before the limit "
          f"({60 - before:.2f} s after the script started)")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
