"""Open a job's files as the job's user, not as the agent.

The agent runs as root; a task's ``srun -o`` file opened by root would let a
user write (or truncate) anything root can: ``-o /etc/cron.d/x``, a symlink
planted in a shared directory, ``../../`` out of a directory they may not
write. Slurm's stepd opens output files after ``_drop_privileges``; so do we,
and the kernel's permission checks decide, not string checks on the path:

    agent (root) --fork--> child: setgroups, setgid, setuid, umask
                                  open each path (O_CREAT mode 0666 & ~umask)
                 <--SCM_RIGHTS--  the fds, or the errno of each path that failed
                 waitpid

A forked child, not ``seteuid`` in the agent: effective ids are per process
and the agent has other threads (its executor, gRPC's) that must stay root.
The child only makes system calls and ``os._exit``s, which is what makes a
fork of a threaded process safe. When the agent is not root, or the user is
root, there is nothing to drop and the paths are opened in place.

The batch script's supervisor (stepd.py) is single-threaded and does the same
with effective ids (``_UserFs``); ``umask_of`` is shared by both.
"""
from __future__ import annotations

import errno as errnos
import json
import os
import socket
import struct
from dataclasses import dataclass

DEFAULT_UMASK = 0o022


@dataclass(frozen=True)
class Ids:
    """Who to be: uid, primary gid, supplementary groups, and the umask."""
    uid: int
    gid: int
    groups: tuple[int, ...]
    umask: int = DEFAULT_UMASK

    @property
    def must_drop(self) -> bool:
        return os.geteuid() == 0 and self.uid != 0


def umask_of(env: dict[str, str]) -> int:
    """SLURM_UMASK ("0027", as sbatch/srun record the submitter's umask), else 022."""
    text = env.get("SLURM_UMASK", "")
    try:
        value = int(text, 8)
    except ValueError:
        return DEFAULT_UMASK
    return value if 0 <= value <= 0o777 else DEFAULT_UMASK


def open_files(requests: list[tuple[str, int]], ids: Ids, mode: int = 0o666) -> list[int | OSError]:
    """Open each (path, flags) as ``ids``; an fd, or the OSError the user got, per path."""
    if not requests:
        return []
    if not ids.must_drop:
        old = os.umask(ids.umask)
        try:
            return [_try_open(path, flags, mode) for path, flags in requests]
        finally:
            os.umask(old)
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:                                   # the child: system calls only, then _exit
        try:
            parent.close()
            os.setgroups(list(ids.groups))
            os.setresgid(ids.gid, ids.gid, ids.gid)
            os.setresuid(ids.uid, ids.uid, ids.uid)
            os.umask(ids.umask)
            results = [_try_open(path, flags, mode) for path, flags in requests]
            fds = [r for r in results if isinstance(r, int)]
            report = [r if isinstance(r, int) else [r.errno or errnos.EACCES, r.filename]
                      for r in results]
            body = json.dumps([("fd" if isinstance(x, int) else x) for x in report]).encode()
            socket.send_fds(child, [struct.pack("!I", len(body)) + body], fds)
        except BaseException:
            os._exit(1)
        os._exit(0)
    child.close()
    try:
        return _receive(parent, requests)
    finally:
        parent.close()
        os.waitpid(pid, 0)


def _receive(sock: socket.socket, requests: list[tuple[str, int]]) -> list[int | OSError]:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 64)
    while len(data) >= 4 and len(data) < 4 + struct.unpack("!I", data[:4])[0]:
        more = sock.recv(1 << 20)
        if not more:
            break
        data += more
    if len(data) < 4:
        for fd in fds:
            os.close(fd)
        raise OSError(errnos.EPERM, "could not take the job user's identity")
    report = json.loads(data[4:4 + struct.unpack("!I", data[:4])[0]])
    out: list[int | OSError] = []
    it = iter(fds)
    for (path, _), item in zip(requests, report):
        if item == "fd":
            out.append(next(it))
        else:
            err, name = item
            out.append(OSError(err, os.strerror(err), name or path))
    return out


def _try_open(path: str, flags: int, mode: int) -> int | OSError:
    try:
        return os.open(path, flags | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.filename is None:
            e.filename = path
        return e


def truncate_files(paths: list[str], ids: Ids) -> None:
    """Empty each existing file the user may write (srun -o, once per step);
    one the user may not write is left alone: the open that follows says why."""
    for r in open_files([(p, os.O_WRONLY | os.O_TRUNC) for p in paths], ids):
        if isinstance(r, int):
            os.close(r)
