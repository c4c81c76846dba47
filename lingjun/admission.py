"""Admission at a daemon's doors: how much of it one user may hold at once.

Every door (the credential socket, the command socket, gRPC) is open to
every user, and each connection costs the daemon a descriptor, each call a
task and some memory. Unbounded, one ordinary user holding 22,000 idle
connections to the command socket took all of the controller's 20,000
descriptors, and root's ``squeue`` then could not even get a credential.
So, per user (the kernel's uid at a unix door, the token's at gRPC):

- at most ``connections_per_user`` open connections at the unix doors
  (both sockets together), and all users together at most
  ``connections``, a share of the descriptor limit;
- at most ``requests_per_user`` calls in progress (command socket and gRPC
  together) and ``streams_per_user`` gRPC streams (srun, salloc, sacct...);
- a command-socket connection that sends nothing for
  ``first_byte_timeout_s`` is closed, and one user's requests being read
  hold at most twice the largest request's bytes (not 128 of them).

Root and the daemon's own user (Slurm's SlurmUser) are counted but have no
per-user limits, and may use the last eighth of ``connections``, which
nobody else may: however many users flood, an operator can still get in.

Over a limit a door answers at once with one line in its own protocol,
RESOURCE_EXHAUSTED and Slurm's words for its rate limit
(``RATE_LIMITED``), and closes; nothing of the request is read. A command
then retries briefly and says so in one line. Refusals are logged at most
once per uid and kind per ``RefusalLog.interval_s``, with the count since
the last line: a flood costs the log one line per user per ten seconds,
not one per connection.

The arithmetic, for the shipped unit's ``LimitNOFILE=65536``:

    >>> b = Budget.of(LimitsConfig(), nofile=65536)
    >>> b.connections, b.reserved, b.grpc_connections
    (16384, 2048, 45056)

so the unix doors hold at most 16,384 descriptors (one user at most 128 of
them), gRPC at most 45,056 (one per agent, and the commands' and tools'),
and a sixteenth of the table, 4,096, is left for the store, the logs and
the processes the daemon starts. (At this machine's 20,000: 5,000 at the
unix doors, 13,750 for gRPC: a 10,000-node cluster's agents fit.)

What gRPC cannot bound per user: its connections. grpc-python accepts a
connection (and spends its descriptor) before any call says who is
calling, and exposes no per-peer connection count, so gRPC connections
are bounded for everyone together (``grpc.max_allowed_incoming_connections``),
a connection that does not finish its handshake is closed after
``HANDSHAKE_TIMEOUT_MS`` and one with no call for ``CONNECTION_IDLE_MS``
(lingjund/transport/server.py); only the calls on them are counted per
user. A user who opens that many connections idles gRPC for everyone
(the unix doors still answer); the bound keeps the descriptors.
"""
from __future__ import annotations

import logging
import os
import pwd
import resource
import time
from dataclasses import dataclass
from typing import Callable

from lingjun.refusal import RATE_LIMITED, RESOURCE_EXHAUSTED, RETRY_DELAYS_S
from lingjun.config import LimitsConfig

ROOT_UID = 0
# The share of ``connections`` kept for root and the daemon's own user.
RESERVED_FRACTION = 8
# The descriptors left to everything but the doors (the store, logs, the
# processes the daemon starts): a sixteenth of the table, at least 256.
OTHER_FRACTION = 16
OTHER_DESCRIPTORS_MIN = 256


@dataclass(frozen=True)
class Budget:
    """The limits in force: [limits] with its zeros worked out from ``nofile``."""
    connections: int
    reserved: int
    connections_per_user: int
    requests_per_user: int
    streams_per_user: int
    first_byte_timeout_s: float
    grpc_connections: int

    @classmethod
    def of(cls, limits: LimitsConfig, nofile: int) -> "Budget":
        """``nofile``: the daemon's descriptor limit (soft), after
        ``raise_descriptor_limit``."""
        connections = limits.connections or max(64, nofile // 4)
        rest = max(OTHER_DESCRIPTORS_MIN, nofile // OTHER_FRACTION)
        return cls(connections=connections,
                   reserved=max(1, connections // RESERVED_FRACTION),
                   connections_per_user=limits.connections_per_user,
                   requests_per_user=limits.requests_per_user,
                   streams_per_user=limits.streams_per_user,
                   first_byte_timeout_s=limits.first_byte_timeout_s,
                   grpc_connections=limits.grpc_connections
                   or max(64, nofile - connections - rest))


def raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (as systemd advises a
    daemon that needs many to do itself); the soft limit now in force.

    Only the controller does this: its children (MailProg, history readers)
    inherit the higher soft limit, which is harmless to them. An agent does
    not: the jobs it starts would inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return descriptor_limit()


def descriptor_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class RefusalLog:
    """Refusals logged at most once per (uid, kind) per ``interval_s``, each
    line with the count since the one before; memory bounded by pruning
    entries older than the interval."""

    PRUNE_AT = 4096

    def __init__(self, log: logging.Logger, interval_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.log, self.interval_s, self.clock = log, interval_s, clock
        self._last: dict[tuple[int, str], float] = {}
        self._count: dict[tuple[int, str], int] = {}

    def note(self, uid: int, kind: str, why: str) -> None:
        """One more refusal of ``uid``'s (``kind``: "connections at the
        command socket", "calls by gRPC"...), ``why`` the limit it met."""
        now = self.clock()
        key = (uid, kind)
        count = self._count.get(key, 0) + 1
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._count[key] = count
            return
        if len(self._last) >= self.PRUNE_AT:
            self._prune(now)
        self._last[key], self._count[key] = now, 0
        since = "" if last is None else f" in the last {now - last:.0f}s"
        self.log.warning("refused %d %s of uid %d (%s)%s: %s", count, kind, uid,
                         user_name(uid), since, why)

    def remembered(self) -> int:
        """How many (uid, kind) the log keeps a time and a count for."""
        return len(self._last)

    def _prune(self, now: float) -> None:
        for key in [k for k, t in self._last.items() if now - t >= self.interval_s]:
            del self._last[key]
            self._count.pop(key, None)


class Admission:
    """The counts of one daemon's doors, and whether one more is admitted.

    Each ``connect``/``begin`` that returns None (admitted) is matched by
    one ``disconnect``/``end``; one that returns a reason (the limit met,
    in words for the log) is not. ``privileged``: root and the daemon's
    own uid."""

    def __init__(self, budget: Budget, privileged: frozenset[int], log: logging.Logger):
        self.budget = budget
        self.privileged = privileged
        self.refusals = RefusalLog(log)
        self.open = 0
        self._open: dict[int, int] = {}
        self._calls: dict[int, int] = {}
        self._streams: dict[int, int] = {}
        self._bytes: dict[int, int] = {}

    @classmethod
    def for_daemon(cls, limits: LimitsConfig, log: logging.Logger,
                   nofile: int | None = None) -> "Admission":
        """The running daemon's: its descriptor limit, root and its own uid privileged."""
        budget = Budget.of(limits, descriptor_limit() if nofile is None else nofile)
        return cls(budget, frozenset({ROOT_UID, os.geteuid()}), log)

    def connect(self, uid: int) -> str | None:
        """A connection of ``uid``'s at a unix door: None to serve it, else why not."""
        b = self.budget
        if uid in self.privileged:
            if self.open >= b.connections:
                return f"{self.open} connections open, all of [limits] connections"
        else:
            held = self._open.get(uid, 0)
            if held >= b.connections_per_user:
                return f"{held} connections open, [limits] connections_per_user"
            if self.open >= b.connections - b.reserved:
                return (f"{self.open} connections open of [limits] connections = "
                        f"{b.connections} ({b.reserved} kept for root and the controller's user)")
        self.open += 1
        self._open[uid] = self._open.get(uid, 0) + 1
        return None

    def disconnect(self, uid: int) -> None:
        self.open -= 1
        _less(self._open, uid)

    def begin(self, uid: int, stream: bool = False) -> str | None:
        """A call of ``uid``'s (a stream when ``stream``): None to serve it, else why not."""
        counts = self._streams if stream else self._calls
        held = counts.get(uid, 0)
        if uid not in self.privileged:
            if stream and held >= self.budget.streams_per_user:
                return f"{held} streams open, [limits] streams_per_user"
            if not stream and held >= self.budget.requests_per_user:
                return f"{held} calls in progress, [limits] requests_per_user"
        counts[uid] = held + 1
        return None

    def end(self, uid: int, stream: bool = False) -> None:
        _less(self._streams if stream else self._calls, uid)

    def hold_bytes(self, uid: int, n: int, allowed: int) -> str | None:
        """``n`` more bytes of ``uid``'s requests being read, of ``allowed``
        for all of them together: None to take them, else why not."""
        held = self._bytes.get(uid, 0)
        if uid not in self.privileged and held + n > allowed:
            return f"{held} bytes of requests being read, twice the largest request"
        self._bytes[uid] = held + n
        return None

    def release_bytes(self, uid: int, n: int) -> None:
        if n:
            left = self._bytes.get(uid, 0) - n
            if left > 0:
                self._bytes[uid] = left
            else:
                self._bytes.pop(uid, None)

    def bytes_of(self, uid: int) -> int:
        return self._bytes.get(uid, 0)

    def connections_of(self, uid: int) -> int:
        return self._open.get(uid, 0)

    def calls_of(self, uid: int, stream: bool = False) -> int:
        return (self._streams if stream else self._calls).get(uid, 0)


def _less(counts: dict[int, int], uid: int) -> None:
    n = counts.get(uid, 0) - 1
    if n > 0:
        counts[uid] = n
    else:
        counts.pop(uid, None)


__all__ = ["Admission", "Budget", "RATE_LIMITED", "RESOURCE_EXHAUSTED", "RETRY_DELAYS_S",
           "RefusalLog", "raise_descriptor_limit"]
