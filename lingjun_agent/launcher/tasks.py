"""One task of an ``srun`` step, run by the agent with its output streamed.

``run_task`` starts the task in its own session as the job's user, with the
job's marker in its environment, and hands each chunk of stdout (1) and
stderr (2) to ``on_output`` as soon as the pipe yields it. Everything is
driven by the event loop: the pipes and a pidfd of the task are loop
readers, and ``wait4`` on the pidfd's exit gives the status and CPU time.
While it runs, the memory of its process tree is sampled (``usage``): the
peak of the summed RSS is the task's MaxRSS.

What the user sees mirrors slurmstepd:

- a command that cannot be executed writes
  ``slurmstepd: error: execve(): <cmd>: <strerror>`` to the task's stderr
  (through ``on_output(2, ...)``) and ends with exit code ``errno``
  (``exit(errno)``: 2 for "No such file or directory", 13 for "Permission
  denied"); ``TaskResult.error`` holds the same words for the log, so the
  caller must not print it again;
- a missing working directory writes Slurm's ``couldn't chdir to ...:
  going to /tmp instead`` line and runs the task in /tmp;
- when the task exits, what is still in its session (background children)
  is killed, as Slurm's proctrack kills the rest of a step, after at most
  DRAIN_S of waiting for them to close the pipes; their output until then
  arrives.

Cancelling the coroutine kills the task's process group (its session) with
SIGKILL, the supervisor's way of ending a step at once; the task is reaped
in the background.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Callable

from lingjun_agent.launcher import cgroups, usage, userfs
from lingjun_agent.launcher.stepd import MARK_VAR, job_mark, user_groups

log = logging.getLogger(__name__)

READ_SIZE = 65536
DRAIN_S = 0.2  # after the task exits, how long its children may keep the pipes


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


def _error_line(text: str) -> bytes:
    return f"slurmstepd: error: {text}\n".encode()


def _emit(on_output: Callable[[int, bytes], None], stream: int, data: bytes) -> None:
    try:
        on_output(stream, data)
    except Exception:  # the consumer's bug must not stall the task's pipes
        log.exception("on_output failed")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_task(*, node: str, job_id: int, step_id: int, rank: int,
                   argv: list[str], env: dict[str, str], cwd: str, uid: int,
                   gid: int, on_output: Callable[[int, bytes], None],
                   cgroup: cgroups.JobCgroup | None = None) -> TaskResult:
    """Run one task to its end; see the module doc for what the user sees."""
    who = f"job {job_id} step {step_id} task {rank} on {node}"
    if not argv:
        msg = "execve(): : No such file or directory"
        _emit(on_output, 2, _error_line(msg))
        return TaskResult(exit_code=2, signal=0, error=msg)

    full_env = dict(env)
    full_env[MARK_VAR] = job_mark(node, job_id)
    drop: dict = {}
    if os.geteuid() == 0 and uid != 0:
        drop = {"user": uid, "group": gid, "extra_groups": user_groups(uid, gid)}
    elif uid != os.geteuid():
        log.warning("%s: agent is not root; running as uid %d, not %d", who,
                    os.geteuid(), uid)
    if not os.path.isdir(cwd):
        _emit(on_output, 2, _error_line(
            f"couldn't chdir to `{cwd}': No such file or directory: going to /tmp instead"))
        cwd = "/tmp"

    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=full_env, cwd=cwd, start_new_session=True,
            close_fds=True, umask=userfs.umask_of(env), **drop)
    except OSError as e:
        errno_ = e.errno or 1
        if e.filename == cwd and cwd != argv[0]:
            msg = f"couldn't chdir to `{cwd}': {os.strerror(errno_)}"
        else:
            msg = f"execve(): {argv[0]}: {os.strerror(errno_)}"
        _emit(on_output, 2, _error_line(msg))
        log.info("%s: %s", who, msg)
        return TaskResult(exit_code=errno_, signal=0, error=msg)

    if cgroup is not None:
        # At once, but after the fork: a child the task forks before this
        # line stays outside (the marker still finds it). A single-threaded
        # supervisor starts its children inside instead (cgroups.inside).
        try:
            cgroups.join(cgroup, proc.pid)
        except OSError as e:
            log.warning("%s: cannot join cgroup %s: %s", who, cgroup, e)
    loop = asyncio.get_running_loop()
    pidfd = os.pidfd_open(proc.pid)  # our unreaped child: it is the one
    exited = loop.create_future()
    streams = {proc.stdout.fileno(): 1, proc.stderr.fileno(): 2}
    open_fds = set(streams)
    all_eof = loop.create_future()

    def on_readable(fd: int) -> None:
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            _emit(on_output, streams[fd], data)
            return
        loop.remove_reader(fd)
        open_fds.discard(fd)
        if not open_fds and not all_eof.done():
            all_eof.set_result(None)

    def on_exit() -> None:
        loop.remove_reader(pidfd)
        if not exited.done():
            exited.set_result(None)

    for fd in streams:
        os.set_blocking(fd, False)
        loop.add_reader(fd, on_readable, fd)
    loop.add_reader(pidfd, on_exit)
    log.info("%s: started pid %d: %s", who, proc.pid, argv[0])

    rss = usage.RssSampler()
    rss.add(usage.tree_rss_kb(proc.pid))  # now, before a quick task is gone
    sampler = asyncio.create_task(_sample(proc.pid, rss, exited))
    reaped = False
    try:
        await exited
        try:
            _, status, rusage = os.wait4(proc.pid, 0)  # it has exited: only reaps
        except ChildProcessError:  # someone's waitpid(-1) took it first
            status, rusage = None, None
        reaped = True
        if status is not None:
            proc.returncode = os.waitstatus_to_exitcode(status)
        # Children left in the session may still hold the pipes: give them a
        # moment to finish writing, then end them as Slurm ends the rest of a
        # step, and take what they wrote before dying.
        if open_fds:
            try:
                await asyncio.wait_for(asyncio.shield(all_eof), DRAIN_S)
            except TimeoutError:
                pass
        _kill_group(proc.pid)
        if open_fds:
            try:
                await asyncio.wait_for(asyncio.shield(all_eof), 1.0)
            except TimeoutError:
                log.warning("%s: output pipes still open after the kill", who)
    except asyncio.CancelledError:
        # The pgid is the task's pid, kept from reuse while any member lives.
        _kill_group(proc.pid)
        if not reaped:
            loop.remove_reader(pidfd)
            _reap_later(loop, proc, os.dup(pidfd))
        log.info("%s: cancelled, process group killed", who)
        raise
    finally:
        sampler.cancel()
        for fd in list(open_fds):
            loop.remove_reader(fd)
        proc.stdout.close()
        proc.stderr.close()
        if not exited.done():
            loop.remove_reader(pidfd)
        os.close(pidfd)

    if status is None:
        log.error("%s: exit status lost: reaped by someone else", who)
        return TaskResult(exit_code=1, signal=0, error="exit status lost")
    if os.WIFSIGNALED(status):
        code, sig = 0, os.WTERMSIG(status)
    else:
        code, sig = os.WEXITSTATUS(status), 0
    log.info("%s: ended %d:%d", who, code, sig)
    user_ms, sys_ms = usage.cpu_ms(rusage)
    return TaskResult(exit_code=code, signal=sig, max_rss_kb=rss.peak_kb,
                      ave_rss_kb=rss.average_kb, user_cpu_ms=user_ms, system_cpu_ms=sys_ms)


async def _sample(pid: int, rss: usage.RssSampler, exited: asyncio.Future) -> None:
    """Sample the task's tree until it exits. The /proc scan is a few
    milliseconds: done on the loop, as other agent work is."""
    for interval in usage.intervals():
        if exited.done():
            return
        try:
            rss.add(usage.tree_rss_kb(pid))
        except Exception:  # accounting must never break the task
            log.exception("sampling task pid %d failed", pid)
            return
        await asyncio.sleep(interval)


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


def _reap_later(loop: asyncio.AbstractEventLoop, proc: subprocess.Popen,
                pidfd: int) -> None:
    """Reap a killed task once it has died, without blocking the loop."""
    def done() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        proc.wait()

    loop.add_reader(pidfd, done)
