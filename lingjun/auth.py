"""The cluster key, and the two proofs made from it: agent handshakes and user tokens.

One secret per cluster, a file of random bytes that only root can read
(``lingjun keygen PATH``; ``lingjun up`` makes one for the local cluster).
The same file sits on the controller and on every agent. Two keys are
derived from it so that nothing signed for one purpose verifies for the
other (a user token is never an agent proof)::

    agent key      = HMAC-SHA256(cluster key, "lingjun agent handshake v1")
    controller key = HMAC-SHA256(cluster key, "lingjun controller handshake v1")
    token key      = HMAC-SHA256(cluster key, "lingjun user token v1")

Agent handshake (per stream, mutual challenge-response)::

    controller ◄── AuthHello(node, hello: 32 fresh bytes) ── agent
    controller ── AuthChallenge(nonce: 32 fresh bytes, controller_mac) ──► agent
        controller_mac = HMAC-SHA256(controller key, hello | nonce | node)
    controller ◄── AuthProof(node, nonce, time_ms, mac) ── agent
        mac = HMAC-SHA256(agent key, nonce | node | time_ms)

The agent checks the controller's MAC over its own fresh nonce before it
sends anything else: a controller without the key (another cluster's, a
test left running, an impostor on the port) gets no proof, no Register and
so no chance to send work; the agent logs it and backs off. The two MACs
use different derived keys, so neither side's answer can be replayed as
the other's, and a user token verifies as neither.

The controller accepts a proof only for the nonce it issued on that very
stream, at most once (``NonceBook``), with a MAC that compares equal in
constant time, and an agent clock within ``handshake_max_skew_s``. A proof
captured on the wire is worthless on any other stream. (Neither side's
proof binds the connection itself: a relay between agent and controller
is stopped by TLS, ``[auth] tls_cert``, not by the handshake.)

Anything that speaks for an agent (the agent, a simulator of many) needs
three plain functions: ``new_nonce`` for its hello,
``verify_controller_proof`` on the challenge, ``proof_mac`` for its answer.

User tokens (munge-like): a key-holding daemon reads a caller's uid/gid from
its unix socket (SO_PEERCRED, ``lingjun/credential.py``) and returns a JWT
(HS256, PyJWT) with ``uid``, ``gid``, ``exp`` and a random ``nonce``. Like a
munge credential it may be replayed until it expires (``token_ttl_s``); a
forged or expired one is refused.
"""
from __future__ import annotations

import collections
import hashlib
import hmac
import os
import pwd
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path


KEY_BYTES = 64
MIN_KEY_BYTES = 32
NONCE_BYTES = 32
# Slurm's words when a credential is missing or bad (ESLURM_PROTOCOL_AUTHENTICATION_ERROR).
AUTH_ERROR = "Protocol authentication error"
TOKEN_METADATA = "lingjun-credential"   # the gRPC metadata key that carries a user token


class KeyFileError(Exception):
    """The cluster key file cannot be used; the message says why and what to do."""


class AuthError(Exception):
    """A proof or token did not verify; the message is for the log, not the peer."""


# -- the key file ---------------------------------------------------------------------

def write_key(path: str | os.PathLike) -> None:
    """Write a fresh key readable by its owner only; never overwrite one (the
    agents hold a copy, and a silent change would lock every node out)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyFileError(f"{p} already exists; remove it first to make a new key "
                        f"(every agent then needs the new one)") from None
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(KEY_BYTES))
    os.chmod(p, 0o600)          # whatever the umask said


def key_owners(controller_user: str = "") -> frozenset[int]:
    """Who may own the key file for this process to trust it: this process's
    user, and the controller's user (``[controller] user``, Slurm's SlurmUser,
    who must read it and so owns it, as slurm.key belongs to SlurmUser) when
    it names one that exists here. Root, which reads it regardless, is how
    an agent on the controller's host shares the controller's copy."""
    owners = {os.geteuid()}
    if controller_user:
        try:
            owners.add(pwd.getpwnam(controller_user).pw_uid)
        except KeyError:
            pass
    return frozenset(owners)


def load_key(path: str | os.PathLike, owners: frozenset[int] | None = None) -> bytes:
    """The key's bytes; refuses a key that others could read, that belongs
    to a user not in ``owners`` (default: this process's user), or that is
    too short."""
    if owners is None:
        owners = frozenset({os.geteuid()})
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise KeyFileError(f"cluster key {p}: no such file; make one with `lingjun keygen {p}` "
                        f"and copy it to the controller and every agent") from None
    except PermissionError as e:
        mine = _user_name(os.geteuid())
        raise KeyFileError(f"cluster key {p}: {e.strerror}; this daemon runs as {mine}, "
                           f"who must own it: run `chown {mine}: {p}`") from None
    except OSError as e:
        raise KeyFileError(f"cluster key {p}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyFileError(f"cluster key {p} is readable by group or others "
                            f"(mode {stat.S_IMODE(st.st_mode):04o}); run `chmod 600 {p}`")
        if st.st_uid not in owners:
            mine = _user_name(os.geteuid())
            raise KeyFileError(f"cluster key {p} belongs to uid {st.st_uid}, not to this daemon "
                            f"(uid {os.geteuid()}) or the controller's user; run "
                            f"`chown {mine}: {p}`")
        key = f.read()
    if len(key) < MIN_KEY_BYTES:
        raise KeyFileError(f"cluster key {p} is {len(key)} bytes; want at least {MIN_KEY_BYTES}")
    return key


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _derive(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, purpose, hashlib.sha256).digest()


@dataclass(frozen=True)
class ClusterKey:
    """The derived keys; what the daemons keep in memory instead of the file's bytes."""
    agent: bytes
    token: bytes
    controller: bytes

    @classmethod
    def from_bytes(cls, key: bytes) -> "ClusterKey":
        return cls(agent=_derive(key, b"lingjun agent handshake v1"),
                   token=_derive(key, b"lingjun user token v1"),
                   controller=_derive(key, b"lingjun controller handshake v1"))

    @classmethod
    def load(cls, path: str | os.PathLike, owners: frozenset[int] | None = None) -> "ClusterKey":
        return cls.from_bytes(load_key(path, owners))


# -- agent handshake ------------------------------------------------------------------

def proof_mac(key: ClusterKey, nonce: bytes, node: str, time_ms: int) -> bytes:
    msg = b"|".join((nonce.hex().encode(), node.encode(), str(int(time_ms)).encode()))
    return hmac.new(key.agent, msg, hashlib.sha256).digest()


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def controller_proof_mac(key: ClusterKey, hello: bytes, nonce: bytes, node: str) -> bytes:
    """The controller's answer to an agent's hello nonce, on the stream whose challenge is ``nonce``."""
    msg = b"|".join((hello.hex().encode(), nonce.hex().encode(), node.encode()))
    return hmac.new(key.controller, msg, hashlib.sha256).digest()


def verify_controller_proof(key: ClusterKey, hello: bytes, nonce: bytes, node: str, mac: bytes) -> None:
    """For the agent: raise AuthError unless ``mac`` answers our ``hello`` with this cluster's key."""
    if len(nonce) != NONCE_BYTES:
        raise AuthError("the controller's challenge is not a fresh nonce")
    if not mac:
        raise AuthError("the controller sent no proof of the cluster key")
    if not hmac.compare_digest(mac, controller_proof_mac(key, hello, nonce, node)):
        raise AuthError("wrong controller MAC (the controller does not hold this cluster's key)")


class NonceBook:
    """Nonces the controller issued and not yet spent: a nonce verifies once,
    on the stream it was issued for, and only while it is fresh."""

    def __init__(self, lifetime_s: float = 60.0, clock=time.monotonic):
        self.lifetime_s = lifetime_s
        self.clock = clock
        # oldest first (issue order): the expired are dropped from the front, so
        # an issue costs the same with 10,000 agents handshaking at once as with one
        self._open: collections.OrderedDict[bytes, float] = collections.OrderedDict()

    def issue(self) -> bytes:
        now = self.clock()
        open_ = self._open
        while open_:
            oldest, t = next(iter(open_.items()))
            if now - t <= self.lifetime_s:
                break
            del open_[oldest]
        nonce = new_nonce()
        self._open[nonce] = now
        return nonce

    def spend(self, nonce: bytes) -> bool:
        """True the first time a live nonce is spent; False ever after."""
        t = self._open.pop(nonce, None)
        return t is not None and self.clock() - t <= self.lifetime_s


def verify_proof(key: ClusterKey, issued: bytes, book: NonceBook, node: str, nonce: bytes,
                 time_ms: int, mac: bytes, max_skew_s: float, now: float | None = None) -> None:
    """Raise AuthError unless (node, nonce, time_ms, mac) answers ``issued``."""
    now = time.time() if now is None else now
    if not hmac.compare_digest(nonce, issued):
        raise AuthError("the proof answers another challenge (replayed handshake)")
    if not book.spend(nonce):
        raise AuthError("the challenge was already answered or expired (replayed handshake)")
    if not hmac.compare_digest(mac, proof_mac(key, nonce, node, time_ms)):
        raise AuthError("wrong MAC (the agent does not hold this cluster's key)")
    skew = abs(now - time_ms / 1000.0)
    if skew > max_skew_s:
        raise AuthError(f"clock skew {skew:.1f}s exceeds handshake_max_skew_s={max_skew_s:g}")


# -- user tokens ----------------------------------------------------------------------

@dataclass(frozen=True)
class Identity:
    """Who a verified token says the caller is."""
    uid: int
    gid: int


def mint_token(key: ClusterKey, uid: int, gid: int, ttl_s: float, now: float | None = None) -> str:
    import jwt      # here, not at the top: every command imports this module, few mint
    now = time.time() if now is None else now
    return jwt.encode({"uid": int(uid), "gid": int(gid), "iat": int(now), "exp": int(now + ttl_s),
                       "nonce": secrets.token_hex(16)}, key.token, algorithm="HS256")


def verify_token(key: ClusterKey, token: str, now: float | None = None) -> Identity:
    """The token's identity; AuthError when it is forged, malformed or expired."""
    import jwt
    try:
        claims = jwt.decode(token, key.token, algorithms=["HS256"],
                            options={"require": ["exp", "uid", "gid"], "verify_iat": False})
    except jwt.ExpiredSignatureError:
        raise AuthError("expired credential") from None
    except jwt.PyJWTError as e:
        raise AuthError(f"invalid credential: {e}") from None
    if now is not None and claims["exp"] < now:
        raise AuthError("expired credential")
    uid, gid = claims["uid"], claims["gid"]
    # The API carries ids as int32 (as Slurm's uint32 ids never reach 2**31 in practice).
    if not (isinstance(uid, int) and isinstance(gid, int) and 0 <= uid < 2**31 and 0 <= gid < 2**31):
        raise AuthError("invalid credential: bad uid/gid")
    return Identity(uid=uid, gid=gid)
