#!/usr/bin/env python3
"""Submissions per second and squeue's time against a big queue and a big cluster.

For each queue size Q (``--queued``, default 0 10000 100000) a fresh
controller (a real ``lingjund`` process, real gRPC, real SQLite with its
fsync per commit) is started over a state store that already holds Q held
jobs, with NODES (10,000) nodes configured and none registered: no job can
start, and every new job stays pending. Then:

  * for each number of concurrent clients C (``--clients``, default 1 8 32):
    M (``--count``, 2,000) held jobs (``sbatch -H``'s request, a fresh client
    token each), one ``SubmitJob`` call each, spread over C threads in
    ceil(C/8) client processes: jobs per second, and the controller's CPU
    milliseconds per job (user+system time of the lingjund process over the
    phase); a phase stops after ``--limit`` seconds, its rate over what it did;
  * batched: the same M jobs in ``SubmitJobs`` calls of ``--batch`` (100)
    from each of ``--batch-clients`` (1 4) clients; and one
    ``sbatch --array=1-M`` (one submission of M jobs);
  * ``squeue`` as a user runs it (the command, default format, output to a
    pipe), with the queue now holding Q + what was submitted: the median
    wall seconds of 3 runs a second apart, and the lines it printed. Also
    ``squeue -t all`` when ``--all-states``.

``--code DIR`` runs lingjund and the commands from another checkout (the
"before" figures: ``--code /work/main``; it has no SubmitJobs, so its batched
phase fails and says so). ``--profile FILE`` runs lingjund under cProfile.

Prints one line per figure, ``Q=<queued> NAME VALUE UNIT``, then a table.

    python bench/submit_scale.py                                  # the full grid
    python bench/submit_scale.py --queued 0 --clients 1 8 --count 500   # quick
    python bench/submit_scale.py --queued 100000 --count 5000
    python bench/submit_scale.py --code /work/main --limit 60     # before
    python bench/submit_scale.py --queued 100000 --clients --batch-clients --count 0  # squeue only
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lingjun import auth, slurm  # noqa: E402
from lingjun.v1 import api_pb2  # noqa: E402

# One client process: THREADS threads submit COUNT jobs between them as fast
# as the answers come, after a barrier; prints {"ok": n, "errors": [...], "s": wall}.
CLIENT = r"""
import json, os, sys, threading, time, uuid
from lingjun import sbatch_options
from lingjun.client import Api
from lingjun.v1 import api_pb2

threads, count, batch, limit = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
api = Api()
base = sbatch_options.parse_args(["-H", "-o", "/dev/null", "-J", "bench", "--wrap", "true"],
                         None, os.environ, os.getcwd()).request
for attempt in range(60):     # a controller busy with a long pass answers late
    try:
        api.call("Ping", api_pb2.PingRequest(), timeout=60)
        break
    except Exception as e:
        if attempt == 59:
            raise
        time.sleep(1)
lock = threading.Lock()
left = [count]
ok, errors = [0], []
stop_at = [float("inf")]
go = threading.Barrier(threads + 1)

def run():
    go.wait()
    while True:
        with lock:
            if left[0] <= 0 or time.perf_counter() > stop_at[0]:
                return
            n = min(left[0], max(batch, 1))
            left[0] -= n
        reqs = []
        for _ in range(n):
            req = type(base)()
            req.CopyFrom(base)
            req.client_token = str(uuid.uuid4())
            reqs.append(req)
        try:
            if batch:
                got = api.call("SubmitJobs", api_pb2.SubmitJobsRequest(jobs=reqs)).results
                bad = [r.error for r in got if r.error]
            else:
                api.call("SubmitJob", reqs[0])
                bad = []
            with lock:
                ok[0] += n - len(bad)
                errors.extend(bad)
        except Exception as e:
            with lock:
                errors.append(str(e)[:200])

ts = [threading.Thread(target=run) for _ in range(threads)]
for t in ts:
    t.start()
print("ready", flush=True)
sys.stdin.readline()
a = time.perf_counter()
stop_at[0] = a + limit
go.wait()
for t in ts:
    t.join()
print(json.dumps({"ok": ok[0], "errors": errors[:3], "s": time.perf_counter() - a}), flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Controller:
    """A lingjund over a fresh state directory holding ``queued`` held jobs."""

    def __init__(self, work: Path, nodes: int, queued: int, max_array: int, profile: str = "",
                 code: str = str(ROOT), prefill=None, controller_conf: str = ""):
        self.work = work
        state = work / "state"
        state.mkdir(parents=True)
        auth.write_key(work / "cluster.key")
        self.port = _free_port()
        self.conf = work / "lingjun.toml"
        self.conf.write_text(f"""cluster_name = "bench"
[controller]
listen = "127.0.0.1:{self.port}"
state_dir = "{state}"
max_array_size = {max_array}
{controller_conf}
[auth]
key_file = "{work / 'cluster.key'}"
socket = "{work / 'auth.sock'}"
[[nodes]]
names = "node[1-{nodes}]"
cpus = 128
memory_mb = 1000000
[[partitions]]
name = "batch"
nodes = "ALL"
default = true
""")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LINGJUN_")}
        self.env.update(LINGJUN_CONF=str(self.conf), LINGJUN_HOME=str(work / "home"),
                        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
                        PYTHONPATH=code)
        if queued:
            (prefill or _prefill)(state / "lingjund.db", queued)
        self.log = open(work / "lingjund.log", "ab")
        prof = ["-m", "cProfile", "-o", profile] if profile else []
        self.proc = subprocess.Popen([sys.executable, *prof, "-m", "lingjund.daemon", "-c", str(self.conf)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                     cwd=work)
        self.ps = psutil.Process(self.proc.pid)
        from lingjun.client import Api, ControllerUnreachable
        deadline = time.time() + 300
        while True:
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"lingjund did not come up; see {work / 'lingjund.log'}")
            if (work / "auth.sock").exists():
                api = Api(f"127.0.0.1:{self.port}", socket_path=str(work / "auth.sock"), ca_file="")
                try:
                    api.call("Ping", api_pb2.PingRequest(), timeout=2)
                    break
                except ControllerUnreachable:
                    pass
                finally:
                    api.close()
            time.sleep(0.2)

    def run(self, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, cwd=self.work, capture_output=True,
                              text=True, timeout=timeout)

    def cpu_s(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _prefill(db: str, queued: int) -> None:
    """``queued`` held jobs, written as submissions would write them, in one transaction."""
    from lingjund.service.jobs import PRIORITY_BASE, output_paths
    from lingjund.store.store import Store
    st = Store(str(db))
    spec = api_pb2.JobSpec(name="queued", user="bench", uid=os.getuid(), batch=True, hold=True,
                           script="#!/bin/sh\ntrue\n", work_dir="/tmp", command="(wrap)",
                           stdout_pattern="/dev/null")
    now = time.time()
    with st.transaction():
        for _ in range(queued):
            jid = st.insert_job(name="queued", user="bench", uid=spec.uid, partition="batch",
                                state=slurm.PENDING, reason=slurm.REASON_HELD_USER,
                                priority=0, submit_time=now, eligible_time=0.0,
                                time_limit_min=-1, exclusive=False, held=True, spec=spec,
                                dependency="", deadline=0.0)
            st.update_job(jid, priority=max(PRIORITY_BASE - jid, 1),
                          **output_paths(spec, jid, "queued"))
    st.close()


def submit_phase(ctl: Controller, clients: int, count: int, batch: int = 0,
                 limit: float = 120.0) -> tuple[float, float, str]:
    """(jobs/s, controller CPU ms per job, note) for ``count`` jobs over ``clients`` threads:
    one SubmitJob each, or (``batch``) SubmitJobs of ``batch`` jobs."""
    nproc = max(1, -(-clients // 8))
    per = [clients // nproc + (1 if i < clients % nproc else 0) for i in range(nproc)]
    counts = [count // nproc + (1 if i < count % nproc else 0) for i in range(nproc)]
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, str(t), str(n), str(batch), str(limit)],
                              env=ctl.env,
                              cwd=ctl.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for t, n in zip(per, counts)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            for q in procs:
                q.kill()
                q.wait()
            return 0.0, 0.0, "a client could not reach the controller within 60 s"
    cpu0, t0 = ctl.cpu_s(), time.perf_counter()
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
    outs = [json.loads(p.stdout.readline()) for p in procs]
    wall, cpu = time.perf_counter() - t0, ctl.cpu_s() - cpu0
    for p in procs:
        p.wait()
    ok = sum(o["ok"] for o in outs)
    errors = [e for o in outs for e in o["errors"]]
    note = f"{len(errors)} failed: {errors[0]}" if errors else ""
    if not errors and ok < count:
        note = f"stopped after {limit:.0f} s: {ok} of {count}"
    return ok / wall, cpu * 1000 / max(ok, 1), note


def array_phase(ctl: Controller, count: int) -> tuple[float, float, str]:
    cpu0, t0 = ctl.cpu_s(), time.perf_counter()
    p = ctl.run("sbatch", "--parsable", "-H", "-o", "/dev/null", f"--array=1-{count}",
                "--wrap", "true")
    wall, cpu = time.perf_counter() - t0, ctl.cpu_s() - cpu0
    if p.returncode != 0:
        return 0.0, 0.0, p.stderr.strip()
    return count / wall, cpu * 1000 / count, ""


def squeue_phase(ctl: Controller, *args: str, runs: int = 3) -> tuple[float, int, str]:
    """The median wall time of ``runs`` squeue commands, a second apart."""
    walls = []
    for _ in range(runs):
        time.sleep(1.0)
        t0 = time.perf_counter()
        p = ctl.run("squeue", *args)
        walls.append(time.perf_counter() - t0)
        if p.returncode != 0:
            return walls[-1], 0, p.stderr.strip()[:200]
    walls.sort()
    return walls[len(walls) // 2], p.stdout.count("\n"), \
        f"min {walls[0]:.2f} max {walls[-1]:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queued", type=int, nargs="+", default=[0, 10000, 100000])
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--clients", type=int, nargs="*", default=[1, 8, 32])
    ap.add_argument("--count", type=int, default=2000, help="submissions per phase")
    ap.add_argument("--batch", type=int, default=100, help="jobs per SubmitJobs call (batched)")
    ap.add_argument("--batch-clients", type=int, nargs="*", default=[1, 4],
                    help="concurrent clients of the batched phases")
    ap.add_argument("--limit", type=float, default=120.0,
                    help="seconds after which a submission phase stops (its rate is over what it did)")
    ap.add_argument("--code", default=str(ROOT),
                    help="the checkout whose lingjund and commands run (e.g. main's, for a before)")
    ap.add_argument("--all-states", action="store_true", help="also time squeue -t all")
    ap.add_argument("--keep", action="store_true", help="keep the work folders")
    ap.add_argument("--profile", default="", metavar="FILE",
                    help="run lingjund under cProfile, its stats to FILE.Q (pstats)")
    o = ap.parse_args(argv)
    rows = []
    for q in o.queued:
        work = Path(tempfile.mkdtemp(prefix=f"lingjun-scale-{q}-"))
        t0 = time.perf_counter()
        ctl = Controller(work, o.nodes, q, max_array=max(1001, o.count + 1),
                         profile=f"{o.profile}.{q}" if o.profile else "", code=o.code)
        print(f"# Q={q}: {o.nodes} nodes, {q} held jobs, controller up in "
              f"{time.perf_counter() - t0:.1f} s (pid {ctl.proc.pid})", flush=True)
        figures = {}
        try:
            for c in o.clients:
                rate, cpu_ms, note = submit_phase(ctl, c, o.count, limit=o.limit)
                figures[f"submit_{c}_clients"] = (rate, "jobs/s", note)
                figures[f"cpu_per_submit_{c}_clients"] = (cpu_ms, "ms", "")
                print(f"Q={q} submit_{c}_clients {rate:.1f} jobs/s  cpu {cpu_ms:.2f} ms/job"
                      + (f"  # {note}" if note else ""), flush=True)
            for c in o.batch_clients:
                rate, cpu_ms, note = submit_phase(ctl, c, o.count, o.batch, limit=o.limit)
                figures[f"batched_{o.batch}_{c}_clients"] = (rate, "jobs/s", note)
                figures[f"cpu_per_job_batched_{c}_clients"] = (cpu_ms, "ms", "")
                print(f"Q={q} batched_{o.batch}_{c}_clients {rate:.1f} jobs/s  cpu {cpu_ms:.2f} ms/job"
                      + (f"  # {note}" if note else ""), flush=True)
            if o.count:
                rate, cpu_ms, note = array_phase(ctl, o.count)
                figures["submit_array"] = (rate, "jobs/s", note)
                print(f"Q={q} submit_array_{o.count} {rate:.1f} jobs/s  cpu {cpu_ms:.3f} ms/job"
                      + (f"  # {note}" if note else ""), flush=True)
            wall, lines, note = squeue_phase(ctl)
            figures["squeue"] = (wall, "s", f"{lines} lines; {note}")
            print(f"Q={q} squeue {wall:.2f} s  # {lines} lines; {note}", flush=True)
            if o.all_states:
                wall, lines, note = squeue_phase(ctl, "-t", "all")
                figures["squeue_t_all"] = (wall, "s", f"{lines} lines; {note}")
                print(f"Q={q} squeue_t_all {wall:.2f} s  # {lines} lines; {note}", flush=True)
        finally:
            ctl.stop()
            if o.keep:
                print(f"# kept {work}", file=sys.stderr)
            else:
                shutil.rmtree(work, ignore_errors=True)
        rows.append((q, figures))
    print("\n== table")
    names = list(dict.fromkeys(n for _, f in rows for n in f))
    print("metric".ljust(26) + "".join(f"Q={q}".rjust(14) for q, _ in rows))
    for n in names:
        cells = []
        for _, f in rows:
            v = f.get(n)
            cells.append("-" if v is None else f"{v[0]:.4g} {v[1]}")
        print(n.ljust(26) + "".join(c.rjust(14) for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
