"""One task of an ``srun`` step, run under the step supervisor, its output streamed.

``run_task`` is a step of one task on this node (launcher/steps.py) seen as
one coroutine: it starts the supervisor (``taskd``) in a scratch state
directory, hands each chunk of stdout (1) and stderr (2) to ``on_output`` as
the task writes it, and returns the task's exit. The agent itself relays
steps through ``steps.StepHandle``; this is the same path for one task.

What the user sees mirrors slurmstepd (see taskd's docstring):

- a command that cannot be executed writes
  ``slurmstepd: error: execve(): <cmd>: <strerror>`` to the task's stderr
  (through ``on_output(2, ...)``) and ends with exit code ``errno``
  (``exit(errno)``: 2 for "No such file or directory", 13 for "Permission
  denied"); ``TaskResult.error`` holds the same words for the log, so the
  caller must not print it again;
- a working directory the user cannot enter writes Slurm's ``couldn't chdir
  to ...: going to /tmp instead`` line and runs the task in /tmp;
- when the task exits, what is still in its session (background children)
  is killed, as Slurm's proctrack kills the rest of a step, after at most
  DRAIN_S of waiting; their output until then arrives.

Cancelling the coroutine kills the task's session with SIGKILL.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from lingjun_agent.launcher import steps, userfs
from lingjun_agent.launcher.stepd import user_groups
from lingjun_agent.launcher.steps import TaskResult
from lingjun_agent.launcher.taskd import DRAIN_S  # noqa: F401

log = logging.getLogger(__name__)

POLL_S = 0.02   # how often the files are looked at while the task runs


def _emit(on_output: Callable[[int, bytes], None], stream: int, data: bytes) -> None:
    try:
        on_output(stream, data)
    except Exception:  # the consumer's bug must not stall the task
        log.exception("on_output failed")


async def run_task(*, node: str, job_id: int, step_id: int, rank: int,
                   argv: list[str], env: dict[str, str], cwd: str, uid: int,
                   gid: int, on_output: Callable[[int, bytes], None],
                   state_dir: Path | None = None) -> TaskResult:
    """Run one task to its end; see the module doc for what the user sees."""
    scratch = None
    if state_dir is None:
        scratch = state_dir = Path(tempfile.mkdtemp(prefix="lingjun-task-"))
    spec = steps.StepSpec(job_id=job_id, step_id=step_id, node=node, argv=tuple(argv),
                          env=dict(env), work_dir=cwd, uid=uid, gid=gid,
                          tasks=(steps.TaskSpec(rank=rank),))
    handle = None
    try:
        handle = await asyncio.to_thread(steps.start_step, state_dir, spec)
        while True:
            chunks, exits = handle.read()
            for _, stream, _, data in chunks:
                _emit(on_output, stream, data)
            if exits:
                return exits[0][1]
            await asyncio.sleep(POLL_S)
    except asyncio.CancelledError:
        if handle is not None:
            handle.kill()
        raise
    finally:
        if handle is not None:
            steps.reap(handle)
        if scratch is not None:
            if handle is not None and handle.running():
                _remove_later(handle, scratch)
            else:
                shutil.rmtree(scratch, ignore_errors=True)


def _remove_later(handle: steps.StepHandle, scratch: Path) -> None:
    async def later() -> None:
        for _ in range(250):
            if not handle.running():
                break
            await asyncio.sleep(POLL_S)
        steps.reap(handle)
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        t = asyncio.get_running_loop().create_task(later())
        _LATER.add(t)
        t.add_done_callback(_LATER.discard)
    except RuntimeError:
        pass


_LATER: set = set()


class TaskFiles:
    """The files a task's output goes to on this node (srun -o/-e with %t, %n
    or %N), by stream: 1 stdout, 2 stderr; a stream without one is relayed to
    srun. Files are opened for appending, so tasks sharing one (``%N``) each
    add their writes whole; ``truncate`` empties each file once per step first.
    Opened by the task's user (userfs: a child with the user's ids and umask),
    so a path the user may not write fails with the user's own EACCES.
    """

    def __init__(self, stdout_path: str, stderr_path: str, uid: int, gid: int,
                 umask: int = userfs.DEFAULT_UMASK):
        self.fds: dict[int, int] = {}
        paths = list(dict.fromkeys(p for p in (stdout_path, stderr_path) if p))
        ids = userfs.Ids(uid, gid, tuple(user_groups(uid, gid)), umask)
        opened = dict(zip(paths, userfs.open_files(
            [(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND) for p in paths], ids)))
        failed = next((r for r in opened.values() if isinstance(r, OSError)), None)
        if failed is not None:
            for r in opened.values():
                if isinstance(r, int):
                    os.close(r)
            raise failed
        for stream, path in ((1, stdout_path), (2, stderr_path)):
            if path:
                self.fds[stream] = opened[path]

    @staticmethod
    def truncate(paths: set[str], uid: int | None = None, gid: int = 0,
                 umask: int = userfs.DEFAULT_UMASK) -> None:
        """Empty each file once per step, as the task's user (``uid`` None: as the agent)."""
        ids = userfs.Ids(os.geteuid() if uid is None else uid, gid,
                         tuple(user_groups(uid, gid)) if uid is not None else (), umask)
        userfs.truncate_files(sorted(paths), ids)

    def write(self, stream: int, data: bytes) -> bool:
        """Write to the stream's file; False when the stream has none (relay it)."""
        fd = self.fds.get(stream)
        if fd is None:
            return False
        try:
            os.write(fd, data)
        except OSError as e:
            log.warning("task output lost: %s", e)
        return True

    def close(self) -> None:
        for fd in set(self.fds.values()):
            os.close(fd)
        self.fds.clear()
