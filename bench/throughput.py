#!/usr/bin/env python3
"""Throughput of Lingjun and of real Slurm, side by side, in one run.

The workload is ../shared/anchors/slurm/bench/throughput.sh's, phase for
phase, driven through each system's own ``sbatch``/``squeue``/``scancel``
(and ``sacct`` for a final check of the jobs' end states):

  1. one ``sbatch --wrap true`` call: latency, median of LAT (15) calls (and,
     as a raw line, ``sbatch --version``: what starting the command costs);
  2. N (200) sequential submissions: the submit rate, then the time from the
     first submission until none of them is queued or running;
  3. one job array of ARRAY (10,000) tasks: the submission's time, and submit
     until drained (ARRAY=0 skips it; Slurm needs MaxArraySize > ARRAY);
  4. launch latency: ``sbatch`` until the job's output file is not empty,
     median of LAUNCH (5);
  5. GANG (50) jobs of two nodes each (``-N 2``), submit until drained.

The two systems take turns phase by phase, and the one that goes first
alternates from phase to phase, so that a noisy machine weighs on both
alike. Every phase gives up after LIMIT seconds and cancels what it leaves
behind, so that the next phase (maybe the other system's) starts clean.

Lingjun runs as a private local cluster (``lingjun up`` in a temporary
folder, on a free port, with the commands from this interpreter's bin folder
first on PATH) that is always stopped at the end. Slurm is used when
``/usr/bin/scontrol ping`` says it is UP (``../shared/anchors/slurm/start.sh``
starts one of 4 nodes with 2 CPUs, the shape given to Lingjun's), with
/usr/bin first on PATH and no LINGJUN_* variables; it is left running.

Prints one raw line per figure as it comes (``SYSTEM NAME VALUE UNIT``,
the shell script's lines with the system in front), then a table
``metric | lingjun | slurm | ratio (lingjun/slurm)``.

    python bench/throughput.py                 # full run, N=200
    N=20 GANG=10 LAT=5 LIMIT=60 python bench/throughput.py   # quick
    python bench/throughput.py --systems lingjun --n 50
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

SYSTEMS = ("lingjun", "slurm")
SLURM_BIN = "/usr/bin"
# End states: a job in any other state still counts as queued or running,
# so an unexpected state name makes a drain time out visibly, never end early.
TERMINAL = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"}
POLL_S = 0.2          # the shell script's drain poll
FILE_POLL_S = 0.02    # and its output-file poll
LAUNCH_CAP_S = 60.0   # the shell script's cap on one launch


@dataclass
class Figure:
    """One measured figure; ``value`` is None when it could not be measured."""
    name: str
    value: float | None
    unit: str
    note: str = ""        # why it is missing or partial (timeouts, failures)
    table: bool = True    # False: a raw line only (min, max)


@dataclass
class Side:
    """One system under test: its environment, its commands, its jobs."""
    name: str
    env: dict[str, str] = field(default_factory=dict)
    work: Path = Path(".")
    bins: dict[str, str] = field(default_factory=dict)
    reason: str = ""                     # why it is not available; "" when it is
    jobs: dict[str, list[str]] = field(default_factory=dict)   # phase -> job ids
    state: Path | None = None            # Lingjun's state folder (its logs, its processes)

    @property
    def available(self) -> bool:
        return not self.reason

    def run(self, cmd: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
        """Run one of this side's commands; a timeout becomes rc 124."""
        argv = [self.bins[cmd], *args]
        try:
            return subprocess.run(argv, env=self.env, cwd=self.work, capture_output=True,
                                  text=True, timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"timed out after {timeout:.0f}s")


# ---- helpers over one side's commands --------------------------------------------------------

def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def submit(side: Side, phase: str, args: list[str], timeout: float) -> tuple[float, str]:
    """One ``sbatch --parsable``: (seconds it took, error or "")."""
    a = time.perf_counter()
    p = side.run("sbatch", "--parsable", *args, timeout=timeout)
    dt = time.perf_counter() - a
    job = p.stdout.strip().split(";")[0]
    if p.returncode != 0 or not job:
        return dt, _last_line(p.stderr) or f"sbatch exited {p.returncode} and printed no job id"
    side.jobs.setdefault(phase, []).append(job)
    return dt, ""


def active(side: Side, ids: list[str], timeout: float = 30.0) -> list[str] | None:
    """Which of ``ids`` are still queued or running; None when squeue failed."""
    if not ids:
        return []
    p = side.run("squeue", "-h", "-o", "%i %T", "-j", ",".join(ids), timeout=timeout)
    if p.returncode != 0:
        # Slurm says this when every id listed has ended and been purged.
        return [] if "Invalid job id" in p.stderr else None
    left = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if parts and (len(parts) < 2 or parts[1] not in TERMINAL):
            left.append(parts[0])
    return left


def drain(side: Side, ids: list[str], deadline: float) -> tuple[float, str]:
    """Poll until none of ``ids`` is queued or running: (when, note)."""
    err = ""
    while True:
        # a poll near the deadline still gets 10 s: under load one squeue of a
        # 10,000-task array can take more than the second that was left
        left = active(side, ids, timeout=min(30.0, max(deadline - time.monotonic(), 10.0)))
        if left == []:
            return time.perf_counter(), ""
        if left is None:
            err = "squeue failed"
        if time.monotonic() > deadline:
            n = "?" if left is None else str(len(left))
            return time.perf_counter(), f"drain timeout: {n} of {len(ids)} left" + (
                f" ({err})" if err else "")
        time.sleep(POLL_S)


def cancel(side: Side, ids: list[str]) -> None:
    """Cancel whichever of ``ids`` is still queued or running."""
    left = active(side, ids) or []
    for i in range(0, len(left), 100):
        side.run("scancel", *left[i:i + 100], timeout=30)


def _failures(errors: list[str], tries: int) -> str:
    if not errors:
        return ""
    return f"{len(errors)} of {tries} sbatch failed: {errors[0]}"


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


# ---- the phases: each takes a side and the limits, returns figures ----------------------------

def phase_latency(side: Side, o: argparse.Namespace) -> list[Figure]:
    deadline = time.monotonic() + o.limit
    lat, errors = [], []
    for _ in range(o.lat):
        if time.monotonic() > deadline:
            errors.append(f"gave up after {o.limit:.0f}s")
            break
        dt, err = submit(side, "latency", ["--output=/dev/null", "--wrap", "true"],
                         deadline - time.monotonic())
        (errors.append(err) if err else lat.append(dt))
    note = _failures(errors, o.lat)
    _, dnote = drain(side, side.jobs.get("latency", []), deadline)
    # What starting the command costs without a request: the floor under the latency.
    start = []
    for _ in range(5):
        a = time.perf_counter()
        if side.run("sbatch", "--version", timeout=30).returncode == 0:
            start.append(time.perf_counter() - a)
    floor = [Figure("sbatch_version_median", statistics.median(start), "s", table=False)] \
        if start else []
    if not lat:
        return [Figure("sbatch_latency_median", None, "s", note), *floor]
    return [Figure("sbatch_latency_median", statistics.median(lat), "s", _join(note, dnote)),
            Figure("sbatch_latency_min", min(lat), "s", table=False),
            Figure("sbatch_latency_max", max(lat), "s", table=False), *floor]


def phase_throughput(side: Side, o: argparse.Namespace) -> list[Figure]:
    t0 = time.perf_counter()
    deadline = time.monotonic() + o.limit
    errors, gave_up = [], ""
    for i in range(o.n):
        if time.monotonic() > deadline:
            gave_up = f"gave up submitting after {o.limit:.0f}s ({i} of {o.n} tried)"
            break
        _, err = submit(side, "throughput", ["--output=/dev/null", "--wrap", "true"],
                        deadline - time.monotonic())
        if err:
            errors.append(err)
    t1 = time.perf_counter()
    ids = side.jobs.get("throughput", [])
    note = _join(gave_up, _failures(errors, o.n))
    if not ids:
        return [Figure("submit_rate", None, "jobs/s", note),
                Figure(f"submit_and_drain_{o.n}", None, "s", note)]
    t2, dnote = drain(side, ids, deadline)
    return [Figure("submit_rate", len(ids) / (t1 - t0), "jobs/s", note),
            Figure(f"submit_and_drain_{o.n}", t2 - t0, "s", _join(note, dnote))]


def phase_array(side: Side, o: argparse.Namespace) -> list[Figure]:
    """One ``sbatch --array=1-ARRAY --wrap true``: how long the submission takes, and
    from it until no task is queued or running. Both systems need MaxArraySize
    above ARRAY (Lingjun's side is started with --max-array-size ARRAY+1)."""
    name = f"array_{o.array}_drain"
    cpu0 = lingjun_cpu(side.state) if side.state else {}
    t0 = time.perf_counter()
    deadline = time.monotonic() + o.limit
    dt, err = submit(side, "array", ["--output=/dev/null", f"--array=1-{o.array}", "--wrap", "true"],
                     o.limit)
    if err:
        return [Figure(f"array_{o.array}_submit", None, "s", f"sbatch failed: {err}"),
                Figure(name, None, "s", f"sbatch failed: {err}")]
    t2, dnote = drain(side, side.jobs["array"], deadline)
    # How many tasks ended COMPLETED by then: a rate both sides can be compared
    # on even when a drain of 10,000 tasks outlasts LIMIT.
    acct = side.run("sacct", "-X", "-n", "-P", "-s", "CD", "-o", "JobID", "-j",
                    side.jobs["array"][0], timeout=60)
    done = sum(1 for line in acct.stdout.splitlines() if line.strip()) if acct.returncode == 0 else None
    rate = done / (t2 - t0) if done is not None else None
    figures = [Figure(f"array_{o.array}_submit", dt, "s"), Figure(name, t2 - t0, "s", dnote),
               Figure(f"array_{o.array}_tasks_completed", done, "tasks",
                      "" if done is not None else "sacct failed"),
               Figure(f"array_{o.array}_task_rate", rate, "tasks/s")]
    if side.state and done:
        # Where a task's time and CPU go (raw lines): CPU seconds of each kind of
        # Lingjun process over the phase per task completed, and the median of
        # each step of a task's path, from the controller's and agents' logs.
        cpu1 = lingjun_cpu(side.state)
        for kind in sorted(cpu1):
            figures.append(Figure(f"array_cpu_per_task_{kind}",
                                  (cpu1[kind] - cpu0.get(kind, 0.0)) / done * 1000, "ms",
                                  table=False))
        for step, values in launch_path(side.state, side.jobs["array"][0]).items():
            figures.append(Figure(f"array_path_{step}_median", statistics.median(values) * 1000,
                                  "ms", table=False))
    return figures


def lingjun_cpu(state: Path) -> dict[str, float]:
    """CPU seconds so far of the local cluster's processes, by kind: the
    controller, the agents, and the supervisors with their jobs (what each
    agent's forkserver has reaped, and its own)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, list[str]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        procs[int(name)] = (int(fields[1]), fields + [cmd])
    agents = {pid for pid, (_, f) in procs.items() if str(state) in f[-1]
              and "lingjun_agent.daemon" in f[-1]}
    out = {"controller": 0.0, "agents": 0.0, "supervisors": 0.0}
    for pid, (ppid, f) in procs.items():
        own = (int(f[11]) + int(f[12])) / tick
        if str(state) in f[-1] and "lingjund" in f[-1]:
            out["controller"] += own
        elif pid in agents:
            out["agents"] += own
        elif ppid in agents and "launcher.forkserver" in f[-1]:
            out["supervisors"] += own + (int(f[13]) + int(f[14])) / tick
    return out


# A task's path in the logs: (step name, logger fragment, message pattern).
PATH_EVENTS = (("scheduled", r"lingjund\.sched INFO job=(\d+) \(array {array}_\d+\) started"),
               ("agent_got_it", r"lingjun_agent INFO job=(\d+): CPUs"),
               ("script_started", r"lingjun_agent INFO job=(\d+): batch script started"),
               ("script_ended", r"lingjun_agent INFO job=(\d+): batch script ended"),
               ("controller_has_end", r"lingjund\.batch INFO job=(\d+) ended"),
               ("nodes_released", r"lingjund\.batch INFO job=(\d+) released"))


def launch_path(state: Path, array: str) -> dict[str, list[float]]:
    """Seconds between consecutive events of each array task's path, from the
    logs (``<state>/logs``); tasks missing an event are left out."""
    import re
    from datetime import datetime
    pats = [(n, re.compile(p.format(array=re.escape(array)))) for n, p in PATH_EVENTS]
    seen: dict[int, dict[str, float]] = {}
    for log in sorted((state / "logs").glob("*.log")):
        with open(log, errors="replace") as f:
            for line in f:
                for n, p in pats:
                    m = p.search(line)
                    if m:
                        try:
                            t = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                        except ValueError:
                            break
                        seen.setdefault(int(m.group(1)), {})[n] = t
                        break
    names = [n for n, _ in PATH_EVENTS]
    steps: dict[str, list[float]] = {}
    for ev in seen.values():
        if all(n in ev for n in names):
            for a, b in zip(names, names[1:]):
                steps.setdefault(f"{a}_to_{b}", []).append(ev[b] - ev[a])
            steps.setdefault("whole", []).append(ev[names[-1]] - ev[names[0]])
    return steps


def phase_launch(side: Side, o: argparse.Namespace) -> list[Figure]:
    deadline = time.monotonic() + o.limit
    lat, errors, late = [], [], 0
    for i in range(1, o.launch + 1):
        if time.monotonic() > deadline:
            errors.append(f"gave up after {o.limit:.0f}s")
            break
        out = side.work / f"launch{i}.out"
        a = time.perf_counter()
        _, err = submit(side, "launch", [f"--output={out}", "--wrap", "echo up"],
                        deadline - time.monotonic())
        if err:
            errors.append(err)
            continue
        cap = min(a + LAUNCH_CAP_S, time.perf_counter() + max(deadline - time.monotonic(), 0))
        while not (out.exists() and out.stat().st_size > 0) and time.perf_counter() < cap:
            time.sleep(FILE_POLL_S)
        if out.exists() and out.stat().st_size > 0:
            lat.append(time.perf_counter() - a)
        else:
            late += 1
    note = _join(_failures(errors, o.launch),
                 f"{late} output file(s) never appeared within {LAUNCH_CAP_S:.0f}s" if late else "")
    if not lat:
        return [Figure("launch_latency_median", None, "s", note)]
    return [Figure("launch_latency_median", statistics.median(lat), "s", note),
            Figure("launch_latency_min", min(lat), "s", table=False),
            Figure("launch_latency_max", max(lat), "s", table=False)]


def phase_gang(side: Side, o: argparse.Namespace) -> list[Figure]:
    name = f"gang2_{o.gang}_submit_and_drain"
    t0 = time.perf_counter()
    deadline = time.monotonic() + o.limit
    errors, gave_up = [], ""
    for i in range(o.gang):
        if time.monotonic() > deadline:
            gave_up = f"gave up submitting after {o.limit:.0f}s ({i} of {o.gang} tried)"
            break
        _, err = submit(side, "gang", ["-N", "2", "--output=/dev/null", "--wrap", "true"],
                        deadline - time.monotonic())
        if err:
            errors.append(err)
    ids = side.jobs.get("gang", [])
    note = _join(gave_up, _failures(errors, o.gang))
    if not ids:
        return [Figure(name, None, "s", note)]
    t2, dnote = drain(side, ids, deadline)
    return [Figure(name, t2 - t0, "s", _join(note, dnote))]


def end_states(side: Side, phase: str) -> tuple[Figure, str] | None:
    """How many of the phase's jobs ended COMPLETED, per sacct, and every end state
    seen: a scheduler that fails its jobs fast has no throughput to boast of."""
    ids = side.jobs.get(phase, [])
    if not ids or "sacct" not in side.bins:
        return None
    name = f"completed_{phase}"
    p = side.run("sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(ids), timeout=60)
    if p.returncode != 0:
        return Figure(name, None, "jobs", f"sacct failed: {_last_line(p.stderr)}"), ""
    states = collections.Counter(
        cols[1].split()[0] for cols in (line.split("|") for line in p.stdout.splitlines())
        if len(cols) >= 2 and cols[1].strip())
    seen = " ".join(f"{k}={v}" for k, v in sorted(states.items())) or "sacct knows none"
    ok = states.get("COMPLETED", 0)
    return Figure(name, ok, "jobs", "" if ok == len(ids) else f"of {len(ids)}: {seen}"), seen


# ---- bringing the sides up --------------------------------------------------------------------

def _free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in (6817, 6818, 6819):
            return port


def _resolve(side: Side, names: tuple[str, ...], want_dir: str) -> str:
    """Fill side.bins from its PATH; a reason when a needed one is missing or elsewhere."""
    wrong = {}
    for cmd in names:
        path = shutil.which(cmd, path=side.env["PATH"])
        if path and os.path.dirname(path) == want_dir:
            side.bins[cmd] = path
        elif path:   # another system's command (a pyenv shim, Slurm's): never use it
            wrong[cmd] = path
    for cmd in ("sbatch", "squeue", "scancel"):
        if cmd in wrong:
            return f"{cmd} resolves to {wrong[cmd]}, not in {want_dir}"
        if cmd not in side.bins:
            return f"no {cmd} on PATH"
    return ""


def _log_tail(logs: Path, lines: int = 8) -> str:
    out = []
    for log in sorted(logs.glob("*.log")) if logs.is_dir() else []:
        text = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        if text:
            out.append(f"--- {log}\n" + "\n".join(text[-lines:]))
    return "\n".join(out)


def lingjun_up(side: Side, state: Path, o: argparse.Namespace) -> None:
    """Start a private local cluster; sets side.reason when it does not come up."""
    bindir = os.path.dirname(sys.executable)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGJUN_")}
    env.update(PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
               LINGJUN_HOME=str(state / "home"), LINGJUN_CONTROLLER=f"127.0.0.1:{port}")
    side.env = env
    side.state = state
    side.reason = _resolve(side, ("sbatch", "squeue", "scancel", "sacct", "lingjun"), bindir)
    if side.reason:
        return
    if "lingjun" not in side.bins:
        side.reason = f"no lingjun command in {bindir}"
        return
    for attempt in range(1, o.up_attempts + 1):
        p = side.run("lingjun", "up", "--nodes", str(o.nodes), "--cpus", str(o.cpus),
                     "--state-dir", str(state), "--port", str(port),
                     "--max-array-size", str(max(1001, o.array + 1)), timeout=120)
        if p.returncode == 0:
            side.reason = ""
            return
        side.reason = (f"`lingjun up` failed (rc {p.returncode}): "
                       f"{_last_line(p.stderr) or _last_line(p.stdout)}\n{_log_tail(state / 'logs')}")
        if attempt < o.up_attempts:
            print(f"# lingjun up failed (attempt {attempt}), retrying in {o.up_wait:.0f}s",
                  flush=True)
            side.run("lingjun", "down", "--state-dir", str(state), timeout=60)
            time.sleep(o.up_wait)


def lingjun_down(side: Side, state: Path) -> None:
    if "lingjun" in side.bins:
        side.run("lingjun", "down", "--state-dir", str(state), timeout=60)


def slurm_side(side: Side) -> None:
    """Use the real Slurm on this machine when its controller answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGJUN_")}
    env["PATH"] = os.pathsep.join([SLURM_BIN, "/usr/sbin", "/bin", "/sbin", os.environ.get("PATH", "")])
    side.env = env
    scontrol = os.path.join(SLURM_BIN, "scontrol")
    if not os.access(scontrol, os.X_OK):
        side.reason = f"{scontrol} is not installed (../shared/anchors/slurm/start.sh installs it)"
        return
    try:
        p = subprocess.run([scontrol, "ping"], env=env, capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        side.reason = "`scontrol ping` timed out"
        return
    if p.returncode != 0 or "UP" not in p.stdout:
        side.reason = f"`scontrol ping` rc {p.returncode}: {_last_line(p.stdout + p.stderr)}"
        return
    side.reason = _resolve(side, ("sbatch", "squeue", "scancel", "sacct"), SLURM_BIN)


# ---- the report -------------------------------------------------------------------------------

def _fmt(f: Figure | None) -> str:
    if f is None:
        return "-"
    if f.value is None:
        return "FAILED"
    text = f"{f.value:.1f}" if f.unit == "jobs/s" else (
        f"{f.value:.0f}" if f.unit == "jobs" else f"{f.value:.4g}")
    return text + ("*" if f.note else "")


def report(results: dict[str, dict[str, Figure]], sides: dict[str, Side],
           order: list[str]) -> None:
    print("\n== table (* = partial, see notes; s: lower is better, jobs/s: higher is better)")
    rows = [("metric", "lingjun", "slurm", "ratio (lingjun/slurm)")]
    for name in order:
        if not (results["lingjun"].get(name) or results["slurm"].get(name)).table:
            continue
        lj, sl = results["lingjun"].get(name), results["slurm"].get(name)
        unit = (lj or sl).unit
        ratio = "-"
        if lj and sl and lj.value is not None and sl.value:
            ratio = f"{lj.value / sl.value:.3g}"
        rows.append((f"{name} ({unit})" if unit else name, _fmt(lj), _fmt(sl), ratio))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for k, r in enumerate(rows):
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            print("-+-".join("-" * w for w in widths))
    notes = [f"  {s} {n}: {f.note}" for s in SYSTEMS for n, f in results[s].items() if f.note]
    if notes:
        print("notes:")
        print("\n".join(notes))
    for name in SYSTEMS:
        if not sides[name].available:
            print(f"{name}: not available ({sides[name].reason})")


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=int(env("N", 200)), help="sequential submissions (N)")
    p.add_argument("--gang", type=int, default=int(env("GANG", 50)), help="2-node jobs (GANG)")
    p.add_argument("--lat", type=int, default=int(env("LAT", 15)), help="sbatch latency samples (LAT)")
    p.add_argument("--launch", type=int, default=int(env("LAUNCH", 5)),
                   help="launch latency samples (LAUNCH)")
    p.add_argument("--array", type=int, default=int(env("ARRAY", 10000)),
                   help="array tasks, `sbatch --array=1-ARRAY`; 0 skips the phase (ARRAY; "
                        "Slurm needs MaxArraySize > ARRAY in slurm.conf)")
    p.add_argument("--limit", type=float, default=float(env("LIMIT", 300)),
                   help="seconds after which each phase gives up (LIMIT)")
    p.add_argument("--systems", default=env("SYSTEMS", ",".join(SYSTEMS)),
                   help="comma-separated subset of lingjun,slurm (SYSTEMS)")
    p.add_argument("--nodes", type=int, default=4, help="Lingjun local cluster's nodes")
    p.add_argument("--cpus", type=int, default=2, help="CPUs per Lingjun node")
    p.add_argument("--up-attempts", type=int, default=1, help="tries of `lingjun up`")
    p.add_argument("--up-wait", type=float, default=60.0, help="seconds between those tries")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--keep", action="store_true", help="keep the work folder (Lingjun's logs)")
    o = p.parse_args(argv)
    wanted = [s.strip() for s in o.systems.split(",") if s.strip()]
    if not wanted or set(wanted) - set(SYSTEMS):
        p.error(f"--systems takes a subset of {','.join(SYSTEMS)}")

    # SIGTERM too must stop the local cluster and cancel our jobs.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    work = Path(tempfile.mkdtemp(prefix="lingjun-bench-"))
    sides = {name: Side(name) for name in SYSTEMS}
    for name, side in sides.items():
        side.work = work / name
        side.work.mkdir()
        if name not in wanted:
            side.reason = "not asked for (--systems)"
    state = work / "lingjun-state"
    results: dict[str, dict[str, Figure]] = {name: {} for name in SYSTEMS}
    order: list[str] = []
    keep = o.keep
    try:
        if sides["slurm"].available:
            slurm_side(sides["slurm"])
        if sides["lingjun"].available:
            lingjun_up(sides["lingjun"], state, o)
            keep = keep or not sides["lingjun"].available
        live = [s for s in sides.values() if s.available]
        print(f"# N={o.n} GANG={o.gang} LAT={o.lat} LAUNCH={o.launch} ARRAY={o.array} "
              f"LIMIT={o.limit:.0f}; phases interleaved, the side going first alternates")
        for s in sides.values():
            print(f"# {s.name}: " + (f"sbatch={s.bins['sbatch']}" if s.available
                                     else f"not available ({s.reason.splitlines()[0]})"))
        phases: list[tuple[str, Callable[[Side, argparse.Namespace], list[Figure]]]] = [
            ("latency", phase_latency), ("throughput", phase_throughput)]
        if o.array > 0:
            phases.append(("array", phase_array))
        phases += [("launch", phase_launch), ("gang", phase_gang)]
        for k, (phase, run) in enumerate(phases):
            for side in (live if k % 2 == 0 else live[::-1]):
                for f in run(side, o):
                    results[side.name][f.name] = f
                    if f.name not in order:
                        order.append(f.name)
                    print(f"{side.name} {f.name} {'FAILED' if f.value is None else f'{f.value:.4g}'}"
                          f" {f.unit}" + (f"  # {f.note}" if f.note else ""), flush=True)
                cancel(side, side.jobs.get(phase, []))
        time.sleep(2)   # slurmdbd records job ends a moment after squeue forgets them
        for side in live:
            for phase in ("throughput", "gang"):
                found = end_states(side, phase)
                if found:
                    f, seen = found
                    results[side.name][f.name] = f
                    if f.name not in order:
                        order.append(f.name)
                    print(f"{side.name} {f.name} {'FAILED' if f.value is None else f'{f.value:.0f}'}"
                          f" {f.unit}  # {seen or f.note}", flush=True)
        report(results, sides, order)
        if o.json:
            Path(o.json).write_text(json.dumps(
                {"params": vars(o), "available": {n: s.reason or "yes" for n, s in sides.items()},
                 "figures": {n: {k: vars(f) for k, f in r.items()} for n, r in results.items()}},
                indent=2))
        return 0 if any(s.available for s in sides.values()) else 1
    except KeyboardInterrupt:
        print("# interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for side in sides.values():
            if side.bins:
                for ids in side.jobs.values():
                    cancel(side, ids)
        lingjun_down(sides["lingjun"], state)
        if keep:
            print(f"# work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
