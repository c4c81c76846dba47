"""The job and node lifecycle: every timer, and the transitions it causes, in one place.

Pure: no I/O, no clock of its own, no store. Each decision is a function of a
``View`` (plain records: jobs, nodes, the last heartbeat of each open agent
stream, config values) and ``now``, and returns what must change, as
dataclasses; the service (``lingjund/service/timers.py`` and the modules that
own each kind of change) loads the view, asks here, commits the changes in
one transaction, and only then sends what the agents must hear.

    timer                 due at (the moment ``decide`` acts)        change
    time limit            end_time                                   Stop(TIMEOUT)
    --signal warning      end_time - signal_time_s (launched jobs)   Signal
    --deadline, running   deadline                                   Stop(DEADLINE)
    --deadline, pending   deadline - time limit                      Expire
    preemption grace      preempt_time + partition GraceTime         Stop(PREEMPTED)
    hang                  after last sign of life + --hang-timeout   Stop(HANG)
    heartbeat, stream     after last heartbeat + heartbeat timeout   CloseStream
    heartbeat, node       after max(last seen, controller start)     NodeDown
                          + heartbeat timeout
    node loss             a running job holds a DOWN node            NodeLost
                          a DOWN node is still to clean a job up     Cleaned
    prolog                after prolog start + prolog_timeout_s      PrologTimeout
    srun/salloc lease     controller start + heartbeat timeout,      Abandon
                          for allocations no client took back

"After" is strict (Slurm's ``>``): those timers are due a hair later, and
``next_deadline`` names the moment ``SLACK`` past the threshold, so a wake-up
at it is sure to find the change due. The others act at their moment.

"Stop a running job for reason X" is one change, ``Stop``, and one rule of
who may still be stopped (``may_stop``): a running job nothing else is
stopping, or, for the end of a preemption grace time, a victim not yet killed.
How a stopped run ends (``end_state``: the kill reason decides, else the
exit), restart backoff, the restart limit and the job row of a requeued job
are here too (``restart_backoff_s``, ``restart_limit``, ``requeue_fields``).

``decide(view, now)`` is every decision in the order the service applies
them (a node silent now is DOWN for the node-loss check of the same moment,
and a job lost with its node is not also timed out); ``next_deadline(view,
now)`` is the earliest moment any of them will act, or a begin time comes.

Worked example. Job 7 starts at t=1000 with ``--time=10`` (end_time 1600),
``--signal=B:USR1@60`` and ``--deadline`` 1500; its script started
(launched). ``next_deadline`` and ``decide`` at its moments:

    now    next_deadline   decide(view, now)
    1000   1500            []                   warning due at 1540, deadline 1500
    1500   1500            [Stop(7, DEADLINE, "deadline")]
           then the service commits kill_reason DEADLINE: from now on no timer
           of job 7 is due (the deadline came first; no warning, no TIMEOUT),
           and its BatchFinished ends it DEADLINE (end_state).

The same job without ``--deadline``:

    1000   1540            []
    1540   1540            [Signal(7, USR1, batch_only=True, nodes=(batch host,))]
           the service commits warn_signal_sent, then sends the signal
    1541   1600            []
    1600   1600            [Stop(7, TIMEOUT, "time limit")]

And with ``--deadline`` 1500 while still pending at t=950: a 10-minute job
can no longer end by 1500 from t=900 on, so ``decide`` at 950 returns
``[Expire(7)]`` (DEADLINE, reason DeadLine, never started).
"""
from __future__ import annotations

import signal as signals
from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Union

from lingjun import slurm
from lingjund.store.store import JobRecord, NodeRecord

# How far past a strict threshold ("silent for more than T") a timer wakes.
SLACK = 0.01

# kill reasons of the lifecycle's own stops (besides Slurm's state names)
HANG = "HANG"                  # stopped by hang detection
NODE_LOST = slurm.NODE_FAIL    # stopped because a node of the run was lost
REQUEUE = "REQUEUE"            # scontrol requeue of a running job: stopped, then pending again
REQUEUE_HOLD = "REQUEUE_HOLD"
NOT_RESPONDING = "Not responding"   # Slurm's reason for a node past SlurmdTimeout
DEFAULT_MAX_RESTARTS = 5       # Slurm's MAX_BATCH_REQUEUE, for requeueable jobs


# -- what the decisions look at -------------------------------------------------------
@dataclass(frozen=True)
class Prolog:
    """A prolog in progress: the nodes that have not answered yet."""
    job_id: int
    started: float
    waiting: tuple[str, ...]


@dataclass(frozen=True)
class Limits:
    """The configured times the timers count."""
    heartbeat_timeout_s: float = 0.0
    prolog_timeout_s: float = 0.0
    started_at: float = 0.0        # this controller's start: silence counts from here at the latest
    grace_s: Mapping[str, float] = field(default_factory=dict)   # partition -> GraceTime


@dataclass(frozen=True)
class View:
    """What the timers look at. Parts a caller does not need may stay empty."""
    holding: tuple[JobRecord, ...] = ()           # RUNNING, or ended and still completing
    deadline_pending: tuple[JobRecord, ...] = ()  # PENDING with a --deadline
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)
    streams: Mapping[str, float] = field(default_factory=dict)   # open stream -> last heartbeat
    activity: Mapping[int, float] = field(default_factory=dict)  # job -> newest sign of life
    prologs: tuple[Prolog, ...] = ()
    orphans: tuple[JobRecord, ...] = ()           # srun/salloc jobs no client holds
    next_begin: float | None = None               # the next pending job's begin time
    limits: Limits = field(default_factory=Limits)

    @cached_property
    def running(self) -> tuple[JobRecord, ...]:
        return tuple(j for j in self.holding if j.state == slurm.RUNNING)


# -- what must change ----------------------------------------------------------------
@dataclass(frozen=True)
class Stop:
    """Stop a running job: ``kill_reason`` decides how its run ends
    (TIMEOUT, DEADLINE, PREEMPTED, HANG, ...); ``why`` is what its nodes are told."""
    job_id: int
    kill_reason: str
    why: str
    exit_signal: int = 0
    event: str = ""        # a line for the job's history, when it deserves one


@dataclass(frozen=True)
class Signal:
    """--signal's warning, sent once per run ``before_s`` seconds before the job's
    end, as slurmctld does from its time-limit check: with "B:" to the batch
    shell only, else to the job's steps only (never the batch shell, whose
    default action for USR1 would end the job)."""
    job_id: int
    signal: int
    batch_only: bool
    nodes: tuple[str, ...]
    before_s: int


@dataclass(frozen=True)
class Expire:
    """A pending job that can no longer end by its --deadline: DEADLINE, never started."""
    job_id: int


@dataclass(frozen=True)
class CloseStream:
    """An agent stream silent past the heartbeat timeout is closed."""
    node: str
    silent_s: float


@dataclass(frozen=True)
class NodeDown:
    """A registered node without a stream, silent past the timeout: DOWN, Not responding."""
    node: str
    silent_s: float


@dataclass(frozen=True)
class NodeLost:
    """A running job holds DOWN nodes: the whole gang stops (faulttol.py)."""
    job_id: int
    lost: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Cleaned:
    """A DOWN node will not say JobCleaned: stop waiting for it."""
    job_id: int
    node: str


@dataclass(frozen=True)
class PrologTimeout:
    """The nodes that did not answer a job's prolog in time failed it."""
    job_id: int
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Abandon:
    """An srun/salloc allocation nobody took back after a controller restart ends."""
    job_id: int


Change = Union[Stop, Signal, Expire, CloseStream, NodeDown, NodeLost, Cleaned, PrologTimeout,
               Abandon]


# -- stopping ------------------------------------------------------------------------
def may_stop(job: JobRecord, kill_reason: str) -> bool:
    """Whether ``job`` may still be stopped for ``kill_reason``: it runs and nothing
    else stops it; the end of a grace time kills a preemption victim once."""
    if job.state != slurm.RUNNING:
        return False
    if kill_reason == slurm.PREEMPTED and job.kill_reason == slurm.PREEMPTED:
        return not job.preempt_killed
    return not job.kill_reason


# -- when each timer is due ----------------------------------------------------------
def time_limit_due(job: JobRecord) -> float | None:
    if (job.state == slurm.RUNNING and job.time_limit_min > 0 and job.end_time
            and not job.kill_reason):
        return job.end_time
    return None


def warning_due(job: JobRecord) -> float | None:
    """When --signal's warning is due for this run; None if none is (any more)."""
    spec = job.spec
    if (job.state != slurm.RUNNING or not spec.signal or job.warn_signal_sent
            or not job.end_time or job.kill_reason or not job.launched):
        return None
    return job.end_time - spec.signal_time_s


def limit_s(job: JobRecord) -> float:
    return job.time_limit_min * 60 if job.time_limit_min > 0 else 0


def deadline_due(job: JobRecord) -> float | None:
    """--deadline: a running job stops at it; a pending one goes once now plus
    its time limit would pass it (Slurm's rule)."""
    if job.deadline <= 0:
        return None
    if job.state == slurm.PENDING:
        return job.deadline - limit_s(job)
    if job.state == slurm.RUNNING and not job.kill_reason:
        return job.deadline
    return None


def grace_due(job: JobRecord, grace_s: Mapping[str, float]) -> float | None:
    if (job.state == slurm.RUNNING and job.kill_reason == slurm.PREEMPTED
            and not job.preempt_killed):
        return job.preempt_time + grace_s.get(job.partition, 0.0)
    return None


def preempt_eligible_time(job: JobRecord, preemptable: bool, exempt_s: float) -> float:
    """Slurm's PreemptEligibleTime: start + PreemptExemptTime; 0 when the job
    cannot be preempted (not started, or ``preemptable`` False: preemption off,
    or its partition's mode is OFF)."""
    if not job.start_time or not preemptable:
        return 0.0
    return job.start_time + exempt_s


def last_sign_of_life(job: JobRecord, activity: Mapping[int, float]) -> float:
    return max(activity.get(job.job_id, 0.0), job.start_time)


def hang_after(job: JobRecord, activity: Mapping[int, float]) -> float | None:
    """Past this moment (strictly) a job with --hang-timeout counts as hung."""
    timeout = job.spec.hang_timeout_s
    if job.state != slurm.RUNNING or timeout <= 0 or job.kill_reason or not job.launched:
        return None
    return last_sign_of_life(job, activity) + timeout


def silent_since(rec: NodeRecord, limits: Limits) -> float:
    return max(rec.last_seen, limits.started_at)


# -- decisions ----------------------------------------------------------------------
def heartbeats(view: View, now: float) -> list[Change]:
    """Streams silent past the timeout close; nodes without a stream that long go DOWN.

    A stream closed now counts as silent since its last heartbeat (the service
    records that as the node's last_seen), so it is DOWN in the same moment,
    not one more timeout later."""
    timeout = view.limits.heartbeat_timeout_s
    out: list[Change] = []
    closed: dict[str, float] = {}
    for node, last in view.streams.items():
        if now - last > timeout:
            out.append(CloseStream(node, now - last))
            closed[node] = last or now
    for rec in view.nodes.values():
        if not rec.registered or rec.down:
            continue
        if rec.name in view.streams and rec.name not in closed:
            continue
        since = max(closed.get(rec.name, rec.last_seen), view.limits.started_at)
        if now - since > timeout:
            out.append(NodeDown(rec.name, now - since))
    return out


def node_loss(view: View, now: float, down_now: tuple[str, ...] = ()) -> list[Change]:
    """Every running job holding a DOWN node stops as a whole gang; a DOWN node
    no longer counts as cleaning up after a job. ``down_now``: nodes going DOWN
    in the same moment (their reason is Not responding)."""
    down = {n: r.reason or "DOWN" for n, r in view.nodes.items() if r.down}
    down.update((n, NOT_RESPONDING) for n in down_now)
    if not down:
        return []
    out: list[Change] = []
    for job in view.holding:
        lost = tuple(n for n in job.nodes if n in down)
        if lost and job.state == slurm.RUNNING and job.kill_reason != NODE_LOST:
            out.append(NodeLost(job.job_id, lost, down[lost[0]]))
        out.extend(Cleaned(job.job_id, n) for n in job.completing if n in down)
    return out


def lost_node_outcome(job: JobRecord, lost: tuple[str, ...], alive: tuple[str, ...]) -> str:
    """What a lost node does to ``job`` (RUNNING), given the nodes of it still alive:

    "wait":        it is being stopped already and its script lives: its result ends it
    "end_stopped": it was being stopped and its script is gone: ends as asked, now
    "end_alloc":   an allocation (srun/salloc): ends NODE_FAIL now
    "stop":        its script lives on the batch host: stop it (kill_reason NODE_FAIL)
    "end_run":     its script is gone with the node: the run ends NODE_FAIL now
                   (restarted or final per the restart policy)
    """
    batch_alive = job.batch_host not in lost and job.batch_host in alive
    if job.kill_reason and batch_alive:
        return "wait"
    if job.kill_reason and job.spec.batch:
        return "end_stopped"
    if not job.spec.batch:
        return "end_alloc"
    return "stop" if batch_alive else "end_run"


def hangs(view: View, now: float, skip: frozenset[int] = frozenset()) -> list[Change]:
    out: list[Change] = []
    for job in view.running:
        after = hang_after(job, view.activity)
        if after is None or job.job_id in skip or not now > after:
            continue
        idle = now - last_sign_of_life(job, view.activity)
        out.append(Stop(job.job_id, HANG, "hang", event=(
            f"hang detected: no output or heartbeat for {idle:.0f} s "
            f"(--hang-timeout {job.spec.hang_timeout_s} s) on "
            f"{slurm.compress_hostlist(list(job.nodes))}")))
    return out


def prologs(view: View, now: float) -> list[Change]:
    return [PrologTimeout(p.job_id, tuple(sorted(p.waiting))) for p in view.prologs
            if now - p.started > view.limits.prolog_timeout_s]


def orphaned(job: JobRecord) -> bool:
    """An srun/salloc allocation (listed in ``View.orphans``: no client holds it)
    that nothing is stopping yet."""
    return (job.state in (slurm.PENDING, slurm.RUNNING) and not job.spec.batch
            and not job.kill_reason)


def orphans(view: View, now: float) -> list[Change]:
    """After a restart, allocations whose client did not take the lease back
    within the heartbeat timeout end (service/allocations.py)."""
    if now - view.limits.started_at < view.limits.heartbeat_timeout_s:
        return []
    return [Abandon(j.job_id) for j in view.orphans if orphaned(j)]


def job_timers(view: View, now: float, skip: frozenset[int] = frozenset()) -> list[Change]:
    """Time limits, then --signal warnings, then deadlines, then grace times: a
    job reaching two at once is stopped for the first."""
    limits: list[Change] = []
    warnings: list[Change] = []
    deadlines: list[Change] = []
    graces: list[Change] = []
    for job in view.running:
        if job.job_id in skip:
            continue
        t = time_limit_due(job)
        if t is not None and now >= t:
            limits.append(Stop(job.job_id, slurm.TIMEOUT, "time limit"))
            continue
        t = warning_due(job)
        if t is not None and now >= t:
            spec = job.spec
            batch_only = spec.signal_flags == "B"
            warnings.append(Signal(job.job_id, spec.signal, batch_only,
                                   (job.batch_host,) if batch_only else tuple(job.nodes),
                                   spec.signal_time_s))
        t = deadline_due(job)
        if t is not None and now >= t:
            deadlines.append(Stop(job.job_id, slurm.DEADLINE, "deadline"))
            continue
        t = grace_due(job, view.limits.grace_s)
        if t is not None and now >= t:
            graces.append(Stop(job.job_id, slurm.PREEMPTED, "preempted",
                               exit_signal=int(signals.SIGTERM)))
    expired: list[Change] = []
    for job in view.deadline_pending:
        t = deadline_due(job)
        if t is not None and now >= t:
            expired.append(Expire(job.job_id))
    return limits + warnings + expired + deadlines + graces


def decide(view: View, now: float) -> list[Change]:
    """Every change due at ``now``, in the order the service applies them."""
    out = heartbeats(view, now)
    down_now = tuple(c.node for c in out if isinstance(c, NodeDown))
    loss = node_loss(view, now, down_now)
    out += loss
    lost = frozenset(c.job_id for c in loss if isinstance(c, NodeLost))
    out += hangs(view, now, skip=lost)
    out += prologs(view, now)
    out += orphans(view, now)
    hung = frozenset(c.job_id for c in out if isinstance(c, Stop))
    out += job_timers(view, now, skip=lost | hung)
    return out


def next_deadline(view: View, now: float) -> float | None:
    """The earliest moment a decision above will act (or a pending job's begin
    time comes, for the scheduler); None when no timer runs."""
    lim = view.limits
    moments: list[float] = []
    for job in view.running:
        for t in (time_limit_due(job), warning_due(job), deadline_due(job),
                  grace_due(job, lim.grace_s)):
            if t is not None:
                moments.append(t)
        t = hang_after(job, view.activity)
        if t is not None:
            moments.append(t + SLACK)
    for job in view.deadline_pending:
        t = deadline_due(job)
        if t is not None:
            moments.append(t)
    moments += [last + lim.heartbeat_timeout_s + SLACK for last in view.streams.values()]
    moments += [silent_since(r, lim) + lim.heartbeat_timeout_s + SLACK
                for r in view.nodes.values()
                if r.registered and not r.down and r.name not in view.streams]
    moments += [p.started + lim.prolog_timeout_s + SLACK for p in view.prologs]
    if any(orphaned(j) for j in view.orphans):
        moments.append(lim.started_at + lim.heartbeat_timeout_s)
    if view.next_begin is not None:
        moments.append(view.next_begin)
    return min(moments) if moments else None


# -- how a run ends ------------------------------------------------------------------
# The error of a batch result whose node's lease ran out and whose supervisor
# stopped it (lingjun_agent/launcher/stepd.py): the node was lost to the job,
# though the controller may have been the silent one (a paused controller).
FENCED = "fenced:"


def end_state(kill_reason: str, *, exit_code: int = 0, signal: int = 0, error: str = "",
              lost: bool = False, out_of_memory: bool = False) -> tuple[str, str]:
    """The state and reason a run ends in: what stopped it (``kill_reason``)
    decides; otherwise its script's exit. ``lost``: its node was lost with it;
    ``out_of_memory``: the OOM killer hit it in its cgroup (Slurm's
    OUT_OF_MEMORY, ExitCode 0:125), whatever the script did after."""
    fenced = error.startswith(FENCED) and not kill_reason
    if lost or fenced or kill_reason == slurm.NODE_FAIL:     # a node of the run was lost
        return slurm.NODE_FAIL, slurm.REASON_NODE_DOWN
    if kill_reason == slurm.CANCELLED:
        return slurm.CANCELLED, slurm.REASON_NONE
    if kill_reason == HANG:                # stopped as hung, whatever its exit
        return slurm.FAILED, slurm.REASON_NON_ZERO_EXIT
    if kill_reason == slurm.TIMEOUT:
        return slurm.TIMEOUT, slurm.REASON_TIME_LIMIT
    if kill_reason == slurm.DEADLINE:
        return slurm.DEADLINE, slurm.REASON_DEADLINE
    if kill_reason == slurm.PREEMPTED:     # PreemptMode=CANCEL (REQUEUE requeues)
        return slurm.PREEMPTED, slurm.REASON_NONE
    if error:
        return slurm.FAILED, slurm.REASON_JOB_LAUNCH_FAILURE
    if out_of_memory:
        return slurm.OUT_OF_MEMORY, slurm.REASON_OUT_OF_MEMORY
    if exit_code == 0 and signal == 0:
        return slurm.COMPLETED, slurm.REASON_NONE
    return slurm.FAILED, slurm.REASON_NON_ZERO_EXIT


# -- restarts and requeue -------------------------------------------------------------
def restart_limit(job: JobRecord, cause: str, requeueable: bool) -> int:
    """How many restarts in all a run ending for ``cause`` allows (restarts.py's table)."""
    spec = job.spec
    if not spec.batch:
        return 0         # an allocation's client is gone with its run: nothing to restart
    if spec.HasField("max_restarts"):
        return spec.max_restarts
    if cause in (slurm.NODE_FAIL, HANG) and requeueable:
        return DEFAULT_MAX_RESTARTS
    return 0


def restart_backoff_s(restarts: int, base_s: float, max_s: float) -> float:
    """Wait before the next automatic restart: doubling per restart, capped."""
    return min(base_s * (2 ** restarts), max_s)


def requeue_fields(job: JobRecord, now: float, delay_s: float, hold: bool,
                   release_nodes: bool = True) -> dict:
    """The job row of a job put back in the queue (same id, one more restart).

    ``release_nodes`` False keeps the last run's nodes listed while they still
    clean up (batch.job_cleaned lets go of them), so nothing else lands there
    before they are clean.
    """
    fields = dict(state=slurm.PENDING, reason=slurm.REASON_BEGIN_TIME, restarts=job.restarts + 1,
                  eligible_time=now + delay_s, start_time=0.0, end_time=0.0, exit_code=0,
                  exit_signal=0, kill_reason="", launched=False, cancelled_by="")
    if release_nodes:
        fields.update(nodes=(), cpus_per_node=(), mem_per_node=(), gpus_per_node=(),
                      gpu_ids=(), tasks_per_node=(), batch_host="")
    if hold:
        fields.update(held=True, hold_admin=False, reason=slurm.REASON_HELD_USER)
    return fields
