"""sacct over a big history while other commands wait: does the controller stand still?

Builds a state database with N finished jobs (default 1,000,000, each with
its batch step; inserted with executemany in one transaction, outside the
controller), starts a real ``lingjund`` on it, and runs ``sacct -a`` and a
filtered ``sacct`` (one user, one day, -X) as separate processes while this
process sends the Ping RPC every 20 ms. Prints, per sacct: its wall time,
its exit status, the rows it printed and rows per second, the ping latencies
(p50, p99, max, and pings that failed) in ``--baseline`` seconds without
sacct just before it and while it ran, back to back in one run, and their
ratio; the controller's peak RSS and that of its history reader processes.

First, in this process: what building one page of history costs the
interpreter that builds it (the controller's, before the readers), as CPU
per page and as the wake-up delay of another thread meanwhile (the GIL).

    python bench/history.py                      # N=1000000
    python bench/history.py --jobs 100000
    python bench/history.py --repo /tmp/main     # another checkout's lingjund and sacct (before/after)

``--repo``: the checkout whose controller, commands and schema are run
(default: this one); the database is built with that checkout's store.
Every process it starts is stopped by its PID at the end.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import pwd
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sim.controller import ClusterShape, SimController  # noqa: E402
from lingjun import config  # noqa: E402
from lingjun.client import ControllerUnreachable  # noqa: E402
from lingjun.v1 import api_pb2  # noqa: E402
from lingjund.service.history_reader import Pager  # noqa: E402
from lingjund.store import history  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# real accounts, so that "sacct -u" resolves them
USERS = sorted({pw.pw_name for pw in pwd.getpwall()})[:20]
DAY = 86400


def build_db(repo: Path, path: Path, jobs: int, now: float) -> float:
    """N finished jobs over the last 100 days, one batch step each; seconds taken."""
    t0 = time.monotonic()
    env = dict(os.environ, PYTHONPATH=str(repo))
    subprocess.run([sys.executable, "-c",
                    "import sys; from lingjund.store.store import Store; Store(sys.argv[1]).close()",
                    str(path)], check=True, env=env, cwd=repo)
    spec = api_pb2.JobSpec(name="train", work_dir="/home/user0", command="/bin/true", num_tasks=1,
                           cpus_per_task=1, batch=True, account="proj").SerializeToString()
    states = ["COMPLETED"] * 8 + ["FAILED", "CANCELLED"]
    span = 100 * DAY

    def job_rows():
        for i in range(1, jobs + 1):
            end = now - span + span * i / jobs
            start = end - 600
            state = states[i % len(states)]
            yield (i, f"job{i % 50}", USERS[i % len(USERS)], 1000 + i % len(USERS), "gpu", state,
                   1, start - 60, start - 60, start, end, 60, f'["node{1 + i % 4}"]', "[1]",
                   "[1]", spec)

    def step_rows():
        for i in range(1, jobs + 1):
            end = now - span + span * i / jobs
            yield (i, "batch", "batch", states[i % len(states)], f'["node{1 + i % 4}"]', end - 600, end)

    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO jobs (job_id, name, user, uid, partition, state, priority, submit_time, "
        "eligible_time, start_time, end_time, time_limit_min, nodes, cpus_per_node, "
        "tasks_per_node, spec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", job_rows())
    db.executemany("INSERT INTO steps (job_id, step_id, name, state, nodes, start_time, end_time) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)", step_rows())
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return time.monotonic() - t0


class Pinger(threading.Thread):
    """Ping every ``interval`` s: (when sent, seconds until answered or
    failed, answered?). A ping needs a token from the controller's
    credential socket first (cached for its TTL), as every command does."""

    def __init__(self, ctl: SimController, interval: float = 0.02):
        super().__init__(daemon=True)
        self.api = ctl.api()
        self.interval = interval
        self.samples: list[tuple[float, float, bool]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                self.api.call("Ping", api_pb2.PingRequest(), timeout=30)
                ok = True
            except (ControllerUnreachable, Exception):
                ok = False
            self.samples.append((t0, time.monotonic() - t0, ok))
            self.stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))


class RssPeak(threading.Thread):
    """Peak RSS of the controller, and of its history readers together."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.ps = psutil.Process(pid)
        self.peak = 0
        self.readers_peak = 0
        self.readers = 0
        self.stop = threading.Event()
        self.reader_cpu: dict[int, tuple[float, float]] = {}    # pid -> (first seen, last seen)

    @staticmethod
    def _cpu(ps: psutil.Process) -> float:
        t = ps.cpu_times()
        return t.user + t.system

    def run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                self.peak = max(self.peak, self.ps.memory_info().rss)
                rss = 0
                for c in self.ps.children():
                    try:
                        if "history_reader" in " ".join(c.cmdline()):
                            rss += c.memory_info().rss
                            self.readers = max(self.readers, 1)
                            cpu = self._cpu(c)
                            self.reader_cpu[c.pid] = (self.reader_cpu.get(c.pid, (cpu,))[0], cpu)
                    except psutil.Error:
                        pass
                self.readers_peak = max(self.readers_peak, rss)
            except psutil.Error:
                return

    def readers_cpu(self) -> float:
        return sum(last - first for first, last in self.reader_cpu.values())


def gil_hold(db: Path, pages: int = 20) -> str:
    """Build ``pages`` pages of ``sacct -a`` in a thread, as the controller's
    worker thread did, while this thread sleeps 1 ms at a time: CPU per page,
    and how late this thread woke (waiting for the GIL) meanwhile."""
    cfg = config.parse('[[nodes]]\nnames = "node[1-4]"\ncpus = 8\n'
                       '[[partitions]]\nname = "gpu"\nnodes = "ALL"\n')
    pager = Pager(cfg, str(db), api_pb2.GetJobsRequest(window_start=0, with_steps=True), time.time())
    cpu: list[float] = []

    def build():
        for _ in range(pages):
            t = time.thread_time()
            if pager.next_pages() is None:
                break
            cpu.append(time.thread_time() - t)

    t = threading.Thread(target=build)
    late: list[float] = []
    t.start()
    while t.is_alive():
        t0 = time.perf_counter()
        time.sleep(0.001)
        late.append(time.perf_counter() - t0 - 0.001)
    pager.close()
    late.sort()
    return (f"one page of {history.PAGE_ROWS} jobs with steps: {1000 * statistics.median(cpu):.0f} ms CPU "
            f"(median of {len(cpu)}); another thread's 1 ms sleep meanwhile woke late by "
            f"p50 {1000 * statistics.median(late):.1f} ms, p99 "
            f"{1000 * late[int(len(late) * 0.99)]:.1f} ms, max {1000 * late[-1]:.1f} ms")




def latencies(samples: list[tuple[float, bool]]) -> str:
    """p50/p99/max over every ping, a failed one counted with the time it took to fail."""
    lat = sorted(t for t, _ in samples)
    if not lat:
        return "no pings"
    failed = [t for t, ok in samples if not ok]
    return (f"p50 {1000 * statistics.median(lat):.1f} ms, "
            f"p99 {1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.1f} ms, "
            f"max {1000 * lat[-1]:.1f} ms over {len(lat)} pings"
            + (f"; {len(failed)} failed (after up to {max(failed):.1f} s)" if failed else ""))


def run_sacct(ctl: SimController, repo: Path, args: list[str], limit: float,
              baseline_s: float) -> dict:
    """sacct ARGS with pings meanwhile, after ``baseline_s`` of pings without it
    (on a shared machine, what the load of others costs a ping)."""
    env = dict(ctl.env, PYTHONPATH=str(repo))
    pinger = Pinger(ctl)
    pinger.start()
    cpu_a = RssPeak._cpu(ctl.ps)
    time.sleep(baseline_s)
    t0 = time.monotonic()
    cpu_b = RssPeak._cpu(ctl.ps)
    client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen([sys.executable, "-m", "cli.sacct", *args], stdout=out,
                             stderr=subprocess.PIPE, env=env, cwd=repo)
        try:
            _, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        wall = time.monotonic() - t0
        cpu_c = RssPeak._cpu(ctl.ps)
        client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0)
        rows = sum(1 for _ in out)
    pinger.stop.set()
    pinger.join()
    pinger.api.close()
    before = [(lat, ok) for t, lat, ok in pinger.samples if t < t0]
    during = [(lat, ok) for t, lat, ok in pinger.samples if t0 <= t <= t0 + wall]
    return {"args": " ".join(args), "rc": p.returncode, "wall_s": wall, "rows": rows,
            "err": err.decode(errors="replace").strip()[-300:],
            "before": latencies(before), "during": latencies(during),
            "ratio": ratios(before, during),
            "ctl_cpu": controller_cpu(cpu_b - cpu_a, len(before), cpu_c - cpu_b, len(during)),
            "client_cpu": (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)}


def controller_cpu(without: float, pings_without: int, during: float, pings_during: int) -> str:
    """The controller's CPU without sacct (pings only) and during it, and
    what is left during it once its pings are counted at the cost they had
    without sacct: what forwarding sacct's pages cost it."""
    per_ping = without / max(1, pings_without)
    return (f"controller {during:.1f} s ({1000 * per_ping:.1f} ms per ping without sacct; "
            f"{during - per_ping * pings_during:.1f} s beyond its {pings_during} pings)")


def ratios(before: list[tuple[float, bool]], during: list[tuple[float, bool]]) -> str:
    """during / before, for p50, p99 and max."""
    def stats(samples):
        lat = sorted(t for t, _ in samples)
        return (statistics.median(lat), lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1])
    if not before or not during:
        return "n/a"
    b, d = stats(before), stats(during)
    return " / ".join(f"{y / x:.1f}x" for x, y in zip(b, d))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 1_000_000)))
    p.add_argument("--repo", type=Path, default=REPO)
    p.add_argument("--limit", type=float, default=900.0, help="seconds one sacct may take")
    p.add_argument("--baseline", type=float, default=15.0,
                   help="seconds of pings without sacct just before each sacct")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    o = p.parse_args(argv)
    repo = o.repo.resolve()
    root = Path(tempfile.mkdtemp(prefix="lingjun-history-"))
    now = time.time()
    ctl = SimController(root, ClusterShape(nodes=4, cpus=8, gpus=0), probe=False)
    state = root / "controller"
    state.mkdir(mode=0o700)
    built = build_db(repo, state / "lingjund.db", o.jobs, now)
    print(f"{dt.datetime.utcnow():%Y-%m-%d %H:%M} UTC, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    print(f"built {o.jobs} finished jobs (+{o.jobs} steps) in {built:.1f} s; "
          f"db {(state / 'lingjund.db').stat().st_size / 2**20:.0f} MiB; repo {repo}", flush=True)
    print(f"GIL: {gil_hold(state / 'lingjund.db')}", flush=True)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(repo) + (os.pathsep + env_path if env_path else "")
    import bench.sim.controller as simc
    simc.REPO = repo                    # the controller of --repo
    try:
        t0 = time.monotonic()
        ctl.start(timeout=300)
        print(f"lingjund up in {time.monotonic() - t0:.1f} s, RSS "
              f"{ctl.ps.memory_info().rss / 2**20:.0f} MiB", flush=True)
        day = time.strftime("%Y-%m-%d", time.localtime(now - 10 * DAY))
        day_end = time.strftime("%Y-%m-%d", time.localtime(now - 9 * DAY))
        runs = [["-a", "-S", "2000-01-01"],
                ["-u", USERS[3], "-X", "-S", day, "-E", day_end, "-o", "JobID,State,Elapsed"]]
        for args in runs:
            rss = RssPeak(ctl.proc.pid)
            rss.start()
            r = run_sacct(ctl, repo, args, o.limit, o.baseline)
            rss.stop.set()
            rss.join()
            readers = (f"history readers' peak RSS {rss.readers_peak / 2**20:.0f} MiB"
                       if rss.readers else "no history reader process")
            print(f"sacct {r['args']}: rc {r['rc']}, {r['rows']} lines in {r['wall_s']:.1f} s "
                  f"({r['rows'] / r['wall_s']:.0f} lines/s); "
                  f"controller peak RSS {rss.peak / 2**20:.0f} MiB; {readers}\n"
                  f"  CPU meanwhile: {r['ctl_cpu']}, history readers "
                  f"{rss.readers_cpu():.1f} s, sacct {r['client_cpu']:.1f} s\n"
                  f"  ping without sacct ({o.baseline:g} s just before): {r['before']}\n"
                  f"  ping during it: {r['during']}\n"
                  f"  during / without, p50 / p99 / max: {r['ratio']}", flush=True)
            if r["rc"]:
                print(f"  sacct's stderr: {r['err']}", flush=True)
    finally:
        ctl.stop()
        if not o.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
