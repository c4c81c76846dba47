"""One task of an ``srun`` step, run under the step supervisor, its output
streamed: a test driver. The agent runs steps through ``steps.StepHandle``
(runner.py); this drives the same path for one task so the tests can check
what a user sees of it.

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
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from lingjun_agent.launcher import steps
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
