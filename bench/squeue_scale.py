#!/usr/bin/env python3
"""squeue's wall time against a big queue, as a user runs it.

For each queue size Q (``--queued``, default 10000 100000) a fresh
controller (a real ``lingjund`` process, real gRPC, real SQLite) is started
over a state store that already holds Q jobs, with NODES (10,000) nodes
configured and none registered, so nothing starts or ends during the run.
The queue is ``--queue held`` (every job held, as submit_scale.py's) or
``--queue mix``: 60% held jobs, 20% running on the nodes (2 per node), 10%
arrays whose pending remainder is 10 tasks (one line each in squeue), 10%
pending on a dependency (held too, so no pass runs over them).

Then, for each format (default; ``-o "%i %T %R"``; ``-l``; ``-O`` with eight
fields), ``squeue`` (the command, output to a pipe) is run RUNS (3) times a
second apart after one untimed warm-up call (the first call after a start
builds the kept encodings): the median wall seconds, min and max, the lines
printed, the controller's CPU seconds per call (user+system time of the
lingjund process over the call, less what it spends idle over as long, as
measured for 5 s before the runs) and squeue's own (user+system of the
command's process): on a shared machine the CPU figures are the steadier.

``--code DIR`` runs lingjund and the commands from another checkout (the
"before" figures: ``--code /work/main``). ``--slurm`` also times the real
Slurm's squeue when ``/usr/bin/scontrol ping`` answers (its queue is
whatever it holds: submit with ``--slurm-submit Q`` first, held jobs).

    python bench/squeue_scale.py                               # after
    python bench/squeue_scale.py --code /work/main             # before
    python bench/squeue_scale.py --queued 100000 --queue mix
    python bench/squeue_scale.py --queued 100000 --against /tmp/main-tree   # both at once
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.submit_scale import Controller  # noqa: E402
from lingjun import slurm  # noqa: E402
from lingjun.v1 import api_pb2  # noqa: E402

FORMATS = {
    "default": [],
    "o_i_T_R": ["-o", "%i %T %R"],
    "long": ["-l"],
    "O_8": ["-O", "JobID,Partition,Name,UserName,State,TimeUsed,NumNodes,ReasonList"],
}


def prefill_mix(nodes: int):
    def prefill(db: str, queued: int) -> None:
        """``queued`` jobs of every kind squeue prints, in one transaction."""
        from lingjund.service.jobs import PRIORITY_BASE, output_paths
        from lingjund.store.store import Store
        st = Store(str(db))
        spec = api_pb2.JobSpec(name="queued", user="bench", uid=os.getuid(), batch=True,
                               hold=True, script="#!/bin/sh\ntrue\n", work_dir="/tmp",
                               command="(wrap)", stdout_pattern="/dev/null", num_tasks=1)
        now = time.time()
        with st.transaction():
            for i in range(queued):
                kind = i % 10
                jid = st.insert_job(name=f"job{kind}", user="bench", uid=spec.uid,
                                    partition="batch", state=slurm.PENDING,
                                    reason=slurm.REASON_HELD_USER, priority=0,
                                    submit_time=now - 600, eligible_time=0.0, time_limit_min=60,
                                    exclusive=False, held=True, spec=spec,
                                    dependency="", deadline=0.0)
                fields = dict(priority=max(PRIORITY_BASE - jid, 1),
                              **output_paths(spec, jid, f"job{kind}"))
                if kind in (0, 1):          # running, two to a node
                    node = f"node{(i // 10 * 2 + kind) % nodes + 1}"
                    fields.update(state=slurm.RUNNING, held=False, reason=slurm.REASON_NONE,
                                  nodes=(node,), cpus_per_node=(1,), tasks_per_node=(1,),
                                  batch_host=node, start_time=now - (i % 3600),
                                  eligible_time=now - 600)
                elif kind == 2:             # an array's pending remainder
                    fields.update(array_job_id=jid, array_task_id=-1, array_task_str="1-10")
                elif kind == 3:
                    fields.update(dependency=f"afterok:{max(1, jid - 3)}",
                                  reason=slurm.REASON_HELD_USER)
                st.update_job(jid, **fields)
        st.close()
    return prefill


def cpu_s(ctl: Controller) -> float:
    t = ctl.ps.cpu_times()
    return t.user + t.system


def idle_cpu_rate(ctl: Controller, seconds: float = 5.0) -> float:
    """The controller's CPU seconds per second with no command running (its
    timers and scheduling passes), taken off each call's CPU figure."""
    c0, t0 = cpu_s(ctl), time.perf_counter()
    time.sleep(seconds)
    return (cpu_s(ctl) - c0) / (time.perf_counter() - t0)


def time_squeue(ctl: Controller, args: list[str], runs: int) -> dict:
    ctl.run("squeue", *args)        # warm-up: builds the kept encodings
    idle = idle_cpu_rate(ctl)
    walls, cpus, client, lines, err = [], [], [], 0, ""
    for _ in range(runs):
        time.sleep(1.0)
        u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        c0, t0 = cpu_s(ctl), time.perf_counter()
        p = ctl.run("squeue", *args)
        walls.append(time.perf_counter() - t0)
        cpus.append(max(0.0, cpu_s(ctl) - c0 - idle * walls[-1]))
        u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        client.append(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime)
        lines = p.stdout.count("\n")
        if p.returncode != 0:
            err = p.stderr.strip()[:200]
            break
    walls.sort()
    cpus.sort()
    client.sort()
    return dict(wall=walls[len(walls) // 2], min=walls[0], max=walls[-1],
                ctl_cpu=cpus[len(cpus) // 2], client_cpu=client[len(client) // 2],
                lines=lines, err=err)


def compare(ctls: dict, args: list[str], runs: int) -> dict:
    """``runs`` calls on each side, taking turns (the side going first
    alternates), so that a shared machine's load weighs on both alike."""
    for ctl in ctls.values():
        ctl.run("squeue", *args)
    idle = {side: idle_cpu_rate(ctl) for side, ctl in ctls.items()}
    got: dict = {side: [] for side in ctls}
    for r in range(runs):
        for side in (list(ctls) if r % 2 == 0 else list(ctls)[::-1]):
            ctl = ctls[side]
            time.sleep(0.5)
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            c0, t0 = cpu_s(ctl), time.perf_counter()
            p = ctl.run("squeue", *args)
            wall = time.perf_counter() - t0
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            got[side].append((wall, max(0.0, cpu_s(ctl) - c0 - idle[side] * wall),
                              u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime,
                              p.stdout.count("\n"), p.stderr.strip()[:200] if p.returncode else ""))
    out = {}
    for side, v in got.items():
        w, c, u = (sorted(x[i] for x in v) for i in range(3))
        out[side] = dict(wall=w[len(w) // 2], min=w[0], max=w[-1], ctl_cpu=c[len(c) // 2],
                         client_cpu=u[len(u) // 2], lines=v[-1][3], err=v[-1][4])
    return out


def time_slurm(args: list[str], runs: int) -> dict | None:
    env = {"PATH": "/usr/bin:/bin"}
    try:
        if subprocess.run(["/usr/bin/scontrol", "ping"], env=env, capture_output=True,
                          timeout=10).returncode != 0:
            return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    walls, lines = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/squeue", *args], env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        lines = p.stdout.count("\n")
    walls.sort()
    return dict(wall=walls[len(walls) // 2], min=walls[0], max=walls[-1], lines=lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queued", type=int, nargs="+", default=[10000, 100000])
    ap.add_argument("--queue", choices=("held", "mix"), default="held")
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    ap.add_argument("--code", default=str(ROOT),
                    help="the checkout whose lingjund and commands run (e.g. main's, for a before)")
    ap.add_argument("--against", default="", metavar="DIR",
                    help="also run DIR's lingjund and commands (e.g. main's tree) at the same "
                         "time, the two sides taking turns call by call")
    ap.add_argument("--slurm", action="store_true", help="also time real Slurm's squeue")
    o = ap.parse_args(argv)
    # As an installed package is: compiled to bytecode once (this environment
    # may set PYTHONDONTWRITEBYTECODE, and then every command would compile
    # its modules from source at each start).
    for tree in filter(None, (o.code, o.against)):
        subprocess.run([sys.executable, "-m", "compileall", "-q", "cli", "lingjun", "lingjund"],
                       cwd=tree, check=False, stdout=subprocess.DEVNULL)
    rows = []
    for q in o.queued if o.against else ():
        sides = {}
        try:
            for side, tree in (("this", o.code), ("against", o.against)):
                work = Path(tempfile.mkdtemp(prefix=f"lingjun-squeue-{q}-{side}-"))
                sides[side] = Controller(
                    work, o.nodes, q, max_array=1001, code=tree,
                    prefill=prefill_mix(o.nodes) if o.queue == "mix" else None,
                    controller_conf="heartbeat_timeout_s = 86400.0")
            print(f"# Q={q} ({o.queue}): {o.code} against {o.against}; load average "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
            for name in o.formats:
                for side, r in compare(sides, FORMATS[name], o.runs).items():
                    system = "lingjun" if side == "this" else f"lingjun {o.against}"
                    rows.append((q, name, system, r))
                    print(f"Q={q} {side} squeue_{name} {r['wall']:.3f} s (min {r['min']:.3f} max "
                          f"{r['max']:.3f}) ctl_cpu {r['ctl_cpu']:.3f} s client_cpu "
                          f"{r['client_cpu']:.3f} s  # {r['lines']} lines"
                          + (f"; {r['err']}" if r["err"] else ""), flush=True)
        finally:
            for ctl in sides.values():
                ctl.stop()
                shutil.rmtree(ctl.work, ignore_errors=True)
    for q in () if o.against else o.queued:
        work = Path(tempfile.mkdtemp(prefix=f"lingjun-squeue-{q}-"))
        t0 = time.perf_counter()
        ctl = Controller(work, o.nodes, q, max_array=1001, code=o.code,
                         prefill=prefill_mix(o.nodes) if o.queue == "mix" else None,
                         controller_conf="heartbeat_timeout_s = 86400.0")
        print(f"# Q={q} ({o.queue}): {o.nodes} nodes, controller up in "
              f"{time.perf_counter() - t0:.1f} s (pid {ctl.proc.pid}); load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        try:
            for name in o.formats:
                r = time_squeue(ctl, FORMATS[name], o.runs)
                rows.append((q, name, "lingjun", r))
                print(f"Q={q} squeue_{name} {r['wall']:.3f} s (min {r['min']:.3f} max "
                      f"{r['max']:.3f}) ctl_cpu {r['ctl_cpu']:.3f} s client_cpu "
                      f"{r['client_cpu']:.3f} s  # {r['lines']} lines"
                      + (f"; {r['err']}" if r["err"] else ""), flush=True)
        finally:
            ctl.stop()
            shutil.rmtree(work, ignore_errors=True)
        if o.slurm:
            for name in o.formats:
                r = time_slurm(FORMATS[name], o.runs)
                if r is None:
                    print("slurm: not available (scontrol ping failed)")
                    break
                rows.append((q, name, "slurm", r))
                print(f"slurm squeue_{name} {r['wall']:.3f} s  # {r['lines']} lines", flush=True)
    print(f"\n== table (load average now {os.getloadavg()[0]:.1f})")
    print("| Q | format | system | median s | min | max | controller CPU s | squeue CPU s | lines |")
    print("|---|---|---|---|---|---|---|---|---|")
    for q, name, system, r in rows:
        print(f"| {q:,} | {name} | {system} | {r['wall']:.2f} | {r['min']:.2f} | {r['max']:.2f} | "
              f"{r.get('ctl_cpu', float('nan')):.3f} | {r.get('client_cpu', float('nan')):.3f} | "
              f"{r['lines']:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
