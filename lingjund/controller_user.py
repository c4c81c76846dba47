"""The user the controller runs as: ``[controller] user``, Slurm's SlurmUser.

Why not root
------------
The controller starts no job, changes no one's identity and touches no
file of a user's: it keeps its own database, serves two unix sockets and a
TCP port above 1024, reads the cluster key and runs MailProg. A flaw in
any of that (a parser, a library it imports, a program it runs) should
give an attacker an unprivileged account that owns only the scheduler's
state, not the machine; so, as slurmctld runs as SlurmUser, lingjund runs
as an ordinary system user (``lingjun`` in the shipped unit), and only the
agents, which start jobs as their owners, are root.

Started as root
---------------
``lingjund`` started by root with ``[controller] user`` naming someone else
does what slurmctld does: it becomes that user itself, before it opens its
state, its key or a socket (``become``). Root first makes the state
directory and the credential socket's directory if they are missing, owned
by that user, since the user could not make them under /var/lib or /run;
it never takes over a state directory that exists and belongs to someone
else (that is the operator's ``chown -R``, said in the error). Started as
any other user than the named one, it refuses: it could not become it.
Under the shipped unit (``User=lingjun``) it already is that user and
nothing happens here. ``[controller] user = ""`` keeps whoever started it.
"""
from __future__ import annotations

import os
import pwd
from pathlib import Path


class ControllerUserError(Exception):
    """The controller cannot run as ``[controller] user``; the message says why."""


def become(name: str, state_dir: str, socket_path: str) -> None:
    """Run as ``name`` from here on (a no-op when "" or when already it)."""
    if not name:
        return
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise ControllerUserError(f"[controller] user {name!r}: no such user") from None
    euid = os.geteuid()
    if euid == pw.pw_uid:
        return
    if euid != 0:
        raise ControllerUserError(
            f"[controller] user is {name} (uid {pw.pw_uid}) but lingjund runs as uid {euid}; "
            f"start it as {name}, or as root, which becomes {name}")
    _own_dir(Path(state_dir), 0o700, pw, "state directory")
    _own_dir(Path(socket_path).parent, 0o755, pw, "credential socket's directory")
    os.initgroups(name, pw.pw_gid)
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)          # real, effective and saved: there is no way back
    os.environ.update(HOME=pw.pw_dir, USER=name, LOGNAME=name)


def _own_dir(d: Path, mode: int, pw: pwd.struct_passwd, what: str) -> None:
    """``d`` made for ``pw`` when missing; refused when it exists and ``pw``
    could not write it (not theirs, and not world-writable like /tmp)."""
    try:
        st = d.stat()
    except FileNotFoundError:
        d.mkdir(mode=mode, parents=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        os.chmod(d, mode)
        return
    if st.st_uid != pw.pw_uid and not st.st_mode & 0o002:
        raise ControllerUserError(
            f"{what} {d} belongs to uid {st.st_uid}, not to [controller] user {pw.pw_name}; "
            f"run `chown -R {pw.pw_name}: {d}`")
