"""Supervisors forked from a pre-imported process instead of started afresh.

A supervisor (``stepd`` for a batch script, ``taskd`` for a step's tasks)
used to be a fresh ``python -m ...``: about 0.1 s of CPU per job on start-up
and imports, most of a short job's cost. The agent keeps one forkserver
instead, ``python -m lingjun_agent.launcher.forkserver <fd>``: started once
(and again when it dies), single-threaded, holding the supervisors' code
imported. For each job it forks a child that *is* the supervisor:

    agent ──(unix socket: module, dir, env; fds: handshake, log)──► forkserver
    agent ◄──(pid; fd: a pidfd of the new supervisor)─────────────── forkserver
                                                                      │ fork
                                                                      ▼
                                        supervisor: setsid, fds 0/1/2 = null/log/log,
                                        cwd /, its own environment, then ``main``

The child becomes what ``python -m <module> <dir> <handshake fd>`` would
have been: a session of its own, the supervisor environment (also in
``/proc/<pid>/environ``, where ``procs`` finds its marker: the forkserver
starts with a reserved slot in its environment that each child overwrites),
``stepd.json`` with its own pid and start time (``begin_supervisor``), the
handshake to the agent. It owes the agent nothing else: the agent waits on
the pidfd, and after a restart finds it again by ``stepd.json``, as any
supervisor. The forkserver is its parent only to reap it.

Independence: a ``kill -9`` of the agent closes the socket, and the
forkserver exits at once; a ``kill -9`` of the forkserver is seen by the
agent at its next request. Either way the supervisors run on in their own
sessions (reparented to init) and nothing waits for them but the agent's
pidfds and ``stepd.json``. Never forked from the agent itself: it is a
multi-threaded gRPC process (see ``taskd``).

``ForkServer.spawn`` is the agent's side. When the forkserver cannot be
started or did not answer, it returns None and the caller starts the
supervisor the old way (``exec``). Where the request reached a forkserver
that then died, the caller's handshake pipe says whether a supervisor was
born (it holds the pipe's write end): ``batch``/``steps`` look there before
falling back, so a job never starts twice.
"""
from __future__ import annotations

import ctypes
import gc
import importlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path

log = logging.getLogger(__name__)

# The forkserver's environment slot that each supervisor rewrites with its own
# environment (``/proc/<pid>/environ`` shows the process's own memory there).
SLOT_VAR = "LINGJUN_SUPERVISOR_ENV"
SLOT_BYTES = 8192
MODULES = ("lingjun_agent.launcher.stepd", "lingjun_agent.launcher.taskd")
# and what they import only when a job ends: procs, which brings asyncio
# along, was two thirds of a forked supervisor's CPU when imported in it
PRELOAD = ("lingjun_agent.launcher.procs",)
REPLY_TIMEOUT_S = 10.0
MAX_MESSAGE = 1 << 16
PR_SET_NAME = 15


class SpawnRefused(Exception):
    """The forkserver answered that it could not start this supervisor."""


# ---- the forkserver process ------------------------------------------------------------------

def _environ_region() -> tuple[int, int]:
    """Where this process's initial environment lies in its memory."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[47]), int(fields[48])     # env_start (50), env_end (51)


def _rewrite_environ(env: dict[str, str], region: tuple[int, int]) -> None:
    """Make ``/proc/self/environ`` show ``env`` (after os.environ is set, which
    leaves libc's environ pointing at copies, never into this region)."""
    start, end = region
    data = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())
    if len(data) > end - start:
        raise SpawnRefused(f"supervisor environment of {len(data)} bytes does not fit "
                           f"the forkserver's {end - start}")
    data += b"\0" * (end - start - len(data))
    ctypes.memmove(start, data, len(data))


def _become_supervisor(module, where: str, env: dict[str, str], handshake: int, logfd: int,
                       wake_fd: int, region: tuple[int, int]) -> int:
    """In the forked child: turn into ``python -m <module> <where> <handshake>``."""
    signal.set_wakeup_fd(-1)
    os.close(wake_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(logfd, 1)
    os.dup2(logfd, 2)
    os.closerange(3, handshake)
    os.closerange(handshake + 1, max(os.sysconf("SC_OPEN_MAX"), handshake + 2))
    os.chdir("/")
    os.environ.clear()
    os.environ.update(env)
    _rewrite_environ(env, region)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        name = module.__name__.rsplit(".", 1)[-1]
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(f"lingjun-{name}".encode()), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    sys.argv = [module.__file__, where, str(handshake)]
    return module.main(sys.argv)


def _spawn(conn: socket.socket, wake_fd: int, region: tuple[int, int], modules: dict) -> None:
    """Serve one request: fork the supervisor, answer with its pid and pidfd."""
    data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 2)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError
    try:
        req = json.loads(data)
        if len(fds) != 2:
            raise SpawnRefused(f"want 2 descriptors, got {len(fds)}")
        module = modules.get(req["module"])
        if module is None:
            raise SpawnRefused(f"no supervisor module {req['module']!r}")
        env = {str(k): str(v) for k, v in req["env"].items()}
        size = sum(len(f"{k}={v}".encode()) + 1 for k, v in env.items())
        if size > region[1] - region[0]:
            raise SpawnRefused(f"supervisor environment of {size} bytes does not fit "
                               f"the forkserver's {region[1] - region[0]}")
        handshake, logfd = fds
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                conn.close()
                code = _become_supervisor(module, req["dir"], env, handshake, logfd,
                                          wake_fd, region)
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code if isinstance(code, int) else 1)
        pidfd = os.pidfd_open(pid)    # our unreaped child: it is the one
        try:
            socket.send_fds(conn, [json.dumps({"pid": pid}).encode()], [pidfd])
        finally:
            os.close(pidfd)
    except (SpawnRefused, ValueError, KeyError, TypeError, OSError) as e:
        conn.send(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
    finally:
        for fd in fds:
            os.close(fd)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return


def serve(conn: socket.socket) -> int:
    """The forkserver's loop: requests from the agent, and reaping its children."""
    modules = {name: importlib.import_module(name) for name in MODULES}
    for name in PRELOAD:
        importlib.import_module(name)
    # What is imported stays put: the children's collector never walks (and
    # so never copies) the pages of these objects.
    gc.collect()
    gc.freeze()
    region = _environ_region()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        ready, _, _ = select.select([conn, wake_r], [], [])
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        _reap()
        if conn in ready:
            try:
                _spawn(conn, wake_w, region, modules)
            except (EOFError, ConnectionError):
                return 0     # the agent is gone; its supervisors are not ours to keep


# ---- the agent's side ------------------------------------------------------------------------

class ForkServer:
    """The agent's handle on its forkserver: started on first use and again
    after it dies; thread-safe (the agent starts jobs from worker threads)."""

    def __init__(self, log_path: Path | str):
        self.log_path = Path(log_path)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self.starts = 0       # how many forkservers this agent has started

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
               "PYTHONPATH": root + (os.pathsep + path if path else ""),
               "LANG": "C.UTF-8", SLOT_VAR: "-" * SLOT_BYTES}
        try:
            with open(self.log_path, "ab") as logf:
                self._proc = subprocess.Popen(
                    [sys.executable, "-P", "-m", __name__, str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=logf,
                    stderr=logf, cwd="/", env=env, start_new_session=True)
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(REPLY_TIMEOUT_S)
        self._sock = ours
        self.starts += 1
        log.info("forkserver started, pid %d", self._proc.pid)

    def _drop(self, why: str) -> None:
        """Forget the forkserver (killed if it still runs); the next spawn starts one."""
        if self._proc is not None:
            log.warning("forkserver %d: %s; starting supervisors afresh until it is back",
                        self._proc.pid, why)
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
        if self._sock is not None:
            self._sock.close()
        self._proc = self._sock = None

    def spawn(self, module: str, where: Path, env: dict[str, str], handshake_fd: int,
              log_fd: int) -> tuple[int, int] | None:
        """Fork a supervisor running ``module`` for ``where``: (pid, pidfd), or
        None when the forkserver is not there or did not answer (it is then
        stopped; the handshake pipe tells whether a supervisor was born)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is not None:
                self._drop(f"exited with {self._proc.returncode}")
            if self._proc is None:
                try:
                    self._start()
                except OSError as e:
                    log.error("cannot start the forkserver: %s", e)
                    return None
            req = json.dumps({"module": module, "dir": str(where), "env": env}).encode()
            try:
                socket.send_fds(self._sock, [req], [handshake_fd, log_fd])
                data, fds, _, _ = socket.recv_fds(self._sock, MAX_MESSAGE, 1)
            except OSError as e:       # a timeout too
                self._drop(f"no answer ({e})")
                return None
            if not data:
                self._drop("closed the connection")
                for fd in fds:
                    os.close(fd)
                return None
        reply = json.loads(data)
        if "error" in reply or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise SpawnRefused(reply.get("error", "no pidfd in the answer"))
        return int(reply["pid"]), fds[0]

    def close(self) -> None:
        """Stop the forkserver (its supervisors run on)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc = None


def main(argv: list[str]) -> int:
    conn = socket.socket(fileno=int(argv[1]))
    conn.setblocking(True)
    return serve(conn)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
