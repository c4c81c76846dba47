"""The node's fence keeper, one process per agent::

    python -m lingjun_agent.launcher.fencekeeper <state_dir> <node> <agent pid> <agent start>

A small process in a session of its own, that outlives the
agent as the batch supervisors do. It waits on the agent's lease
(``lease.wait``) and, when the lease ends unrenewed, stops every job of the
node: each job cgroup (``cgroups.terminate``: SIGCONT+SIGTERM, the lease's
grace, SIGKILL), and, where there are no cgroups, each job the marker finds
(``procs``). Then it waits for the lease to be renewed (the agent is back)
and keeps watching.

Why a process of its own: the tasks the agent runs directly (the ranks of
an ``srun`` step) have no supervisor, and an agent that is frozen (SIGSTOP)
or dead (kill -9) cannot stop them; a batch job's supervisor fences its own
job too (``stepd``), so a batch job is covered twice, which does no harm.

It leaves when its agent is gone (the pid and start time the lease names)
and the lease has ended and been fenced: nothing is left to guard. The
agent starts it when none runs (``ensure``), at start and at each renewal.

    <state_dir>/fencekeeper.json    {"pid", "start_ticks"}: the running keeper
    <state_dir>/fencekeeper.log     its stderr
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lingjun_agent.launcher import cgroups, lease
from lingjun_agent.launcher.marks import start_ticks
from lingjun_agent.launcher.stepd import write_json_atomic

log = logging.getLogger("lingjun_agent.fencekeeper")

PID_FILE = "fencekeeper.json"
LOG_FILE = "fencekeeper.log"
RECHECK_S = 0.5      # after a fence: how often to look for a renewal


def _running(state_dir: Path) -> int | None:
    try:
        rec = json.loads((state_dir / PID_FILE).read_text())
        pid = int(rec["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if rec.get("start_ticks") is not None and start_ticks(pid) == rec["start_ticks"] \
        else None


def ensure(state_dir: str | Path, node: str) -> subprocess.Popen | None:
    """Start the node's keeper unless one runs (by its pid file); returns the
    new one, which the caller reaps (``poll``) and counts as running meanwhile."""
    state_dir = Path(state_dir)
    if _running(state_dir) is not None:
        return None
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
           "PYTHONPATH": root + (os.pathsep + path if path else ""), "LANG": "C.UTF-8"}
    with open(state_dir / LOG_FILE, "ab") as logf:
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "lingjun_agent.launcher.fencekeeper", str(state_dir), node,
             str(os.getpid()), str(start_ticks(os.getpid()))],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, cwd="/", env=env,
            start_new_session=True)


def stop(state_dir: str | Path) -> None:
    """Stop the keeper (``lingjun down``)."""
    pid = _running(Path(state_dir))
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def fence(node: str, grace_s: float) -> int:
    """Stop every job of ``node`` here; returns how many jobs were touched.

    All at once: SIGTERM to every job, one grace for all, then SIGKILL, so
    the fence ends by lease end + grace however many jobs there are.
    """
    from lingjun_agent.launcher import procs     # the marker, where cgroups are not
    groups = [cg for cg in cgroups.jobs(node) if cgroups.pids(cg)]
    marked = {jid: procs.job_processes(node, jid) for jid in procs.running_jobs(node)}
    marked = {jid: ps for jid, ps in marked.items() if ps}
    for cg in groups:
        log.warning("job=%d node=%s: lease ended, fencing (cgroup %s)", cg.job_id, node, cg)
        cgroups.signal_frozen(cg, signal.SIGCONT, signal.SIGTERM)
    for jid, ps in marked.items():
        log.warning("job=%d node=%s: lease ended, fencing (marker)", jid, node)
        procs.send(ps, signal.SIGCONT)
        procs.send(ps, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (any(cgroups.pids(cg) for cg in groups) or any(
            procs.job_processes(node, jid) for jid in marked)):
        time.sleep(0.05)
    for cg in groups:
        cgroups.kill(cg)
    for jid in marked:
        try:
            procs.terminate_found(node, jid, 0.0, procs.UNKILLABLE_TIMEOUT_S)
        except procs.UnkillableError as e:
            log.error("%s", e)
    return len({cg.job_id for cg in groups} | set(marked))


def _alive(pid: int, start: int) -> bool:
    return pid > 0 and start_ticks(pid) == start


def keep(state_dir: Path, node: str, agent: tuple[int, int]) -> None:
    """Guard the lease until the agent is gone and nothing is left to fence.

    ``agent`` (pid, start ticks) is who started us; the lease names whoever
    renews it now (a restarted agent takes over the same keeper).
    """
    path = lease.lease_path(state_dir)
    fenced_at: float | None = None        # the lease end we fenced
    while True:
        cur = lease.read(path)
        if cur is None:                   # no terms yet: nothing runs under a lease
            if not _alive(*agent):
                break
            time.sleep(RECHECK_S)
            continue
        try:
            lease.wait(path, [], 5.0)
        except lease.Lapsed as e:
            if fenced_at != e.lease.expires_at:
                n = fence(node, e.lease.grace_s)
                log.warning("node=%s: lease ended %.1f s ago; %d job(s) fenced", node,
                            -e.lease.left(), n)
                fenced_at = e.lease.expires_at
            if not _alive(e.lease.agent_pid, e.lease.agent_start):
                break
            time.sleep(RECHECK_S)
    for cg in cgroups.jobs(node):
        if not cgroups.pids(cg):
            cgroups.remove(cg, timeout=0)
    cgroups.remove_node(node)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    state_dir, node = Path(argv[1]), argv[2]
    agent = (int(argv[3]), int(argv[4])) if len(argv) > 4 else (0, 0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    write_json_atomic(state_dir / PID_FILE, {"pid": os.getpid(),
                                             "start_ticks": start_ticks(os.getpid())})
    log.info("node=%s: fence keeper %d watching %s", node, os.getpid(), lease.lease_path(state_dir))
    keep(state_dir, node, agent)
    log.info("node=%s: agent gone and its lease fenced; fence keeper leaves", node)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
