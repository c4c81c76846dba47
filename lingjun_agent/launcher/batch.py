"""Batch scripts: start them under a supervisor, and find them again.

The agent never runs a batch script itself. ``start_batch`` writes the job
into ``<state_dir>/jobs/<job_id>/`` and starts a detached supervisor
(``lingjun_agent.launcher.stepd``, our slurmstepd) that runs the script and
records its end in ``result.json``: forked from the agent's forkserver
(``forkserver``: milliseconds, the supervisor's code already imported) or,
where that cannot be had, started afresh as ``python -m ...stepd`` (about
0.1 s of CPU). Either way the supervisor lives in its own session, so a
``kill -9`` of the agent leaves the job running; after a restart
``recover_batches`` turns the job directories back into handles and results:

    job dir holds                       recover_batches gives
    result.json                         a BatchResult (until forget_batch)
    stepd.json, that process alive      a BatchHandle to wait on
    stepd.json, that process gone       BatchResult(signal=9, error="lost: ...")

"That process" means the recorded pid *and* its recorded start time, so a
recycled pid is never mistaken for our supervisor. A lost result is written
to result.json too, so every job dir ends with one result until the
controller acknowledges it (``forget_batch``).

``BatchHandle.wait`` waits on a pidfd of the supervisor through the event
loop (no polling), for a handle from ``start_batch`` and for a recovered one
alike (the latter is not our child: someone else reaps it).

Failures that Slurm reports as the job's own (output file cannot be opened,
script cannot be executed) are results, with the message in the job's
stderr file as slurmstepd words it. ``LaunchError`` is for the agent's side:
state directory unusable, supervisor did not start, job already running.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import lingjun_agent
from lingjun_agent.launcher import cgroups
from lingjun_agent.launcher.forkserver import ForkServer, SpawnRefused
from lingjun_agent.launcher.marks import (
    SCRIPT_PID,
    STEPD_DIR_VAR,
    STEPD_MARK_VAR,
    job_mark,
    start_ticks,
)
from lingjun_agent.launcher.stepd import LOG, RESULT, SCRIPT, SPEC, STEPD, write_json_atomic

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 30.0
LOST_SIGNAL = 9


@dataclass(frozen=True)
class BatchSpec:
    job_id: int
    node: str
    script: str
    argv: tuple[str, ...]
    env: dict[str, str]
    work_dir: str
    stdout: str  # a path (expanded); relative ones are taken in work_dir
    stderr: str  # "" = same as stdout
    stdin: str  # "" = /dev/null
    uid: int
    gid: int
    append: bool = False  # --open-mode=append
    files: dict[str, str] | None = None  # --launcher's host files: name -> contents
    lease: str = ""  # the agent's lease file: the supervisor fences the job when it lapses
    limits: cgroups.Limits | None = None  # what the job's cgroup holds it to (None: nothing)


@dataclass(frozen=True)
class BatchResult:
    """How a batch script ended: ``exit_code:signal`` as Slurm prints it.

    Killed by a signal: exit_code 0, signal N (Slurm's ``0:15``). Could not be
    executed: exit_code errno (Slurm's ``exit(errno)``: 2 for a missing
    interpreter, 13 for permission denied) and ``error`` says why. Output file
    could not be opened: exit_code 1. Supervisor lost: signal 9, error "lost".
    """
    job_id: int
    exit_code: int
    signal: int
    start_time: int
    end_time: int
    max_rss_kb: int
    error: str = ""
    ave_rss_kb: int = 0               # mean of the supervisor's samples of the tree
    user_cpu_ms: int = 0
    system_cpu_ms: int = 0
    out_of_memory: bool = False       # the OOM killer hit the job (then signal 125)
    # the job's GPUs as the agent sampled them (gpuusage; not the supervisor's)
    gpu_util_ave: int = 0
    gpu_util_max: int = 0
    gpu_mem_ave_kb: int = 0
    gpu_mem_max_kb: int = 0


class LaunchError(Exception):
    """The agent could not start (or restart) a supervisor for the job."""


def job_dir(state_dir: Path, job_id: int) -> Path:
    return Path(state_dir) / "jobs" / str(job_id)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_result(d: Path) -> BatchResult | None:
    r = _read_json(d / RESULT)
    if r is None:
        return None
    return BatchResult(**{k: r[k] for k in BatchResult.__dataclass_fields__ if k in r})


def _lost(d: Path, job_id: int, why: str) -> BatchResult:
    """Record that the supervisor vanished without a result, and return it."""
    script = _read_json(d / SCRIPT_PID)
    try:
        started = int((d / (SCRIPT_PID if script else SPEC)).stat().st_mtime)
    except OSError:
        started = int(time.time())
    result = BatchResult(job_id=job_id, exit_code=0, signal=LOST_SIGNAL,
                         start_time=started, end_time=int(time.time()),
                         max_rss_kb=0, error=f"lost: {why}")
    log.warning("job %d: %s", job_id, result.error)
    try:
        write_json_atomic(d / RESULT, asdict(result))
    except OSError:
        log.exception("job %d: cannot record the lost result", job_id)
    return result


def _live_supervisor(d: Path) -> int | None:
    """The supervisor's pid if the one recorded in ``d`` still runs."""
    rec = _read_json(d / STEPD)
    if not rec or rec.get("start_ticks") is None:
        return None
    pid = int(rec["pid"])
    return pid if start_ticks(pid) == rec["start_ticks"] else None


class BatchHandle:
    """A running batch job: its script's pid, and a way to wait for its end."""

    def __init__(self, job_id: int, pid: int, job_dir: Path, supervisor_pid: int,
                 pidfd: int | None, popen: subprocess.Popen | None = None):
        self.job_id = job_id
        self.pid = pid  # the script's pid; 0 if it never started
        self.job_dir = job_dir
        self.supervisor_pid = supervisor_pid
        self._pidfd = pidfd
        self._popen = popen  # set when the supervisor is our child
        self._exited: asyncio.Future | None = None
        self._result: BatchResult | None = None

    def __repr__(self) -> str:
        return (f"BatchHandle(job_id={self.job_id}, pid={self.pid}, "
                f"supervisor_pid={self.supervisor_pid})")

    def _on_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is None:
            return
        loop.remove_reader(fd)
        if self._popen is not None:
            self._popen.wait()  # it has exited: this only reaps
        else:
            try:  # reap it if it happens to be our child after all
                os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
            except ChildProcessError:
                pass
        os.close(fd)
        if self._exited is not None and not self._exited.done():
            self._exited.set_result(None)

    async def wait(self) -> BatchResult:
        """The job's result, once its supervisor has exited.

        Safe to await from several coroutines and again after it returned;
        cancelling one waiter leaves the others waiting.
        """
        if self._result is not None:
            return self._result
        if self._pidfd is not None:
            if self._exited is None:
                loop = asyncio.get_running_loop()
                self._exited = loop.create_future()
                loop.add_reader(self._pidfd, self._on_exit, loop)
            await asyncio.shield(self._exited)
        if self._result is None:
            self._result = _read_result(self.job_dir) or _lost(
                self.job_dir, self.job_id,
                f"supervisor {self.supervisor_pid} exited without a result")
        return self._result

    def __del__(self) -> None:
        if self._pidfd is not None:
            try:
                os.close(self._pidfd)
            except OSError:
                pass


def _write_script(d: Path, spec: BatchSpec) -> None:
    fd = os.open(d / SCRIPT, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    try:
        os.write(fd, spec.script.encode())
        os.fchmod(fd, 0o700)
        if os.geteuid() == 0 and spec.uid != 0:
            os.fchown(fd, spec.uid, spec.gid)
    finally:
        os.close(fd)


def _supervisor_env(spec: BatchSpec, where: Path) -> dict[str, str]:
    return _supervisor_env_for(spec.node, spec.job_id, where)


def _supervisor_env_for(node: str, job_id: int, where: Path) -> dict[str, str]:
    """A supervisor's own environment: enough to import us, its marker, and
    its directory (where ``procs`` finds the script it started).

    Not the job's: the job's environment goes to the script (or tasks) alone,
    and not the agent's, which could carry another job's marker.
    """
    root = str(Path(lingjun_agent.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "PYTHONPATH": root + (os.pathsep + path if path else ""),
        "LANG": "C.UTF-8",
        STEPD_MARK_VAR: job_mark(node, job_id),
        STEPD_DIR_VAR: str(where),
    }


def _read_handshake(fd: int, timeout: float) -> int | None:
    """The script pid the supervisor reports; None if it exits without one."""
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 64)
        if not chunk:
            return None
        buf += chunk
    return int(buf.split(b"\n", 1)[0])


def start_batch(state_dir: Path, spec: BatchSpec, forks: ForkServer | None = None) -> BatchHandle:
    """Start ``spec`` under a detached supervisor; return once the script runs.

    The supervisor is forked from ``forks`` (milliseconds) where given and
    working, else started afresh (a Python start-up, about 0.1 s of CPU).
    Blocks until the script runs: call it through ``asyncio.to_thread`` from
    the event loop.
    """
    d = job_dir(state_dir, spec.job_id)
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        # Users must reach their script (mode 0700, theirs) through here, but
        # not list other jobs: execute-only for others. state_dir itself
        # must be traversable, as /var/spool/slurmd is.
        os.chmod(d.parent, 0o711)
        if d.exists():
            pid = _live_supervisor(d)
            if pid is not None:
                raise LaunchError(f"job {spec.job_id} is already running on "
                                  f"{spec.node} (supervisor pid {pid})")
            shutil.rmtree(d)
        d.mkdir(mode=0o711)
        os.chmod(d, 0o711)
        _write_script(d, spec)
        for name, text in (spec.files or {}).items():
            (d / name).write_text(text)
            os.chmod(d / name, 0o644)  # the job's user reads it through the 0711 dir
        spec_json = asdict(spec)
        spec_json["argv"] = list(spec.argv)
        write_json_atomic(d / SPEC, spec_json, durable=False)   # read by live processes only
    except OSError as e:
        raise LaunchError(f"job {spec.job_id}: cannot prepare {d}: {e}") from e

    if forks is not None:
        handle = _fork_supervisor(forks, d, spec)
        if handle is not None:
            return handle
    return _exec_supervisor(d, spec)


def fork_supervisor(forks: ForkServer, module: str, d: Path, env: dict[str, str],
                    what: str) -> tuple[tuple[int, int] | None, int | None]:
    """Fork ``module``'s supervisor for directory ``d`` and read its handshake:
    ((pid, pidfd) or None, what the handshake said or None at its end).

    (None, None): no supervisor was born; start it afresh. Where the
    forkserver failed mid-request, the handshake pipe, whose write end only a
    supervisor can still hold, tells whether one was: (None, its word).
    Raises LaunchError when it said nothing in time (then it is killed).
    """
    r, w = os.pipe()
    got: tuple[int, int] | None = None
    try:
        logfd = os.open(d / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            got = forks.spawn(module, d, env, w, logfd)
        except SpawnRefused as e:
            log.warning("%s: forkserver refused it (%s); starting its supervisor afresh",
                        what, e)
        finally:
            os.close(logfd)
    except OSError as e:
        os.close(r)
        raise LaunchError(f"{what}: cannot open {d / LOG}: {e}") from e
    finally:
        os.close(w)
    try:
        said = _read_handshake(r, HANDSHAKE_TIMEOUT_S)
    except TimeoutError:
        if got is not None:
            signal.pidfd_send_signal(got[1], signal.SIGKILL)
            os.close(got[1])
        raise LaunchError(f"{what}: supervisor did not start within "
                          f"{HANDSHAKE_TIMEOUT_S:.0f}s") from None
    finally:
        os.close(r)
    return got, said


def _fork_supervisor(forks: ForkServer, d: Path, spec: BatchSpec) -> BatchHandle | None:
    """The batch supervisor forked; None: it was not born (start it afresh)."""
    got, script_pid = fork_supervisor(forks, "lingjun_agent.launcher.stepd", d,
                                      _supervisor_env(spec, d), f"job {spec.job_id}")
    if got is None:
        if script_pid is None:
            return None
        handle = _recover_handle(d, spec.job_id)   # born before the forkserver failed
        return handle or BatchHandle(spec.job_id, script_pid, d, 0, None)
    pid, pidfd = got
    if script_pid is None:  # it exited without a word: a result may say why
        select.select([pidfd], [], [], HANDSHAKE_TIMEOUT_S)
        if _read_result(d) is None:
            os.close(pidfd)
            tail = (d / LOG).read_text(errors="replace")[-500:]
            raise LaunchError(f"job {spec.job_id}: supervisor exited early: {tail}")
    log.info("job %d on %s: batch script pid %s under supervisor %d (forked)",
             spec.job_id, spec.node, script_pid, pid)
    return BatchHandle(spec.job_id, script_pid or 0, d, pid, pidfd)


def _exec_supervisor(d: Path, spec: BatchSpec) -> BatchHandle:
    """The supervisor as a fresh ``python -m lingjun_agent.launcher.stepd``."""
    r, w = os.pipe()
    try:
        with os.fdopen(os.open(d / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as logf:
            popen = subprocess.Popen(
                [sys.executable, "-P", "-m", "lingjun_agent.launcher.stepd", str(d), str(w)],
                pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                cwd="/", env=_supervisor_env(spec, d), start_new_session=True)
    except OSError as e:
        os.close(r)
        raise LaunchError(f"job {spec.job_id}: cannot start supervisor: {e}") from e
    finally:
        os.close(w)
    try:
        pidfd = os.pidfd_open(popen.pid)  # our unreaped child: it is the one
        script_pid = _read_handshake(r, HANDSHAKE_TIMEOUT_S)
    except TimeoutError:
        popen.kill()
        popen.wait()
        os.close(pidfd)
        raise LaunchError(f"job {spec.job_id}: supervisor did not start the script "
                          f"within {HANDSHAKE_TIMEOUT_S:.0f}s") from None
    finally:
        os.close(r)
    if script_pid is None:  # it exited without a word: a result may say why
        popen.wait()
        if _read_result(d) is None:
            os.close(pidfd)
            tail = (d / LOG).read_text(errors="replace")[-500:]
            raise LaunchError(f"job {spec.job_id}: supervisor exited early: {tail}")
    log.info("job %d on %s: batch script pid %s under supervisor %d",
             spec.job_id, spec.node, script_pid, popen.pid)
    return BatchHandle(spec.job_id, script_pid or 0, d, popen.pid, pidfd, popen)


def recover_batches(state_dir: Path) -> tuple[list[BatchHandle], list[BatchResult]]:
    """After an agent restart: running jobs as handles, finished ones as results."""
    handles: list[BatchHandle] = []
    results: list[BatchResult] = []
    jobs = Path(state_dir) / "jobs"
    if not jobs.is_dir():
        return handles, results
    for d in sorted(jobs.iterdir(), key=lambda p: p.name):
        if d.name.startswith(FORGOTTEN):
            shutil.rmtree(d, ignore_errors=True)     # acknowledged before a crash
            continue
        if not d.name.isdigit() or not d.is_dir():
            continue
        job_id = int(d.name)
        result = _read_result(d)
        if result is not None:
            results.append(result)
            continue
        handle = _recover_handle(d, job_id)
        if handle is not None:
            handles.append(handle)
            continue
        # It may have finished between the two looks.
        results.append(_read_result(d) or _lost(d, job_id, "supervisor vanished "
                                                "without a result"))
    log.info("recovered %d running and %d finished batch jobs from %s",
             len(handles), len(results), jobs)
    return handles, results


def _recover_handle(d: Path, job_id: int) -> BatchHandle | None:
    rec = _read_json(d / STEPD)
    if not rec or rec.get("start_ticks") is None:
        return None
    pid = int(rec["pid"])
    if start_ticks(pid) != rec["start_ticks"]:
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    # The pidfd names whatever had the pid when opened: check that again.
    if start_ticks(pid) != rec["start_ticks"]:
        os.close(pidfd)
        return None
    script = _read_json(d / SCRIPT_PID) or {}
    return BatchHandle(job_id, int(script.get("pid", 0)), d, pid, pidfd)


FORGOTTEN = ".forgotten-"


def forget_batch(state_dir: Path, job_id: int, remove: bool = True) -> Path | None:
    """The controller has the result: drop everything kept for the job.

    The job dir is renamed out of the way at once (a relaunch of the job
    starts afresh) and then removed; ``remove=False`` returns the renamed
    dir for the caller to remove off its event loop (a handful of unlinks
    on a busy disk take milliseconds). ``recover_batches`` removes any that
    a crash left behind.
    """
    d = job_dir(state_dir, job_id)
    gone = d.with_name(f"{FORGOTTEN}{job_id}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(d, gone)
    except FileNotFoundError:
        return None
    except OSError:
        shutil.rmtree(d, ignore_errors=True)
        return None
    if not remove:
        return gone
    shutil.rmtree(gone, ignore_errors=True)
    return None
