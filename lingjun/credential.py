"""The credential socket: who a local caller is, from the kernel, as a signed token.

A key-holding daemon (the controller on the local cluster; the agent on each
node with ``[auth] agent_serves_socket``) listens on a unix socket that every
user may connect to. For each connection it asks the kernel who is on the
other end (``SO_PEERCRED``: the uid and gid of the connecting process, which
the client cannot choose) and writes back one line: a token signed with the
cluster key (``lingjun.auth.mint_token``), then closes. This is what munge's
``munged`` does; the client needs no secret of its own.

A user who already holds ``[limits] connections_per_user`` connections at
this daemon's unix doors (lingjun/admission.py) is answered instead with one
JSON line, ``{"error": {"code": "RESOURCE_EXHAUSTED", "message": ...}}``
(a token never starts with ``{``), and ``fetch_token`` retries briefly
before it gives up in Slurm's words.

    $ python -c 'from lingjun.credential import fetch_token; print(fetch_token("/run/lingjun/auth.sock"))'
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import time
from pathlib import Path

from lingjun import auth
from lingjun.refusal import RATE_LIMITED, RESOURCE_EXHAUSTED, RETRY_DELAYS_S

log = logging.getLogger("lingjun.credential")
MAX_TOKEN_BYTES = 4096


def peer_ids(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)


# Connections the kernel queues for a unix door before the daemon accepts
# them (asyncio's default is 100): past it a client's connect fails with
# EAGAIN at once, so a burst of one user's connects would turn others away
# before the daemon could count and refuse them.
BACKLOG = 1024
# How long the daemon waits for a client to take its one line (a token, an
# answer, a refusal) before it drops the connection.
WRITE_TIMEOUT_S = 30.0


def refusal_line(code: str, message: str) -> bytes:
    """A unix door's one-line refusal, the command socket's error form."""
    return json.dumps({"error": {"code": code, "message": message}},
                      separators=(",", ":")).encode() + b"\n"


BUSY = refusal_line(RESOURCE_EXHAUSTED, RATE_LIMITED)


class CredentialServer:
    """Serves tokens on ``path`` until ``close``; ``admission`` (the
    daemon's, shared with its command socket) bounds each user's connections."""

    def __init__(self, key: auth.ClusterKey, path: str, ttl_s: float, admission=None):
        from lingjun import admission as admission_mod    # config and its parsers: daemons only
        self.key, self.path, self.ttl_s = key, path, ttl_s
        self.admission = admission or admission_mod.Admission.for_daemon(
            admission_mod.LimitsConfig(), log)
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        p = Path(self.path)
        if not p.parent.exists():
            # whatever the daemon's umask (077): every user must reach the socket
            p.parent.mkdir(parents=True)
            os.chmod(p.parent, 0o755)
        if p.is_socket():
            if _answers(self.path):
                raise OSError(f"{self.path}: another daemon already serves credentials there")
            p.unlink()           # a socket left by an earlier run of this daemon
        self._server = await asyncio.start_unix_server(self._serve, path=self.path, backlog=BACKLOG)
        # Every user must reach it: that is the point. What it hands out says who they are.
        os.chmod(self.path, 0o666)
        log.info("serving credentials on %s (tokens live %gs)", self.path, self.ttl_s)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        caller = admitted(writer, self.admission, "credential socket")
        if caller is None:
            return
        pid, uid, gid = caller
        try:
            token = auth.mint_token(self.key, uid, gid, self.ttl_s)
            writer.write(token.encode() + b"\n")
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
            log.debug("credential for uid=%d gid=%d pid=%d", uid, gid, pid)
        except (OSError, ConnectionError, asyncio.TimeoutError) as e:
            log.debug("credential socket: uid %d: %s", uid, e or type(e).__name__)
        finally:
            writer.close()
            self.admission.disconnect(uid)

    async def close(self) -> None:
        await close_unix_server(self._server, self.path)


def admitted(writer: asyncio.StreamWriter, admission, door: str) -> tuple[int, int, int] | None:
    """The caller's (pid, uid, gid) from the kernel, once ``door``'s admission
    lets it in; None when it does not (the connection refused with the busy
    line) or the kernel cannot say (the connection closed)."""
    try:
        pid, uid, gid = peer_ids(writer.get_extra_info("socket"))
    except OSError as e:
        log.debug("%s: %s", door, e)
        writer.close()
        return None
    why = admission.connect(uid)
    if why is not None:
        refuse(writer, admission, uid, f"connections at the {door}", why)
        return None
    return pid, uid, gid


def refuse(writer: asyncio.StreamWriter, admission, uid: int, kind: str, why: str) -> None:
    """Answer a connection over a limit with the one busy line and close it
    at once, nothing of it read; the refusal is logged at a bounded rate."""
    admission.refusals.note(uid, kind, why)
    try:
        writer.write(BUSY)      # a unix socket's buffer takes it whole: no drain
    except (OSError, ConnectionError):
        pass
    writer.close()


async def close_unix_server(server: asyncio.base_events.Server | None, path: str) -> None:
    """Stop a unix socket server of ours and remove its socket file (the
    credential socket's and the command socket's alike)."""
    if server is not None:
        server.close()
        await server.wait_closed()
        try:
            os.unlink(path)
        except OSError:
            pass


def _answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(path)
            return True
        except OSError:
            return False


class CredentialUnavailable(RuntimeError):
    """No token: the socket is missing or its daemon did not answer."""


class CredentialBusy(CredentialUnavailable):
    """No token: the caller holds too many connections at the daemon already."""


def fetch_token(path: str, timeout: float = 5.0) -> str:
    """A fresh token for the calling process, from the socket at ``path``;
    a refusal because the caller holds too much already is retried briefly
    (``RETRY_DELAYS_S``), then raised as CredentialUnavailable in Slurm's words."""
    for delay in RETRY_DELAYS_S:
        try:
            return _fetch_token(path, timeout)
        except CredentialBusy:
            time.sleep(delay)
    return _fetch_token(path, timeout)


def _fetch_token(path: str, timeout: float) -> str:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            data = b""
            while len(data) < MAX_TOKEN_BYTES:
                chunk = s.recv(MAX_TOKEN_BYTES)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        # EAGAIN: the daemon's backlog is full (busy; retried as a refusal is)
        raise (CredentialBusy if isinstance(e, BlockingIOError) else CredentialUnavailable)(
            f"cannot get a credential from {path}: {e.strerror or e}") from None
    token = data.decode(errors="replace").strip()
    if not token:
        raise CredentialUnavailable(f"cannot get a credential from {path}: empty answer")
    if token.startswith("{"):           # a refusal, never a token
        try:
            err = json.loads(token)["error"]
            code, message = str(err["code"]), str(err["message"])
        except (ValueError, KeyError, TypeError):
            code, message = "", token[:200]
        raise (CredentialBusy if code == RESOURCE_EXHAUSTED else CredentialUnavailable)(
            f"cannot get a credential from {path}: {message}")
    return token


class TokenCache:
    """One process's token, fetched on first use and again shortly before it expires."""

    def __init__(self, path: str, margin_s: float = 10.0):
        self.path, self.margin_s = path, margin_s
        self._token: str | None = None
        self._exp = 0.0

    def get(self) -> str:
        if self._token is None or time.time() > self._exp - self.margin_s:
            token = fetch_token(self.path)
            self._token, self._exp = token, _expiry(token)
        return self._token


def _expiry(token: str) -> float:
    """The token's exp claim, read without the key (the client cannot verify it
    and need not: the controller does); 0 when unreadable, so it is refetched.
    Read by hand (base64url JSON, the JWT's middle part): importing a JWT
    library cost each command a twentieth of a second."""
    import base64
    import binascii
    import json
    try:
        body = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        return float(claims.get("exp", 0))
    except (IndexError, ValueError, TypeError, AttributeError, binascii.Error):
        return 0.0
