"""srun steps on this node: start them under a supervisor, read what they wrote.

The agent never starts a task itself. ``start_step`` writes the step into
``<state_dir>/steps/<job_id>.<step_id>/`` and starts a detached supervisor
(``lingjun_agent.launcher.taskd``) that runs the node's tasks of the step.
The tasks write their output to files there; ``StepHandle.read`` hands the
agent what was written past the offsets it has relayed, and each task's exit
once its output is whole. A ``kill -9`` of the agent leaves the step running;
``recover_steps`` finds it again:

    step dir holds                            recover_steps gives
    stepd.json, that process alive            a running StepHandle
    result.json, or no live supervisor        a finished one (exits on disk;
                                              a task without one is lost: 0:9)

A step stays on disk until the controller has recorded its end
(``forget_step``), so a restarted agent, or one that reconnects to a
restarted controller, can relay all of its output and exits again from any
offset: the controller drops what it already has.

Starting the supervisor is ``subprocess.Popen`` without a change of user,
which CPython does with ``vfork`` + ``exec``: nothing runs in the child
between, so none of gRPC's fork handlers (the cause of crashed tasks when the
agent forked a user's task itself).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lingjun_agent.launcher import cgroups
from lingjun_agent.launcher import batch
from lingjun_agent.launcher.batch import _read_handshake, _supervisor_env_for
from lingjun_agent.launcher.forkserver import ForkServer
from lingjun_agent.launcher.marks import start_ticks
from lingjun_agent.launcher.stepd import LOG, RESULT, SPEC, STEPD, write_json_atomic
from lingjun_agent.launcher.taskd import exit_file, out_file, task_file

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 30.0
READ_LIMIT = 1 << 20      # bytes read from one file per call
LOST_SIGNAL = 9


class LaunchError(Exception):
    """The agent could not start a supervisor for the step."""


@dataclass(frozen=True)
class TaskSpec:
    rank: int
    env: dict[str, str] = field(default_factory=dict)   # per-task additions
    stdout_path: str = ""    # srun -o with %t/%n/%N, expanded; "" = relayed
    stderr_path: str = ""


@dataclass(frozen=True)
class StepSpec:
    job_id: int
    step_id: int
    node: str                # the job marker's node part (procs.node_identity)
    argv: tuple[str, ...]
    env: dict[str, str]
    work_dir: str
    uid: int
    gid: int
    tasks: tuple[TaskSpec, ...]
    lease: str = ""          # the agent's lease file: the supervisor fences by it ("" = none)
    limits: cgroups.Limits | None = None  # the job's on this node (None: nothing held)
    step_memory_bytes: int = 0    # the step's own --mem here, within the job's (0: the job's)


@dataclass(frozen=True)
class TaskResult:
    """exit_code:signal as Slurm records a task (killed: exit_code 0, signal N)."""
    exit_code: int
    signal: int
    max_rss_kb: int = 0
    error: str = ""
    ave_rss_kb: int = 0
    user_cpu_ms: int = 0
    system_cpu_ms: int = 0


def steps_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "steps"


def step_dir(state_dir: Path, job_id: int, step_id: int) -> Path:
    return steps_dir(state_dir) / f"{job_id}.{step_id}"


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _alive(rec: dict | None) -> int | None:
    if not rec or rec.get("start_ticks") is None:
        return None
    pid = int(rec["pid"])
    return pid if start_ticks(pid) == rec["start_ticks"] else None


class StepHandle:
    """One step's tasks on this node, running or finished, and their files."""

    def __init__(self, d: Path, spec: dict):
        self.dir = d
        self.job_id = int(spec["job_id"])
        self.step_id = int(spec["step_id"])
        self.uid = int(spec["uid"])
        self.ranks = [int(t["rank"]) for t in spec["tasks"]]
        self.relayed = {(int(t["rank"]), s) for t in spec["tasks"]
                        for s, k in ((1, "stdout_path"), (2, "stderr_path")) if not t.get(k)}
        self.offsets: dict[tuple[int, int], int] = {k: 0 for k in self.relayed}
        self.exits_sent: set[int] = set()
        self._popen: subprocess.Popen | None = None

    @property
    def key(self) -> tuple[int, int]:
        return self.job_id, self.step_id

    def __repr__(self) -> str:
        return f"StepHandle(job_id={self.job_id}, step_id={self.step_id})"

    def supervisor_pid(self) -> int | None:
        """The supervisor's pid while it runs."""
        if self._popen is not None and self._popen.poll() is not None:
            return None
        return _alive(_read_json(self.dir / STEPD))

    def running(self) -> bool:
        return not (self.dir / RESULT).exists() and self.supervisor_pid() is not None

    def kill(self) -> None:
        """End every task now (the supervisor SIGKILLs their sessions)."""
        pid = self.supervisor_pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def resume_from(self, offsets: dict[tuple[int, int], int]) -> None:
        """Relay again from these offsets (0 where none is given), every exit again."""
        self.offsets = {k: offsets.get(k, 0) for k in self.relayed}
        self.exits_sent = set()

    def read(self) -> tuple[list[tuple[int, int, int, bytes]], list[tuple[int, TaskResult]]]:
        """What is new: output chunks (rank, stream, offset, data) past the
        offsets, and the exits of tasks whose output has all been read. The
        caller relays them, then they count as relayed."""
        # Which tasks have ended, looked at before their output is read: an exit
        # file is written once the task's session is gone, so output read after
        # seeing it is whole. (Read the other way round, output written between
        # the two looks would come after its exit.)
        ended = {r: rec for r in self.ranks if r not in self.exits_sent
                 and (rec := _read_json(self.dir / exit_file(r))) is not None}
        chunks = []
        for (rank, stream), at in sorted(self.offsets.items()):
            try:
                with open(self.dir / out_file(rank, stream), "rb") as f:
                    f.seek(at)
                    data = f.read(READ_LIMIT)
            except OSError:
                continue
            if data:
                chunks.append((rank, stream, at, data))
                self.offsets[(rank, stream)] = at + len(data)
        exits = []
        running = None
        for rank in self.ranks:
            if rank in self.exits_sent:
                continue
            if any(c[0] == rank and len(c[3]) == READ_LIMIT for c in chunks):
                continue          # more to read first: its exit comes after its output
            rec = ended.get(rank)
            if rec is None:
                if running is None:
                    running = self.running()
                if running or (self.dir / exit_file(rank)).exists():
                    continue          # its exit comes at the next look, after its output
                # The supervisor is gone and left nothing: the task is lost.
                rec = _lost(self.dir, rank)
            self.exits_sent.add(rank)
            exits.append((rank, TaskResult(**{k: rec[k] for k in TaskResult.__dataclass_fields__
                                             if k in rec})))
        return chunks, exits

    def done(self) -> bool:
        """Every exit relayed."""
        return len(self.exits_sent) == len(self.ranks)


def _lost(d: Path, rank: int) -> dict:
    rec = {"rank": rank, "exit_code": 0, "signal": LOST_SIGNAL,
           "error": "lost: step supervisor vanished"}
    try:
        write_json_atomic(d / exit_file(rank), rec)
    except OSError:
        pass
    log.warning("%s task %d: supervisor vanished without an exit", d.name, rank)
    return rec


def start_step(state_dir: Path, spec: StepSpec, forks: ForkServer | None = None) -> StepHandle:
    """Start ``spec`` under a detached supervisor; return once its tasks run.

    The supervisor is forked from ``forks`` where given and working, else
    started afresh (a Python start-up). Blocks until the tasks run: call it
    through ``asyncio.to_thread`` from the event loop.
    """
    d = step_dir(state_dir, spec.job_id, spec.step_id)
    body = asdict(spec)
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(d.parent, 0o700)
        if d.exists():
            if _alive(_read_json(d / STEPD)) is not None:
                raise LaunchError(f"step {spec.job_id}.{spec.step_id} is already running")
            shutil.rmtree(d)
        d.mkdir(mode=0o700)
        write_json_atomic(d / SPEC, body, durable=False)   # read by live processes only
    except OSError as e:
        raise LaunchError(f"step {spec.job_id}.{spec.step_id}: cannot prepare {d}: {e}") from e
    if forks is not None:
        what = f"step {spec.job_id}.{spec.step_id}"
        try:
            got, said = batch.fork_supervisor(forks, "lingjun_agent.launcher.taskd", d,
                                              _supervisor_env_for(spec.node, spec.job_id, d), what)
        except batch.LaunchError as e:
            raise LaunchError(str(e)) from None
        if got is not None or said is not None:
            if got is not None:
                os.close(got[1])      # the handle looks by stepd.json, as after a restart
            log.info("job=%d step=%d on %s: %d task(s) under supervisor %s (forked)",
                     spec.job_id, spec.step_id, spec.node, len(spec.tasks),
                     got[0] if got else "?")
            return StepHandle(d, body)
    r, w = os.pipe()
    try:
        with open(d / LOG, "ab") as logf:
            popen = subprocess.Popen(
                [sys.executable, "-P", "-m", "lingjun_agent.launcher.taskd", str(d), str(w)],
                pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                cwd="/", env=_supervisor_env_for(spec.node, spec.job_id, d),
                start_new_session=True)
    except OSError as e:
        os.close(r)
        raise LaunchError(f"step {spec.job_id}.{spec.step_id}: cannot start supervisor: "
                          f"{e}") from e
    finally:
        os.close(w)
    try:
        _read_handshake(r, HANDSHAKE_TIMEOUT_S)
    except TimeoutError:
        popen.kill()
        popen.wait()
        raise LaunchError(f"step {spec.job_id}.{spec.step_id}: supervisor did not start "
                          f"the tasks within {HANDSHAKE_TIMEOUT_S:.0f}s") from None
    finally:
        os.close(r)
    h = StepHandle(d, body)
    h._popen = popen
    log.info("job=%d step=%d on %s: %d task(s) under supervisor %d", spec.job_id,
             spec.step_id, spec.node, len(spec.tasks), popen.pid)
    return h


def recover_steps(state_dir: Path) -> list[StepHandle]:
    """After an agent restart: every step still on disk, running or finished."""
    found = []
    root = steps_dir(state_dir)
    if not root.is_dir():
        return found
    for d in sorted(root.iterdir()):
        spec = _read_json(d / SPEC)
        if spec is None:
            shutil.rmtree(d, ignore_errors=True)   # a start that never got going
            continue
        found.append(StepHandle(d, spec))
    log.info("recovered %d step(s) from %s", len(found), root)
    return found


def reap(h: StepHandle) -> None:
    """Reap the supervisor if it is our child and has exited."""
    if h._popen is not None:
        h._popen.poll()


def forget_step(h: StepHandle) -> None:
    """The controller has the step's end (or no longer wants it): drop its files."""
    reap(h)
    shutil.rmtree(h.dir, ignore_errors=True)


def wait_started(h: StepHandle, timeout: float = 5.0) -> None:
    """For tests: until each task has a pid or an exit file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all((h.dir / task_file(r)).exists() or (h.dir / exit_file(r)).exists()
               for r in h.ranks):
            return
        time.sleep(0.01)
