"""The command runner: Slurm's commands run from an interpreter that has them imported, as their user.

A command written in Python pays CPython's start (~7 ms of CPU here) and its
own imports (~4 ms) before its first line; Slurm's sbatch is a C program done
in ~3 ms. Workflow tools that submit one ``sbatch`` at a time feel the
difference (issue 17: sequential submissions at half Slurm's rate at least).
The runner is a small daemon that imports the commands once. The command a
user runs is a C program (``lingjun/command_client.c``, installed under each
command's name by ``lingjun install-commands DIR``) that connects to the
runner's unix socket and hands over its argv, environment and umask, and its
stdin, stdout, stderr and working directory as file descriptors
(``SCM_RIGHTS``). A child the runner forked beforehand (a spare, waiting on
the socket) takes the call, becomes the caller and runs the same
``cli.<command>.main`` the Python command would, on the caller's own
descriptors, and writes its exit status back; the client exits with it::

    client ──(argv, env, umask; fds 0, 1, 2 and the cwd)──► spare (forked by the runner)
    client ◄──────────────("exit N"; "signal N" from the runner)── the command, as the caller

The spare hands the connection to the runner, which forks the next spare
(off the caller's path: a fork of this interpreter is ~1.5 ms) and watches
the connection.

The child is the caller as the kernel knows it, not as the request says: uid
and gid from ``SO_PEERCRED``, the supplementary groups and the resource
limits read from the calling process (``/proc/PID/status``, ``prlimit``)
before the runner lets go of root; it then opens, reads and writes only what
that user may. It works in the caller's directory (``fchdir`` on the passed
descriptor), with its environment (``TZ`` included) and umask.

Refused, before anything runs (the client then runs the Python command
itself, which is always right, only slower): a caller in another mount
namespace (a container: its paths are not ours), a caller of another uid when
the runner is not root, a caller who cannot read the runner's interpreter or
this tree (what a command imports later it would fail to). Past ``MAX_CHILDREN`` commands at once, callers wait in
the socket's backlog. A client that goes away (Ctrl-C, a killed workflow) takes its command with it: the
runner sees the hang-up and kills the child.

The commands served are the quick ones (``COMMANDS``); srun and salloc (a
terminal's signals, job control, a step's I/O for minutes), sattach and
scrontab (an editor) stay Python processes of their own. Run it as root
beside the daemon that serves the credential socket (``lingjun up`` does; the
unit is ``systemd/lingjun-command-runner.service``); its socket is the
credential socket's sibling, ``auth.sock`` -> ``auth.runner.sock``.

Departure from DESIGN.md's "commands are plain clients of the API": the
command's code is unchanged and still talks to the controller only through
the API (the command socket or gRPC); only the process it runs in comes from
this warm parent instead of a fresh exec.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import io
import logging
import os
import pwd
import resource
import select
import signal
import socket
import struct
import sys
import time

from lingjun import credential, sdnotify
from lingjun.endpoints import beside_auth_socket

log = logging.getLogger("lingjun.runner")

# Kept in step with command_client.c's SERVED.
COMMANDS = ("sbatch", "squeue", "scancel", "sinfo", "scontrol", "sacct", "sprio", "sshare",
            "sacctmgr")
# Imported before serving, so each child starts with them. sacct is not: it
# imports grpc, whose threads must not be running in a process that forks.
PRELOAD = ("sbatch", "squeue", "scancel", "sinfo", "scontrol", "sprio", "sshare", "sacctmgr")
MAGIC = b"LJRUN1"
MAX_REQUEST_BYTES = 16 * 1024 * 1024
READ_TIMEOUT_S = 30.0
MAX_CHILDREN = 256       # commands at once; more callers wait in the socket's backlog
# /proc/PID/limits's names (fs/proc/base.c) -> the resource.
LIMIT_NAMES = {b"Max cpu time": "RLIMIT_CPU", b"Max file size": "RLIMIT_FSIZE",
               b"Max data size": "RLIMIT_DATA", b"Max stack size": "RLIMIT_STACK",
               b"Max core file size": "RLIMIT_CORE", b"Max resident set": "RLIMIT_RSS",
               b"Max processes": "RLIMIT_NPROC", b"Max open files": "RLIMIT_NOFILE",
               b"Max locked memory": "RLIMIT_MEMLOCK", b"Max address space": "RLIMIT_AS",
               b"Max file locks": "RLIMIT_LOCKS", b"Max pending signals": "RLIMIT_SIGPENDING",
               b"Max msgqueue size": "RLIMIT_MSGQUEUE", b"Max nice priority": "RLIMIT_NICE",
               b"Max realtime priority": "RLIMIT_RTPRIO", b"Max realtime timeout": "RLIMIT_RTTIME"}
LIMITS = {name: getattr(resource, r) for name, r in LIMIT_NAMES.items() if hasattr(resource, r)}


def runner_path(auth_socket: str) -> str:
    """The runner's socket beside the credential socket:
    /run/lingjun/auth.sock -> /run/lingjun/auth.runner.sock."""
    return beside_auth_socket(auth_socket, "runner")


class BadRequest(ValueError):
    pass


def parse_request(payload: bytes) -> tuple[str, int, list[str], list[bytes]]:
    """(command, umask, args, environment entries) from a request's payload."""
    parts = payload.split(b"\0")
    if len(parts) < 3 or parts[-1] != b"":
        raise BadRequest("not NUL-terminated strings")
    parts.pop()
    try:
        command = parts[0].decode("ascii")
        mask = int(parts[1], 8)
        argc = int(parts[2])
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("bad command, umask or argument count") from None
    if command not in COMMANDS:
        raise BadRequest(f"not a command the runner serves: {command!r}")
    if not 0 <= mask <= 0o777 or not 0 <= argc <= len(parts) - 3:
        raise BadRequest("umask or argument count out of range")
    args = [os.fsdecode(a) for a in parts[3:3 + argc]]
    env = [e for e in parts[3 + argc:] if b"=" in e[1:]]
    return command, mask, args, env


def _receive(conn: socket.socket) -> tuple[list[int], bytes]:
    """The caller's four descriptors and the request's payload."""
    conn.settimeout(READ_TIMEOUT_S)
    data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 8)
    try:
        while len(data) < len(MAGIC) + 4:
            more = conn.recv(65536)
            if not more:
                raise BadRequest("the request ended early")
            data += more
        if data[:len(MAGIC)] != MAGIC:
            raise BadRequest("not a runner request")
        (size,) = struct.unpack(">I", data[len(MAGIC):len(MAGIC) + 4])
        if size > MAX_REQUEST_BYTES:
            raise BadRequest(f"request of {size} bytes")
        chunks, have = [data[len(MAGIC) + 4:]], len(data) - len(MAGIC) - 4
        while have < size:
            more = conn.recv(min(1 << 20, size - have))
            if not more:
                raise BadRequest("the request ended early")
            chunks.append(more)
            have += len(more)
        if have != size or len(fds) != 4:
            raise BadRequest("not one request with four descriptors")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds, b"".join(chunks)


class CallerGone(Exception):
    """The process that connected is not there to read from (it ended, and its
    pid may be another's by now)."""


def _process(pid: int) -> tuple[bytes, frozenset[int], list[int] | None]:
    """(start time, uids, supplementary groups) of process ``pid``, from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            start = f.read().rsplit(b")", 1)[1].split()[19]
        uids, groups = frozenset(), None
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    uids = frozenset(int(u) for u in line.split()[1:])
                elif line.startswith(b"Groups:"):
                    groups = [int(g) for g in line.split()[1:]]
    except (OSError, IndexError, ValueError):
        raise CallerGone(f"pid {pid}") from None
    return start, uids, groups


def _caller(pid: int, uid: int, gid: int) -> tuple[list[int], list]:
    """The calling process's supplementary groups (``newgrp`` and ``sg``
    included) and resource limits. Read from /proc and ``prlimit`` by pid, so
    checked to be the process that connected: the same start time before and
    after, and every one of its uids the kernel's word for the caller.
    Otherwise CallerGone: a pid reused by another user's process must not
    lend its groups or limits."""
    before = _process(pid)
    limits = _limits(pid)
    if _process(pid) != before or before[1] != {uid}:
        raise CallerGone(f"pid {pid}")
    groups = before[2]
    if groups is None:
        try:
            groups = os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
        except KeyError:
            groups = [gid]
    return groups, limits


def _limits(pid: int) -> list[tuple[int, tuple[int, int]]]:
    """Process ``pid``'s resource limits, from /proc/PID/limits (prlimit(2) on
    another user's process needs CAP_SYS_RESOURCE; the file does not)."""
    def value(word: bytes) -> int:
        return resource.RLIM_INFINITY if word == b"unlimited" else int(word)
    out = []
    try:
        with open(f"/proc/{pid}/limits", "rb") as f:
            next(f)                                   # the heading
            for line in f:
                name, soft, hard = line[:26].rstrip(), line[26:47].strip(), line[47:68].strip()
                if name in LIMITS:
                    out.append((LIMITS[name], (value(soft), value(hard))))
    except (OSError, ValueError, StopIteration):
        raise CallerGone(f"pid {pid}") from None
    return out


def _become(pid: int, uid: int, gid: int) -> None:
    """This process as the caller: its limits, groups, gid and uid, in that order
    (raising a hard limit and setting groups need root, which the last step drops)."""
    groups, limits = _caller(pid, uid, gid)
    for which, value in limits:
        try:
            resource.setrlimit(which, value)
        except (OSError, ValueError):
            pass        # not root (a runner serving its own user): keep ours
    if os.geteuid() == 0:
        os.setgroups(groups)
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise PermissionError(f"could not become uid {uid}")


def _streams() -> None:
    """sys.stdin/stdout/stderr over the caller's descriptors, as Python opens them
    at start: UTF-8, stdout line-buffered on a terminal, stderr always."""
    enc = "utf-8"
    sys.stdin = io.open(0, "r", encoding=enc, errors="surrogateescape", closefd=False)
    sys.stdout = io.open(1, "w", buffering=1 if os.isatty(1) else -1, encoding=enc,
                         errors="surrogateescape", closefd=False)
    sys.stderr = io.open(2, "w", buffering=1, encoding=enc, errors="backslashreplace",
                         closefd=False)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _child(conn: socket.socket, pid: int, uid: int, gid: int) -> None:
    """A spare that took a caller: become the caller, take its request, run the
    command, say how it ended. Never returns."""
    rc = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)      # as CPython starts
        os.setsid()              # not in the runner's process group
        try:
            _become(pid, uid, gid)
        except CallerGone as e:
            _tell(conn, f"refused the calling process is gone ({e})")
            _exit(0)
        for where in _LIBRARIES:
            if not os.access(where, os.R_OK | os.X_OK):
                # what a command imports later (lazily) this caller could not read
                _tell(conn, f"refused the runner's {where} is not the caller's to read")
                _exit(0)
        fds, payload = _receive(conn)
        command, mask, args, env = parse_request(payload)
        logging.getLogger().handlers.clear()    # fd 2 is about to be the caller's
        for target, fd in enumerate(fds[:3]):
            if fd != target:
                os.dup2(fd, target)
        os.fchdir(fds[3])
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.umask(mask)
        os.environ.clear()
        for entry in env:
            key, _, value = entry.partition(b"=")
            if key and b"\0" not in key:
                os.environb[key] = value
        time.tzset()
        _streams()
        sys.argv = [command, *args]
        # A command ends its process with os._exit once its output is out
        # (cli.common.run): here that is where its status goes to the caller.
        os._exit = lambda code: _finish(conn, code)
        module = importlib.import_module(f"cli.{command}")
        try:
            rc = module.main()
        except SystemExit as e:
            rc = e.code
        except KeyboardInterrupt:
            rc = 128 + signal.SIGINT
        if rc is None:
            rc = 0
        elif not isinstance(rc, int):
            print(rc, file=sys.stderr)
            rc = 1
    except BadRequest as e:
        log.warning("refused a request of pid %d uid %d: %s", pid, uid, e)
        rc = 2
    except BaseException:       # noqa: BLE001 - the command's traceback, as Python prints it
        import traceback
        try:
            traceback.print_exc()
        except BaseException:   # noqa: BLE001
            pass
        rc = 1
    _finish(conn, rc)


def _finish(conn: socket.socket, rc: int) -> None:
    """Flush the command's output, tell the caller its status, end: the caller
    exits as soon as it reads the line, before this process is torn down."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:   # noqa: BLE001 - a reader gone: nothing more to say
            pass
    rc = rc & 0xFF if isinstance(rc, int) else 1
    _tell(conn, f"exit {rc}")
    _exit(rc)


_told = None     # in a child: its end of the handoff, where it says it told its caller


def _tell(conn: socket.socket, line: str) -> None:
    """The caller's one line (how its command ended, or a refusal), said once:
    the runner, told so on the handoff, adds nothing when this process ends."""
    _say(conn, line)
    if _told is not None:
        try:
            _told.send(b"s")
        except OSError:
            pass            # the runner stopped; the caller has its line


_exit = os._exit
# The interpreter's library and this tree: a caller who cannot read them is
# refused (its own Python command is what it can run), not served a command
# that fails at its first lazy import.
_LIBRARIES = (os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(__file__)))


def _spare(listener: socket.socket, handoff: socket.socket, mount_ns: int) -> None:
    """A forked child waiting for a caller (the fork is off the caller's path).
    It takes one, hands its connection to the parent (which then forks the
    next spare and watches for the caller hanging up) and serves it. Ends
    when the parent does. Never returns."""
    try:
        poll = select.poll()
        poll.register(listener.fileno(), select.POLLIN)
        poll.register(handoff.fileno(), select.POLLIN)
        while True:
            events = dict(poll.poll())
            if handoff.fileno() in events:
                _exit(0)            # the runner is gone (or stopping)
            try:
                conn, _ = listener.accept()
                break
            except (BlockingIOError, InterruptedError):
                continue            # another spare was quicker
        conn.setblocking(True)
        socket.send_fds(handoff, [b"c"], [conn.fileno()])
        global _told
        _told = handoff
        listener.close()
        try:
            pid, uid, gid = credential.peer_ids(conn)
        except OSError as e:
            _tell(conn, f"refused no peer credentials ({e})")
            _exit(0)
        why = _refusal(pid, uid, mount_ns)
        if why is not None:
            log.info("refused pid %d uid %d: %s", pid, uid, why)
            _tell(conn, f"refused {why}")
            _exit(0)
    except BaseException:   # noqa: BLE001 - a spare that failed says so and ends
        log.exception("command runner spare")
        _exit(1)
    _child(conn, pid, uid, gid)


def _refusal(pid: int, uid: int, mount_ns: int) -> str | None:
    if os.geteuid() not in (0, uid):
        return "another user, and the runner is not root"
    try:
        if os.stat(f"/proc/{pid}/ns/mnt").st_ino != mount_ns:
            return "another mount namespace"
    except OSError as e:
        return f"cannot see the caller's namespace ({e.strerror})"
    return None


def _say(conn: socket.socket, line: str) -> None:
    try:
        conn.settimeout(1.0)
        conn.sendall(line.encode() + b"\n")
    except OSError:
        pass            # the caller left


class _Child:
    __slots__ = ("pid", "handoff", "conn", "taken")

    def __init__(self, pid: int, handoff: socket.socket):
        self.pid, self.handoff, self.conn = pid, handoff, None
        self.taken = False          # the handoff was read (a caller, or the spare's end)


class Runner:
    """The parent: keeps ``SPARES`` forked children waiting on the socket,
    forks another as each takes a caller, kills a command whose caller hung
    up, reports a command killed by a signal, reaps them all. It never
    accepts a connection itself."""

    SPARES = 2
    RESPAWN_PAUSE_S = 1.0      # after a spare ended without a caller (a fault)
    # A spare that took a caller is replaced this long after (or at once when
    # none is left): forking the runner (~1.5 ms of CPU) right away would
    # compete with that command for a core on a small machine.
    REFILL_DELAY_S = 0.02

    def __init__(self, path: str):
        self.path = path
        self.listener: socket.socket | None = None
        self.poll = select.poll()
        self.children: dict[int, _Child] = {}       # pidfd -> child
        self.handoffs: dict[int, int] = {}          # handoff fd -> pidfd (spares)
        self.callers: dict[int, int] = {}           # caller's conn fd -> pidfd
        self.mount_ns = os.stat("/proc/self/ns/mnt").st_ino
        self.pause_until = 0.0
        self.refill_at = 0.0     # the next spare is forked once the last taken has had its start
        self.closed: set[int] = set()     # fds closed while handling this poll's events

    def listen(self) -> None:
        if os.path.exists(self.path):
            if credential._answers(self.path):
                raise OSError(f"{self.path}: another command runner already serves there")
            os.unlink(self.path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.path)
        os.chmod(self.path, 0o666)      # every user: the kernel says who each one is
        s.listen(128)
        s.setblocking(False)            # the spares poll, then accept; one wins
        self.listener = s
        log.info("running commands for callers of %s", self.path)

    def serve_forever(self) -> None:
        """Under systemd: READY=1 once the spares wait, and WATCHDOG=1 from
        this loop (a loop that stops coming round stops the pings)."""
        ping_every = sdnotify.watchdog_interval_s()
        next_ping = 0.0
        self._top_up()
        sdnotify.notify("READY=1")
        while True:
            self._top_up()
            now = time.monotonic()
            if ping_every is not None and now >= next_ping:
                sdnotify.notify("WATCHDOG=1")
                next_ping = now + ping_every
            due = [t for t in (self.pause_until, self.refill_at, next_ping if ping_every else 0.0)
                   if t > now]
            try:
                events = self.poll.poll((min(due) - now) * 1000 if due else None)
            except InterruptedError:
                continue
            self.closed.clear()
            for fd, _ev in events:
                if fd in self.closed:
                    continue        # closed by an earlier event of this batch; its number may be reused
                try:
                    if fd in self.handoffs:
                        self._taken(fd)
                    elif fd in self.children:
                        self._ended(fd)
                    elif fd in self.callers:
                        self._hung_up(fd)
                except Exception:   # noqa: BLE001 - a bug: logged; the runner serves on
                    log.exception("command runner: event on fd %d", fd)

    def _spares(self) -> int:
        return len(self.handoffs)

    def _top_up(self) -> None:
        now = time.monotonic()
        if self._spares() > 0 and now < self.refill_at:
            return          # a command is starting: its fork would take its core
        while (self._spares() < self.SPARES and len(self.children) < MAX_CHILDREN
               and time.monotonic() >= self.pause_until):
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                pid = os.fork()
            except OSError as e:
                log.warning("fork: %s", e)
                mine.close()
                theirs.close()
                self.pause_until = time.monotonic() + self.RESPAWN_PAUSE_S
                return
            if pid == 0:
                mine.close()
                self._let_go()
                _spare(self.listener, theirs, self.mount_ns)
            theirs.close()
            pidfd = os.pidfd_open(pid)
            self.children[pidfd] = _Child(pid, mine)
            self.handoffs[mine.fileno()] = pidfd
            self.poll.register(pidfd, select.POLLIN)
            self.poll.register(mine.fileno(), select.POLLIN)

    def _let_go(self) -> None:
        """In a new spare: close what it inherited of the runner's other children
        (their pidfds, handoffs and callers' connections). A caller's connection
        held on here would keep the descriptors its client passed (its stdout
        among them) alive after its command ended, and its reader waiting."""
        for pidfd, child in self.children.items():
            os.close(pidfd)
            for sock in (child.handoff, child.conn):
                if sock is not None:
                    os.close(sock.detach())
        self.children.clear()

    def _taken(self, fd: int) -> None:
        """A spare took a caller: watch the caller's connection."""
        pidfd = self.handoffs.pop(fd)
        child = self.children[pidfd]
        self.poll.unregister(fd)
        try:
            _msg, fds, _flags, _addr = socket.recv_fds(child.handoff, 16, 1, socket.MSG_DONTWAIT)
        except OSError:
            fds = []
        child.taken = True      # the handoff stays open: the child says there that it told its caller
        self.refill_at = time.monotonic() + self.REFILL_DELAY_S
        if not fds:             # a spare that ended without a caller: a fault
            log.warning("a spare (pid %d) ended without taking a caller", child.pid)
            self.pause_until = time.monotonic() + self.RESPAWN_PAUSE_S
        else:
            child.conn = socket.socket(fileno=fds[0])
            self.callers[fds[0]] = pidfd
            # POLLHUP alone (always reported): the caller closed its end, not just
            # its writing half (shutdown), which a caller may do and still read
            self.poll.register(fds[0], 0)

    def _ended(self, pidfd: int) -> None:
        child = self.children[pidfd]
        if not child.taken:
            # A quick command can end before its handoff is read (both are
            # ready in one poll): read it first, the caller waits for a word.
            self._taken(child.handoff.fileno())
        del self.children[pidfd]
        self.poll.unregister(pidfd)
        try:
            _, status = os.waitpid(child.pid, 0)
        except ChildProcessError:
            status = 1 << 8
        os.close(pidfd)
        self.closed.add(pidfd)
        try:
            told = child.handoff.recv(1, socket.MSG_DONTWAIT) == b"s"
        except OSError:
            told = False
        self.closed.add(child.handoff.fileno())
        child.handoff.close()
        if child.conn is not None:
            fd = child.conn.fileno()
            self.closed.add(fd)
            if self.callers.pop(fd, None) is not None:
                self.poll.unregister(fd)
            if told:
                pass
            elif os.WIFSIGNALED(status):        # killed before it could say
                _say(child.conn, f"signal {os.WTERMSIG(status)}")
            else:
                _say(child.conn, f"exit {os.waitstatus_to_exitcode(status)}")
            child.conn.close()

    def _hung_up(self, fd: int) -> None:
        """The caller went away before its command ended: so does the command."""
        pidfd = self.callers.pop(fd)
        self.poll.unregister(fd)
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Stop: the spares end (they see their handoff close); commands under
        way finish and tell their callers themselves."""
        for child in self.children.values():
            child.handoff.close()
        if self.listener is not None:
            self.listener.close()
            try:
                os.unlink(self.path)
            except OSError:
                pass


class InstallError(Exception):
    pass


def install_commands(bin_dir, cc: str = "cc", python: str | None = None) -> list[str]:
    """Compile command_client.c into ``bin_dir``/lingjun-command-client, falling
    back to ``python`` (default this interpreter; it must import ``cli``), and
    link each of COMMANDS to it; what was there under those names is replaced.
    The names installed."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path
    bin_dir = Path(bin_dir)
    src = Path(__file__).with_name("command_client.c")
    if shutil.which(cc) is None:
        raise InstallError(f"no C compiler {cc!r} (set --cc or $CC)")
    try:
        bin_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InstallError(str(e)) from None
    python = python or sys.executable
    if any(c in python for c in '"\\\n'):
        raise InstallError(f"the interpreter's path {python!r} cannot be written into C")
    target = bin_dir / "lingjun-command-client"
    with tempfile.TemporaryDirectory(dir=bin_dir) as tmp:
        built = Path(tmp) / target.name
        p = subprocess.run([cc, "-O2", "-Wall", "-Werror", f'-DLJ_PYTHON="{python}"', "-o",
                            str(built), str(src)], capture_output=True, text=True)
        if p.returncode != 0:
            raise InstallError(f"{cc} failed:\n{p.stderr.strip()}")
        built.chmod(0o755)
        os.replace(built, target)
        for name in COMMANDS:
            link = Path(tmp) / name
            link.symlink_to(target.name)
            os.replace(link, bin_dir / name)
    return list(COMMANDS)


def preload() -> None:
    """Import the commands (and what their common path imports lazily) once,
    then move every object to the collector's permanent generation, so that
    children do not touch (and copy) the parent's pages collecting them."""
    for name in PRELOAD:
        importlib.import_module(f"cli.{name}")
    for name in ("lingjun.command_socket", "lingjun.messages", "lingjun.endpoints", "tomllib",
                 "grp", "hostlist"):
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="lingjun-command-runner", description=__doc__.split("\n")[0])
    p.add_argument("-c", "--config", help="the config file whose [auth] socket the runner sits beside")
    p.add_argument("--socket", help="the runner's socket (default: beside the credential socket)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    path = args.socket
    if path is None:
        from lingjun import config
        try:
            path = runner_path(config.load(args.config).auth.socket)
        except config.ConfigError as e:
            print(f"lingjun-command-runner: error: {e}", file=sys.stderr)
            return 1
    preload()
    runner = Runner(path)
    try:
        runner.listen()
    except OSError as e:
        print(f"lingjun-command-runner: error: {e}", file=sys.stderr)
        return 1
    def stop(*_):
        sdnotify.notify("STOPPING=1")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        runner.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
