"""Per-job cgroups: every process of a job on this node, found and killed.

Our proctrack/cgroup. Each job gets one cgroup in the v1 freezer hierarchy::

    /sys/fs/cgroup/freezer/lingjun/<node>/job_<id>/

``<node>`` is the agent's identity (``procs.node_identity``: node name plus a
digest of its state dir), because several agents of a local cluster share a
host. A process started inside the cgroup cannot leave it (only root moves
processes), so ``setsid``, a double fork and ``env -i`` all stay found: the
marker in the environment (``procs``) does not survive ``env -i``, the
subreaper tree does not survive the agent's own tasks' orphans; the cgroup
survives both.

How processes get in. A supervisor (single-threaded) enters the cgroup,
starts the job's process, and leaves again (``inside``): the child is born
in it, and so is everything it ever starts. The supervisor itself must stay
outside, since killing freezes the cgroup. The agent (many threads) cannot do
that and moves a task in right after starting it (``join(cg, pid)``): a task
that forks within that instant leaves its child behind, which the marker
still finds. Supervisors of steps do it the supervisor's way.

How they are killed (``kill``): freeze the cgroup, SIGKILL every process in
it, thaw (frozen processes die on thaw), and again until it is empty, so a
fork bomb cannot outrun us. ``terminate`` sends SIGCONT and SIGTERM first
and waits the grace. ``remove`` drops the empty cgroup.

The calls, for a supervisor::

    cg = cgroups.create(node, job_id)        # None: no cgroups here
    with cgroups.inside(cg):
        proc = subprocess.Popen(...)         # born inside, with all it starts
    ...
    cgroups.terminate(cg, grace_s)           # or kill(cg): SIGKILL at once
    cgroups.remove(cg)

Where cgroups cannot be used (no v1 freezer mounted, not root) ``create``
returns None and the callers fall back to the marker and subreaper tree of
``procs``, with its one gap (``env -i setsid`` from a task that the agent runs
directly). A later change adds memory, CPU and device limits to the same
per-job cgroups in their own hierarchies.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

FREEZER = Path("/sys/fs/cgroup/freezer")
BASE = FREEZER / "lingjun"
POLL_S = 0.02
UNKILLABLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class JobCgroup:
    path: Path
    job_id: int

    def __str__(self) -> str:
        return str(self.path)


def node_dir(node: str, base: Path = BASE) -> Path:
    return Path(base) / node.replace("/", "_")


def job_path(node: str, job_id: int, base: Path = BASE) -> Path:
    return node_dir(node, base) / f"job_{job_id}"


def available(base: Path = BASE) -> bool:
    """Whether this process can make and fill job cgroups under ``base``."""
    if os.geteuid() != 0:
        return False
    probe = Path(base).parent
    return (probe / "cgroup.procs").exists() and os.access(probe, os.W_OK)


def create(node: str, job_id: int, base: Path = BASE) -> JobCgroup | None:
    """Make (or find) the job's cgroup; None where cgroups are unavailable."""
    if not available(base):
        return None
    path = job_path(node, job_id, base)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        log.warning("job %d: cannot create cgroup %s (%s): tracking by marker only",
                    job_id, path, e.strerror)
        return None
    return JobCgroup(path, job_id)


def find(node: str, job_id: int, base: Path = BASE) -> JobCgroup | None:
    """The job's cgroup if it exists."""
    path = job_path(node, job_id, base)
    return JobCgroup(path, job_id) if (path / "cgroup.procs").exists() else None


def jobs(node: str, base: Path = BASE) -> list[JobCgroup]:
    """Every job cgroup of ``node``."""
    d = node_dir(node, base)
    try:
        names = os.listdir(d)
    except OSError:
        return []
    out = []
    for name in sorted(names):
        if name.startswith("job_") and name[4:].isdigit():
            out.append(JobCgroup(d / name, int(name[4:])))
    return out


def join(cg: JobCgroup | Path, pid: int = 0) -> None:
    """Move ``pid`` (0: the caller) and all its threads into the cgroup."""
    path = cg.path if isinstance(cg, JobCgroup) else Path(cg)
    with open(path / "cgroup.procs", "w") as f:
        f.write(str(pid or os.getpid()))


def _current() -> Path:
    """The freezer cgroup the caller lives in (where ``inside`` returns it)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, rel = line.rstrip("\n").split(":", 2)
            if "freezer" in controllers.split(","):
                return FREEZER / rel.lstrip("/")
    return FREEZER


@contextlib.contextmanager
def inside(cg: JobCgroup | None) -> Iterator[None]:
    """Run the block inside the job's cgroup, then return to where we were:
    a process forked in the block is born in it. Single-threaded callers only
    (it moves the whole process). ``None`` does nothing."""
    if cg is None:
        yield
        return
    home = _current()
    try:
        join(cg)
    except OSError as e:     # tracked by the marker instead; the job still runs
        log.warning("job %d: cannot enter cgroup %s: %s", cg.job_id, cg.path, e)
        yield
        return
    try:
        yield
    finally:
        join(home)


def pids(cg: JobCgroup) -> list[int]:
    try:
        with open(cg.path / "cgroup.procs") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def _state(cg: JobCgroup, value: str) -> None:
    with open(cg.path / "freezer.state", "w") as f:
        f.write(value)


def _freeze(cg: JobCgroup, timeout: float = 2.0) -> None:
    """Ask for FROZEN and wait for it (FREEZING while tasks are in the kernel)."""
    _state(cg, "FROZEN")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(cg.path / "freezer.state") as f:
            if f.read().strip() == "FROZEN":
                return
        time.sleep(0.005)


def signal_all(cg: JobCgroup, sig: int) -> int:
    """Send ``sig`` to every process in the cgroup; returns how many."""
    n = 0
    for pid in pids(cg):
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, sig)
            n += 1
        except ProcessLookupError:
            pass
    return n


def kill(cg: JobCgroup, unkillable_s: float = UNKILLABLE_TIMEOUT_S) -> bool:
    """SIGKILL everything in the cgroup, frozen so none can fork meanwhile.

    Returns once it is empty (True), or False after ``unkillable_s`` with
    processes still in it (uninterruptible sleep: Slurm's "Kill task failed").
    """
    give_up = time.monotonic() + unkillable_s
    while True:
        left = [p for p in pids(cg) if p != os.getpid()]
        if not left:
            return True
        if time.monotonic() > give_up:
            log.error("job %d: processes %s in %s survived SIGKILL", cg.job_id, left, cg.path)
            return False
        try:
            _freeze(cg)
            signal_all(cg, signal.SIGKILL)
        except FileNotFoundError:
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                _state(cg, "THAWED")
        time.sleep(POLL_S)


def signal_frozen(cg: JobCgroup, *sigs: int) -> int:
    """Send ``sigs`` to every process in the cgroup while it is frozen (no pid
    can exit and be reused meanwhile, none can fork); returns how many."""
    try:
        _freeze(cg)
        n = 0
        for sig in sigs:
            n = signal_all(cg, sig)
        return n
    except FileNotFoundError:
        return 0
    finally:
        with contextlib.suppress(FileNotFoundError):
            _state(cg, "THAWED")


def terminate(cg: JobCgroup, grace_s: float, unkillable_s: float = UNKILLABLE_TIMEOUT_S) -> bool:
    """SIGCONT and SIGTERM to all, ``grace_s`` to go, then ``kill``."""
    if signal_frozen(cg, signal.SIGCONT, signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(p != os.getpid() for p in pids(cg)):
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return kill(cg, unkillable_s)


def remove(cg: JobCgroup, timeout: float = 2.0) -> bool:
    """Drop the (emptied) cgroup; the last exits may take a moment to leave it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(cg.path)
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                log.warning("job %d: cannot remove cgroup %s: %s", cg.job_id, cg.path, e.strerror)
                return False
            time.sleep(POLL_S)


def remove_node(node: str, base: Path = BASE) -> None:
    """Drop the node's directory once no job cgroup is left in it."""
    with contextlib.suppress(OSError):
        os.rmdir(node_dir(node, base))
