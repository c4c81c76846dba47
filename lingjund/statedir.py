"""The controller's state directory: one owner at a time, readable by no one else.

One writer
----------
Two controllers on one database each believe they own the cluster: each
marks the other's nodes DOWN, requeues jobs whose processes still run, and
answers half of the submissions. So before it touches anything (the
database, the port, the credential socket) the controller takes an
exclusive ``flock`` on ``STATE_DIR/lingjund.lock`` and holds it, through
the open descriptor, for its whole life; the kernel drops it when the
process dies, however it dies, so there is no stale lock to clean after a
``kill -9``. A second controller on the same directory, whatever its
configuration, fails to take it and exits naming the holder: its pid from
the kernel's lock table (/proc/locks; the holder also writes its pid into
the file, read only where that table is not available) and its command
line. ``lingjun up`` asks the same question before starting anything
(``holder``, which reads the table and never tries the lock, so asking
cannot make a starting controller fail).

The port is the other half: gRPC sets ``SO_REUSEPORT`` by default, under
which a second server on the same port silently shares the connections;
``transport/server.py`` turns it off, so the second bind fails with
"address already in use" and the daemon says which process listens there.

Modes
-----
The database holds every batch script and its environment (API keys
included), and its WAL can be pinned by any reader holding a transaction
open. So the controller runs with umask 077, keeps the directory 0700 and
every file in it 0600 (``secure``, run at start: a directory made by an
older version, or by hand, is corrected, and logs written there too).
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

from lingjun import procnet

LOCK_NAME = "lingjund.lock"
DIR_MODE = 0o700
FILE_MODE = 0o600


class StateDirBusy(OSError):
    """Another live process holds the state directory's lock."""


def _flock_pids(lock: Path) -> list[int]:
    """Pids holding a flock on ``lock``, from the kernel's table (/proc/locks:
    "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"); reading it takes no lock."""
    try:
        st = lock.stat()
        rows = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    pids = []
    for row in rows:
        f = row.split()
        if len(f) < 6 or f[1] != "FLOCK" or f[2] == "->":
            continue
        try:
            maj, mnr, ino = f[5].split(":")
            if (int(maj, 16), int(mnr, 16), int(ino)) == want:
                pids.append(int(f[4]))
        except ValueError:
            continue
    return pids


def _holder_text(lock: Path) -> str:
    """The holder by the kernel's word, else as it described itself in the file."""
    pids = _flock_pids(lock)
    if not pids:
        try:
            pids = [int(lock.read_text().split()[0])]
        except (OSError, ValueError, IndexError):
            pids = []
    pids = [p for p in pids if Path(f"/proc/{p}").exists()]
    if not pids:
        return "another process (pid unknown)"
    return procnet.describe_pid(pids[0])


def acquire(state_dir: str | os.PathLike) -> int:
    """Make the directory (0700) if it is missing and lock it; the returned
    descriptor holds the lock until the process ends. Raises StateDirBusy
    naming the holder."""
    d = Path(state_dir)
    d.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    lock = d / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
            raise StateDirBusy(errno.EWOULDBLOCK,
                               f"state directory {d} is in use by {_holder_text(lock)}; "
                               f"only one controller may own it") from None
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def holder(state_dir: str | os.PathLike) -> str | None:
    """Who holds the directory's lock (as ``acquire`` words it), or None when free.

    Asks the kernel's lock table rather than trying the lock, so that asking
    never makes a controller starting at that moment fail."""
    lock = Path(state_dir) / LOCK_NAME
    pids = [p for p in _flock_pids(lock) if p != os.getpid()]
    return procnet.describe_pid(pids[0]) if pids else None


def secure(state_dir: str | os.PathLike) -> None:
    """The directory 0700 and each regular file directly in it (database,
    -wal, -shm, logs) without group or other bits, whatever an earlier run or
    umask left. Directories inside are left as they are: they are not ours
    to judge (an older layout kept agents' dirs there)."""
    d = Path(state_dir)
    os.chmod(d, DIR_MODE)
    for entry in os.scandir(d):
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(entry.path, stat.S_IMODE(st.st_mode) & ~0o077)
