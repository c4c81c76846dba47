#!/usr/bin/env python3
"""Each command's common path, Lingjun beside real Slurm, in one run; and where our milliseconds go.

For every command below, RUNS (30) timed calls per system, the systems
taking turns call by call (so a noisy machine weighs on both alike): the
median and 90th percentile of the wall time, the median CPU time
(user + system of the command's process), and the ratio of the medians
(lingjun / slurm). Then SUBMITS (200) sequential ``sbatch --wrap true`` per
system, submissions per second, and the same held (``-H``): the submission
path alone, without the jobs of the earlier submissions starting meanwhile
(each system's leftovers are cancelled before the next one's turn).

Lingjun's commands run from two installs of this tree, both measured:

- ``plain``: a venv of the system's /usr/bin/python3 with our dependencies
  and a one-line ``.pth`` to this tree, the way an operator installs it
  (tests/e2e/users.py makes it; the tree and the copies are byte-compiled
  first, as ``pip install`` leaves them);
- ``dev``: this interpreter's own folder (the worktree's venv: ``pip
  install -e``'s import finder, and whatever .pth files the machine's site
  packages carry, run at every start).

Lingjun is a private ``lingjun up --nodes 4 --cpus 2`` on a free port
(stopped at the end); Slurm is used when ``/usr/bin/scontrol ping`` says UP
(../shared/anchors/slurm/start.sh: 4 nodes x 2 CPUs) and left running.

Last, the milliseconds of ``sbatch`` and ``squeue`` (plain install) are
taken apart: the interpreter alone (``python -S -c pass``), ``site``
(``python -c pass``), importing the command's module, and the rest (parse,
connect, the controller's answer, print, exit), with the socket round trip
alone measured from this process.

    python bench/command_latency.py                    # RUNS=30 SUBMITS=200
    RUNS=5 SUBMITS=20 python bench/command_latency.py  # quick
    python bench/command_latency.py --systems lingjun --no-plain
"""
from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TREE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TREE))
SLURM_BIN = "/usr/bin"

# (label, argv); "{held}" is a held job of that system, "{fresh}" a new held job per call
COMMANDS = [
    ("sbatch --parsable --wrap true", ["sbatch", "--parsable", "--wrap", "true"]),
    ("squeue", ["squeue"]),
    ("squeue -j ID", ["squeue", "-j", "{held}"]),
    ("squeue -u root", ["squeue", "-u", "root"]),
    ("squeue -o '%i %T %j'", ["squeue", "-o", "%i %T %j"]),
    ("scancel ID", ["scancel", "{fresh}"]),
    ("sinfo", ["sinfo"]),
    ("scontrol ping", ["scontrol", "ping"]),
    ("scontrol show job ID", ["scontrol", "show", "job", "{held}"]),
    ("sacct -j ID", ["sacct", "-j", "{held}"]),
]


class System:
    def __init__(self, name: str, bin_dir: str, env: dict[str, str]):
        self.name, self.bin_dir, self.env = name, bin_dir, env
        self.jobs: list[str] = []          # everything submitted, cancelled at the end

    def argv(self, args: list[str]) -> list[str]:
        return [os.path.join(self.bin_dir, args[0]), *args[1:]]

    def run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(args), env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=tempfile.gettempdir())

    def timed(self, args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
        """(wall s, CPU s of the child, result) of one call."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = self.run(args)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu, p

    def submit_held(self) -> str:
        p = self.run(["sbatch", "--parsable", "-H", "-J", "bench", "--wrap", "true"])
        if p.returncode != 0:
            raise RuntimeError(f"{self.name}: sbatch -H failed: {p.stderr.strip()}")
        jid = p.stdout.strip().split(";")[0]
        self.jobs.append(jid)
        return jid

    def cancel_all(self) -> None:
        jobs, self.jobs = self.jobs, []
        for i in range(0, len(jobs), 200):
            self.run(["scancel", *jobs[i:i + 200]])


def _free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in (6817, 6818, 6819):
            return port


def lingjun_up(root: Path, bin_dir: str) -> dict[str, str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINGJUN_", "SLURM_"))}
    env.update(PATH=bin_dir + os.pathsep + env.get("PATH", ""), LINGJUN_HOME=str(root / "home"))
    p = subprocess.run([os.path.join(bin_dir, "lingjun"), "up", "--nodes", "4", "--cpus", "2",
                        "--state-dir", str(root / "state"), "--port", str(port)],
                       env=env, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"lingjun up failed: {p.stderr.strip() or p.stdout.strip()}")
    return env


def slurm_env() -> dict[str, str] | str:
    """Slurm's environment, or why it cannot be used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINGJUN_", "SLURM_"))}
    env["PATH"] = os.pathsep.join([SLURM_BIN, "/bin", env.get("PATH", "")])
    try:
        p = subprocess.run([f"{SLURM_BIN}/scontrol", "ping"], env=env, capture_output=True,
                           text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"scontrol ping: {e}"
    if p.returncode != 0 or "UP" not in p.stdout:
        return f"scontrol ping: {(p.stdout + p.stderr).strip()}"
    return env


def plain_install(where: Path) -> str:
    """A venv of /usr/bin/python3 running this tree, byte-compiled; its bin folder."""
    from tests.e2e.users import make_user_python
    bin_dir = make_user_python(where)
    site = next((where / "venv" / "lib").glob("python3*/site-packages"))
    py = str(bin_dir / "python")
    subprocess.run([py, "-m", "compileall", "-q", str(site)], capture_output=True)
    # the tree's forced: compileall trusts a cache whose recorded mtime matches,
    # and a file rewritten within the same second (a checkout) keeps a stale one
    # that the import system then refuses, compiling the source at every start
    for d in (TREE / "cli", TREE / "lingjun"):
        subprocess.run([py, "-m", "compileall", "-q", "-f", str(d)], capture_output=True)
    return str(bin_dir)


def _load() -> str:
    """The load average (1, 5, 15 minutes): the machine is shared, and a loaded
    one widens the ratios (a command that needs more CPU waits for a core more)."""
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def measure_commands(systems: list[System], runs: int) -> dict:
    """{label: {system: (walls, cpus, failures)}}"""
    out: dict = {}
    held = {s.name: s.submit_held() for s in systems}
    for label, args in COMMANDS:
        fresh = {s.name: [s.submit_held() for _ in range(runs)] if "{fresh}" in args else []
                 for s in systems}
        res = {s.name: ([], [], []) for s in systems}
        for i in range(runs):
            order = systems if i % 2 == 0 else systems[::-1]
            for s in order:
                argv = [held[s.name] if a == "{held}" else fresh[s.name][i] if a == "{fresh}" else a
                        for a in args]
                wall, cpu, p = s.timed(argv)
                if p.returncode != 0:
                    res[s.name][2].append(p.stderr.strip().splitlines()[-1:] or [f"rc {p.returncode}"])
                    continue
                if args[0] == "sbatch":
                    s.jobs.append(p.stdout.strip().split(";")[0])
                res[s.name][0].append(wall)
                res[s.name][1].append(cpu)
        out[label] = res
    return out


def measure_rate(s: System, n: int, held: bool = False) -> tuple[float, int]:
    """Submissions per second of n sequential ``sbatch --wrap true`` (``-H``: held,
    so that no job runs while the next is submitted); failures."""
    failed = 0
    t0 = time.perf_counter()
    for _ in range(n):
        p = s.run(["sbatch", "--parsable", *(["-H"] if held else []), "--wrap", "true"])
        if p.returncode != 0:
            failed += 1
        else:
            s.jobs.append(p.stdout.strip().split(";")[0])
    return n / (time.perf_counter() - t0), failed


def breakdown(bin_dir: str, env: dict[str, str], runs: int) -> list[tuple[str, float, float]]:
    """(stage, median wall ms, median CPU ms) of sbatch and squeue in this install; each
    stage is the difference of two runs (CPU time is the figure that a loaded machine
    disturbs least: the wall time also holds the waits for a core)."""
    py = os.path.join(bin_dir, "python")

    def med(argv) -> tuple[float, float]:
        walls, cpus = [], []
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, cwd=tempfile.gettempdir())
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3

    def minus(a, b):
        return a[0] - b[0], a[1] - b[1]

    # Each stage ends with os._exit, as the commands do (cli.common.run): the
    # interpreter's teardown is a row of its own, the part they skip. A command
    # loads with the cyclic collector paused (cli/__init__.py), so the stages
    # after site do too; what the collector would cost is a row of its own.
    end = "; import os; os._exit(0)"
    paused = "import gc; gc.disable(); "
    bare = med([py, "-S", "-c", "pass" + end])
    teardown = minus(med([py, "-S", "-c", "pass"]), bare)
    site = med([py, "-c", "pass" + end])
    # the standard library the commands load beyond the start-up
    stdlib_modules = "import socket, json, re, collections, functools, math, time, pwd"
    stdlib = med([py, "-c", paused + stdlib_modules + end])
    rows = [("python -S, ended by os._exit (the interpreter)", *bare),
            ("its teardown (python -S -c pass - above): skipped", *teardown),
            ("site (python -c pass - python -S)", *minus(site, bare)),
            ("socket, json (enum, re...): the stdlib the commands need", *minus(stdlib, site))]
    for mod, args in (("cli.sbatch", ["sbatch", "--parsable", "-H", "--wrap", "true"]),
                      ("cli.squeue", ["squeue"])):
        imp = med([py, "-c", paused + f"import {mod}" + end])
        collected = minus(med([py, "-c", f"import {mod}" + end]), imp)
        whole = med([os.path.join(bin_dir, args[0]), *args[1:]])
        rows.append((f"import {mod}: our modules (- the stdlib above)", *minus(imp, stdlib)))
        rows.append(("  (the collector's scans, were it not paused: skipped)", *collected))
        rows.append((f"{' '.join(args)}: parse, connect, answer, print, exit", *minus(whole, imp)))
        rows.append((f"{' '.join(args)}: whole", *whole))
    return rows


def socket_round_trips(env: dict[str, str], runs: int) -> list[tuple[str, float]]:
    """The command socket's round trip alone, from this process (ms, median)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        from lingjun import messages
        from lingjun.command_socket import LocalApi, commands_path
        from lingjun.endpoints import auth_socket
        api = LocalApi(commands_path(auth_socket()))
        out = []
        calls = [("GetJobs (squeue)", lambda: api.call("GetJobs", messages.GetJobsRequest(
                     job_fields=["job_id", "state", "name", "user", "partition", "nodes"],
                     squeue_order=True))),
                 ("SubmitJob (sbatch -H)", lambda: api.call("SubmitJob", messages.SubmitJobRequest(
                     client_token=os.urandom(8).hex(), spec=messages.JobSpec(
                         script="#!/bin/sh\ntrue\n", work_dir=tempfile.gettempdir(), hold=True)))),
                 ("Ping", lambda: api.call("Ping", messages.PingRequest()))]
        for label, call in calls:
            times = []
            for _ in range(runs):
                # 10 ms apart, as a command's start keeps them: calls closer than
                # GroupCommit.QUIET_S (5 ms) look like a storm, and a submission
                # waits GATHER_S for company
                time.sleep(0.01)
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
            out.append((f"socket round trip {label} (from a warm process)",
                        statistics.median(times) * 1e3, float("nan")))
        return out
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", 30)))
    ap.add_argument("--submits", type=int, default=int(os.environ.get("SUBMITS", 200)))
    ap.add_argument("--systems", default="lingjun,slurm")
    ap.add_argument("--no-plain", action="store_true", help="only this interpreter's install")
    o = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="lj-cmdlat-", dir="/tmp"))
    root.chmod(0o755)
    dev_bin = os.path.dirname(sys.executable)
    compileall.compile_dir(str(TREE / "cli"), quiet=1)
    compileall.compile_dir(str(TREE / "lingjun"), quiet=1)
    systems: list[System] = []
    wanted = o.systems.split(",")
    env = None
    try:
        if "lingjun" in wanted:
            env = lingjun_up(root / "cluster", dev_bin)
            if not o.no_plain:
                plain_bin = plain_install(root / "python")
                systems.append(System("lingjun-plain", plain_bin,
                                      dict(env, PATH=plain_bin + os.pathsep + env["PATH"])))
            systems.append(System("lingjun-dev", dev_bin, env))
        if "slurm" in wanted:
            senv = slurm_env()
            if isinstance(senv, str):
                print(f"# slurm: not available ({senv})")
            else:
                systems.append(System("slurm", SLURM_BIN, senv))
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')} runs={o.runs} submits={o.submits} "
              f"{_load()} cores={os.cpu_count()}", flush=True)
        results = measure_commands(systems, o.runs)
        names = [s.name for s in systems]
        slurm = "slurm" if "slurm" in names else None
        head = f"{'command':32}" + "".join(f" | {n + ' median/p90 ms':>28} | {'cpu ms':>6}" for n in names)
        if slurm:
            head += "".join(f" | {n + '/slurm':>18}" for n in names if n != slurm)
        print(head)
        for label, res in results.items():
            line = f"{label:32}"
            meds = {}
            for n in names:
                walls, cpus, fails = res[n]
                if walls:
                    meds[n] = statistics.median(walls)
                    line += (f" | {meds[n] * 1e3:13.1f} / {pct(walls, 0.9) * 1e3:6.1f}"
                             f"{'':>6} | {statistics.median(cpus) * 1e3:6.1f}")
                else:
                    line += f" | {'failed: ' + ' '.join(fails[0])[:19]:>28} | {'':>6}"
            if slurm:
                for n in names:
                    if n != slurm:
                        ok = n in meds and slurm in meds
                        line += f" | {meds[n] / meds[slurm]:17.1f}x" if ok else f" | {'-':>18}"
            print(line + "".join(f"  ({n}: {len(res[n][2])} failed)" for n in names if res[n][2]),
                  flush=True)
        print(f"# {_load()}", flush=True)
        for held in (False, True):
            what = f"sbatch {'-H ' if held else ''}--wrap true"
            rates = {}
            for s in systems:
                rates[s.name], failed = measure_rate(s, o.submits, held)
                print(f"{s.name}: {o.submits} sequential {what}: {rates[s.name]:.1f} jobs/s"
                      + (f" ({failed} failed)" if failed else ""), flush=True)
                s.cancel_all()        # the next system's submissions run on an idle cluster
            if slurm:
                for n in names:
                    if n != slurm:
                        print(f"submit rate {what} {n}/slurm: {rates[n] / rates[slurm]:.2f}",
                              flush=True)
        print(f"# {_load()}", flush=True)
        if env is not None:
            target = systems[0]
            print(f"# where {target.name}'s milliseconds go (median of {o.runs}; {_load()}):")
            print(f"{'stage':62} {'wall ms':>8} {'CPU ms':>8}")
            for label, wall, cpu in breakdown(target.bin_dir, target.env, o.runs) + \
                    socket_round_trips(env, o.runs):
                print(f"{label:62} {wall:8.1f} {cpu:8.1f}")
    finally:
        for s in systems:
            s.cancel_all()
        if env is not None:
            subprocess.run([os.path.join(dev_bin, "lingjun"), "down", "--state-dir",
                            str(root / "cluster" / "state")], env=env, capture_output=True,
                           timeout=90)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
