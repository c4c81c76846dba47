"""The agent's lease on its jobs: the right to run their processes here.

Fencing, so that no job runs twice. The controller declares a node DOWN when
it has heard no heartbeat for ``heartbeat_timeout_s`` and then restarts the
node's jobs elsewhere. Before that restart, whatever still runs of them on
the silent node must be gone, whether its agent is frozen (SIGSTOP), dead
(kill -9) or cut off from the controller. So the node stops them itself,
when its lease lapses:

- each heartbeat the agent sends carries ``seq``; the agent notes its own
  clock (CLOCK_BOOTTIME, which no one sets and which counts suspend) at the
  send;
- the controller answers heartbeats it receives (SanityClock, echo_seq):
  every one, or on a big cluster (500 heartbeats a second or more) where the
  timeout holds four intervals or more, as often as the lease needs, at
  least every quarter of the timeout (lingjund/service/nodes.py
  ``echo_after_s``); the agent then renews the lease to ``sent +
  heartbeat_timeout_s`` for the newest heartbeat answered (and, at
  registration, for the Register);
- the agent writes that end to ``<state_dir>/lease.json`` (atomically) at
  each renewal; every supervisor of a job on this node (``wait`` below) and
  the node's fence keeper (``fencekeeper``) sleep until the end, read the file
  again, and if it was not renewed they stop the job here: SIGTERM, the
  lease's ``grace_s``, SIGKILL.

Why the lease ends first. A heartbeat is received after it is sent, so the
controller's last receipt ``r`` is no earlier than the send ``s`` of any
heartbeat it answered, and it declares the node DOWN at ``r + timeout >=
s + timeout`` = the lease's end (its silence timer and our lease count the
same seconds on NTP-synced or shared clocks; only the rates matter, and
they agree to parts per million). The fences then end by

    DOWN + grace_s + slack        (slack: waking, SIGKILL, the kernel's teardown)

and the controller lets no new attempt of a job of a silent node start
before ``DOWN + fence_margin_s`` (``[controller] fence_margin_s``, by default
``kill_wait_s + 2 s``, with ``grace_s = kill_wait_s``; lingjun/config.py).

Answering fewer heartbeats only ever ends the lease earlier: it runs from
the send of a heartbeat the controller received, so never past one timeout
after the newest one received.

An agent restarted within the timeout (kill -9, then systemd) registers
again and renews the lease before it ends: nothing is fenced. A controller
that is down longer than what is left of the lease lets every lease lapse,
since no agent can tell it apart from a cut cable: jobs survive controller
restarts shorter than ``heartbeat_timeout_s`` less the age of the newest
answered heartbeat, i.e. at least ``heartbeat_timeout_s`` less one interval
where every heartbeat is answered, and at least 3/4 of it less half an
interval where they are thinned (42.5 s of the default 60 s).

No lease file means no lease regime (a supervisor started by hand, a test):
nothing is fenced. The agent writes the file before it starts any job.
"""
from __future__ import annotations

import json
import logging
import os
import select
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

log = logging.getLogger(__name__)

LEASE_FILE = "lease.json"


def clock() -> float:
    """The lease's clock: seconds since boot, suspend included, never set."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def lease_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / LEASE_FILE


@dataclass(frozen=True)
class Lease:
    expires_at: float        # clock() seconds
    grace_s: float           # fence: SIGTERM .. SIGKILL
    agent_pid: int = 0       # who renews it (the fence keeper's "is the agent gone?")
    agent_start: int = 0     # that process's start, in clock ticks since boot

    def left(self, now: float | None = None) -> float:
        return self.expires_at - (clock() if now is None else now)


class Lapsed(Exception):
    """The lease ended without renewal: stop the job's processes here."""

    def __init__(self, lease: Lease):
        super().__init__(f"lease ended {-lease.left():.1f} s ago without renewal")
        self.lease = lease


def write(path: str | Path, lease: Lease) -> None:
    """Replace the lease file atomically (readers see the old or the new one).

    No fsync: after a power loss no process it guards is left to fence.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump({"expires_at": lease.expires_at, "grace_s": lease.grace_s,
                   "agent_pid": lease.agent_pid, "agent_start": lease.agent_start}, f)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def read(path: str | Path | None) -> Lease | None:
    """The lease in ``path``; None when there is none (nothing is fenced)."""
    if path is None:
        return None
    try:
        with open(path) as f:
            d = json.load(f)
        return Lease(float(d["expires_at"]), float(d["grace_s"]), int(d.get("agent_pid", 0)),
                     int(d.get("agent_start", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def wait(path: str | Path | None, fds: Sequence[int], timeout: float | None) -> list[int]:
    """``select`` on ``fds`` for at most ``timeout`` seconds (None: no limit),
    waking at the lease's end to read the file again. Returns the ready fds
    ([] on timeout); raises ``Lapsed`` once the lease has ended unrenewed.

    The call a supervisor makes wherever it waits for its job, e.g.::

        try:
            ready = lease.wait(lease_path, [pidfd], 1.0)
        except lease.Lapsed as e:
            cgroups.terminate(cg, e.lease.grace_s)      # the fence
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        cur = read(path)
        step = None if deadline is None else max(0.0, deadline - time.monotonic())
        if cur is not None:
            left = cur.left()
            if left <= 0:
                raise Lapsed(cur)
            step = left if step is None else min(step, left)
        ready, _, _ = select.select(list(fds), [], [], step)
        if ready:
            return ready
        if deadline is not None and time.monotonic() >= deadline:
            # the lease may have ended in the same instant: say so first
            cur = read(path)
            if cur is not None and cur.left() <= 0:
                raise Lapsed(cur)
            return []


class Holder:
    """The agent's side: note heartbeat sends, renew on answers, write the file.

    Pure but for ``clock`` and the file write, so tests drive it by hand::

        h = Holder(path, clock=fake)     # fake() == 100.0
        h.configure(timeout_s=3, grace_s=2)
        h.sent(1)                        # heartbeat 1 sent at 100.0
        h.acked(1)                       # -> lease.json expires_at 103.0
    """

    MAX_PENDING = 64     # unanswered sends remembered (older ones cannot matter)

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = clock,
                 agent_pid: int = 0, agent_start: int = 0):
        self.path = Path(path)
        self.clock = clock
        self.timeout_s = 0.0
        self.grace_s = 0.0
        self.expires_at: float | None = None
        self.agent = (agent_pid, agent_start)
        self._sent: dict[int, float] = {}
        self.on_renew: Callable[[Lease], None] | None = None

    def configure(self, timeout_s: float, grace_s: float) -> None:
        """The controller's terms (RegisterReply); timeout 0 = no lease."""
        self.timeout_s, self.grace_s = timeout_s, grace_s

    def sent(self, seq: int) -> float:
        now = self.clock()
        self._sent[seq] = now
        if len(self._sent) > self.MAX_PENDING:
            del self._sent[min(self._sent)]
        return now

    def acked(self, seq: int) -> Lease | None:
        """The controller answered heartbeat ``seq``: renew from its send."""
        sent = self._sent.pop(seq, None)
        for older in [s for s in self._sent if s < seq]:
            del self._sent[older]     # answered in order: those were lost
        if sent is None:
            return None
        return self.renew(sent)

    def renew(self, sent: float) -> Lease | None:
        """Renew from a message sent at ``sent`` (clock()) that the controller
        answered; the lease only ever moves forward."""
        if self.timeout_s <= 0:
            return None
        end = sent + self.timeout_s
        if self.expires_at is not None and end <= self.expires_at:
            return None
        lease = Lease(end, self.grace_s, *self.agent)
        try:
            write(self.path, lease)
        except OSError as e:
            # Not renewed, so the jobs here are fenced at the old end: the safe
            # side. The agent itself carries on (a full disk must not cut it off).
            log.error("cannot renew the lease in %s: %s", self.path, e)
            return None
        self.expires_at = end
        if self.on_renew is not None:
            self.on_renew(lease)
        return lease

    def lapsed(self) -> bool:
        return self.expires_at is not None and self.expires_at <= self.clock()

    def left(self) -> float | None:
        return None if self.expires_at is None else self.expires_at - self.clock()
