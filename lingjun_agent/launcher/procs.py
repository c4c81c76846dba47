"""Finding, signalling and killing a job's processes on this node.

Our proctrack. Every process the launcher starts carries
``LINGJUN_JOB_MARK=<node>:<job_id>`` in its environment, and each batch
supervisor carries ``LINGJUN_STEPD_MARK=<node>:<job_id>``. The node name is
part of the marker because several agents of the local cluster share one
host: node1's agent must never touch node2's processes of the same job.

A job's processes are:

- every live process whose initial environment (``/proc/<pid>/environ``)
  holds the job's marker, and
- every descendant of those, and every descendant of the job's supervisor
  (it is a child subreaper, so the script's orphans land below it), which
  catches children that were started with a cleaned environment,

never the supervisor itself (it must live to record the result) and never
the calling process. Zombies do not count: they have already exited.

- every process in the job's cgroup on this node (``cgroups``), where the
  host has them: nothing started inside it can leave it.

What is not found where there are no cgroups (not root, no v1 freezer): a
process that both dropped the marker and escaped the tree (its supervisor
adopts orphans, but a double fork with ``env -i`` out of a supervisor that
has exited goes to init).

The whole-/proc scans read raw ``/proc`` files (a few milliseconds for a few
hundred processes) and hand back ``psutil.Process`` objects, whose signalling
methods refuse to act on a recycled pid.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal as signal_mod
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from lingjun_agent.launcher import cgroups
from lingjun_agent.launcher.marks import (
    MARK_VAR,
    SCRIPT_PID,
    STEPD_DIR_VAR,
    STEPD_MARK_VAR,
    job_mark,
    start_ticks,
)

log = logging.getLogger(__name__)

POLL_S = 0.05
UNKILLABLE_TIMEOUT_S = 60.0


class UnkillableError(RuntimeError):
    """Processes survived SIGKILL for too long (Slurm: "Kill task failed")."""

    def __init__(self, node: str, job_id: int, pids: list[int]):
        super().__init__(f"job {job_id} on {node}: processes {pids} survived SIGKILL")
        self.node, self.job_id, self.pids = node, job_id, pids


@dataclass(frozen=True)
class _Entry:
    pid: int
    ppid: int
    environ: bytes  # b"\0" + raw environ + b"\0", so entries match whole


def _scan() -> list[_Entry]:
    entries = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields[0] in (b"Z", b"X"):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, a kernel thread, or not ours to read
            environ = b""
        entries.append(_Entry(pid, int(fields[1]), b"\0" + environ + b"\0"))
    return entries


def _entry(var: str, node: str, job_id: int) -> bytes:
    return f"\0{var}={job_mark(node, job_id)}\0".encode()


def _job_pids(node: str, job_id: int) -> tuple[set[int], set[int]]:
    """(the job's pids, its supervisors' pids) from one scan."""
    entries = _scan()
    mark = _entry(MARK_VAR, node, job_id)
    stepd_mark = _entry(STEPD_MARK_VAR, node, job_id)
    children: dict[int, list[int]] = {}
    for e in entries:
        children.setdefault(e.ppid, []).append(e.pid)
    stepds = {e.pid for e in entries if stepd_mark in e.environ}
    roots = [e.pid for e in entries if mark in e.environ and e.pid not in stepds]
    found: set[int] = set()
    cg = cgroups.find(node, job_id)
    in_cgroup = cgroups.pids(cg) if cg is not None else []
    todo = roots + in_cgroup + [c for s in stepds for c in children.get(s, ())]
    while todo:
        pid = todo.pop()
        if pid in found or pid in stepds:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    found.discard(os.getpid())
    return found, stepds


def _as_processes(pids: set[int]) -> list[psutil.Process]:
    procs = []
    for pid in sorted(pids):
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return procs


def node_identity(node: str, state_dir: str | Path) -> str:
    """The ``node`` that marks one agent's job processes: its node name plus a
    short digest of its state dir, e.g. ``node1@3f9c2a1b``.

    Two local clusters on one host both have a node1 running a job 1; the
    digest keeps one cluster's agent from killing the other's processes.
    """
    import hashlib
    digest = hashlib.sha1(str(Path(state_dir).resolve()).encode()).hexdigest()[:8]
    return f"{node}@{digest}"


def job_processes(node: str, job_id: int) -> list[psutil.Process]:
    """The live processes of ``job_id`` on ``node`` (see the module doc)."""
    pids, _ = _job_pids(node, job_id)
    return _as_processes(pids)


def running_jobs(node: str) -> set[int]:
    """Job ids that have live marked processes (or supervisors) for ``node``."""
    prefixes = [f"\0{var}={node}:".encode() for var in (MARK_VAR, STEPD_MARK_VAR)]
    me = os.getpid()
    jobs: set[int] = set()
    for e in _scan():
        if e.pid == me:
            continue
        for prefix in prefixes:
            at = e.environ.find(prefix)
            if at < 0:
                continue
            start = at + len(prefix)
            value = e.environ[start:e.environ.index(b"\0", start)]
            if value.isdigit():
                jobs.add(int(value))
    jobs.update(cg.job_id for cg in cgroups.jobs(node) if cgroups.pids(cg))
    return jobs


def _supervisor_dir(pid: int) -> Path | None:
    """A supervisor's directory: from its environment (``STEPD_DIR_VAR``), or
    from its command line (``python -m lingjun_agent.launcher.stepd <dir>``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = b"\0" + f.read()
        key = f"\0{STEPD_DIR_VAR}=".encode()
        at = environ.find(key)
        if at >= 0:
            start = at + len(key)
            end = environ.find(b"\0", start)
            return Path(environ[start:end if end >= 0 else None].decode())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        return Path(argv[argv.index(b"lingjun_agent.launcher.stepd") + 1].decode())
    except (OSError, ValueError, IndexError):
        return None


def _batch_script(node: str, job_id: int) -> list[psutil.Process]:
    """The batch script's process, as its supervisor recorded it (pid + start)."""
    _, stepds = _job_pids(node, job_id)
    found = []
    for stepd in stepds:
        job_dir = _supervisor_dir(stepd)
        if job_dir is None:
            continue
        try:
            rec = json.loads((job_dir / SCRIPT_PID).read_text())
        except (OSError, ValueError):
            continue
        pid = int(rec["pid"])
        if rec.get("start_ticks") is not None and start_ticks(pid) == rec["start_ticks"]:
            found.extend(_as_processes({pid}))
    return found


def send(procs: list[psutil.Process], sig: int) -> int:
    """Signal each of ``procs`` (gone ones are skipped); returns how many."""
    return _send(procs, sig)


def _send(procs: list[psutil.Process], sig: int) -> int:
    sent = 0
    for p in procs:
        try:
            p.send_signal(sig)
            sent += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return sent


def _step_pids(node: str, job_id: int) -> set[int]:
    """The job's step tasks (started with SLURM_STEP_ID) and their descendants."""
    entries = _scan()
    mark = _entry(MARK_VAR, node, job_id)
    children: dict[int, list[int]] = {}
    for e in entries:
        children.setdefault(e.ppid, []).append(e.pid)
    todo = [e.pid for e in entries if mark in e.environ
            and (e.environ.startswith(STEP_VAR) or b"\0" + STEP_VAR in e.environ)]
    found: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    found.discard(os.getpid())
    return found


# Set in every step task's environment (never in the batch script's).
STEP_VAR = b"SLURM_STEP_ID="


def signal_job(node: str, job_id: int, sig: int, batch_only: bool = False,
               steps_only: bool = False) -> int:
    """Send ``sig`` to the job's processes (``batch_only``: the script alone;
    ``steps_only``: the tasks of its steps, never the script).

    Returns how many processes were signalled.
    """
    if batch_only:
        procs = _batch_script(node, job_id)
    elif steps_only:
        procs = _as_processes(_step_pids(node, job_id))
    else:
        procs = job_processes(node, job_id)
    sent = _send(procs, sig)
    log.info("job %d on %s: signal %d sent to %d processes%s", job_id, node, sig,
             sent, " (batch script)" if batch_only else "")
    return sent


def _terminate(node: str, job_id: int, grace_s: float, unkillable_s: float) -> None:
    cg = cgroups.find(node, job_id)
    if cg is not None:
        # frozen while signalled: nothing in it forks away meanwhile
        cgroups.terminate(cg, grace_s, unkillable_s)
        grace_s = 0.0                    # the grace was given; the rest is stragglers
    try:
        terminate_found(node, job_id, grace_s, unkillable_s)
    finally:
        if cg is not None:
            cgroups.remove(cg)


def terminate_found(node: str, job_id: int, grace_s: float, unkillable_s: float) -> None:
    """``terminate_job``'s blocking core without the cgroup: what the marker
    and the subreaper tree find (supervisors and the fence keeper call it)."""
    procs = job_processes(node, job_id)
    if not procs:
        return
    _send(procs, signal_mod.SIGCONT)
    _send(procs, signal_mod.SIGTERM)
    log.info("job %d on %s: SIGTERM to %d processes, %.1fs grace", job_id, node,
             len(procs), grace_s)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
        if not job_processes(node, job_id):
            return
    # Whatever is left, including children forked during the grace period.
    # Repeat until a scan comes back empty: a forking process may add one.
    give_up = time.monotonic() + unkillable_s
    while True:
        procs = job_processes(node, job_id)
        if not procs:
            return
        if time.monotonic() > give_up:
            raise UnkillableError(node, job_id, [p.pid for p in procs])
        _send(procs, signal_mod.SIGKILL)
        log.info("job %d on %s: SIGKILL to %d processes", job_id, node, len(procs))
        time.sleep(0.01)


async def terminate_job(node: str, job_id: int, grace_s: float,
                        unkillable_s: float = UNKILLABLE_TIMEOUT_S) -> None:
    """SIGCONT+SIGTERM the whole job, SIGKILL what is left after ``grace_s``.

    Returns once no process of the job is left. Runs in a worker thread: the
    event loop keeps serving while we wait. Raises UnkillableError when
    processes outlive SIGKILL by ``unkillable_s`` (uninterruptible sleep);
    Slurm drains the node in that case ("Kill task failed").
    """
    await asyncio.to_thread(_terminate, node, job_id, grace_s, unkillable_s)
