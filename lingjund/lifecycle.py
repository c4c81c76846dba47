"""The job and node lifecycle: every timer and every event, and the transitions
they cause, in one place.

Pure: no I/O, no clock of its own, no store. Each timer's decision is a
function of a ``View`` (plain records: jobs, nodes, the last heartbeat of
each open agent stream, config values) and ``now``, each event's a function
of the job it befalls (see "Events" below), and each returns what must
change, as dataclasses; the service (``lingjund/service/timers.py`` and the modules that
own each kind of change) loads the view, asks here, commits the changes in
one transaction, and only then sends what the agents must hear.

    timer                 due at (the moment ``decide`` acts)        change
    time limit            end_time                                   Stop(TIMEOUT)
    --signal warning      end_time - signal_time_s (launched jobs)   Signal
    --deadline, running   deadline                                   Stop(DEADLINE)
    --deadline, pending   deadline - time limit                      Expire
    preemption grace      preempt_time + partition GraceTime         Stop(PREEMPTED)
    hang                  after last sign of life + --hang-timeout   Stop(HANG)
    straggler             a rank's last sign + --hang-timeout,        Stop(HANG, suspects)
                          while the job as a whole lives
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

Events. What happens to a job from outside is decided here too, by one
function per event, each a function of the job (and what the service loaded
for it) and ``now``. A ``Transition`` is the job row to write and the nodes
to tell; the service commits it and then sends it (service/batch.py's
``commit`` and ``send``). Every stop of a running job is ``stop``; every end
of a run writes ``finish``'s fields; every job that never ran ends with
``never_started``'s.

    event                              decision          becomes
    the scheduler places a job         start             RUNNING
    a batch script ends (BatchFinished) batch_ended      RunEnd: the end state
                                                         (end_state), or PENDING
                                                         again (requeue, restart)
    scancel                            cancel            pending: CANCELLED;
                                                         running: stop(CANCELLED)
    scontrol requeue, ended job        requeue           PENDING, Restarts+1
    srun/salloc released               released          COMPLETED | FAILED
    srun/salloc client gone            abandon           CANCELLED, or stop(CANCELLED)
    dependency never satisfied         never_runnable    CANCELLED (kill_invalid_depend)
    pending past its --deadline        expire            DEADLINE
    a prolog failed                    prolog_failed     PENDING as it was
    chosen as a preemption victim      preempt           grace time starts
    a node of a running job lost       node_lost         stop(NODE_FAIL), or the run
                                                         ends NODE_FAIL now
    an agent registers                 registered        node back UP; jobs to launch,
                                                         stop, clean up, or lost

Any event on a job that has ended changes nothing (None, or no new state),
and only a requeue (``requeue_fields``) takes an ended run back to PENDING;
nothing but ``start`` makes a job RUNNING.

Worked example, continued. Job 7 runs on node[1-2] (batch host node1,
requeueable, no restarts yet; restart backoff 10 s):

    t     event                      decision, and what it returns
    1200  node2 lost, node1 alive    node_lost(job, ("node2",), ("node1",), 1200, ...)
                                     -> Transition: kill_reason NODE_FAIL; node[1-2]
                                        told to stop it (its script lives on node1)
    1203  its script ends, SIGTERM   batch_ended(job, 1203, signal=15, alive={node1})
                                     -> RunEnd NODE_FAIL, outcome RESTART (1 of 5),
                                        delay 10: PENDING, reason BeginTime,
                                        Restarts=1, eligible at 1213; node1 still
                                        completing, so the nodes stay listed
    1205  scancel 7                  cancel(job, 1205, by="1000", ...)
                                     -> CANCELLED, start = end = 1205, nothing to send
    1206  scancel 7 again            cancel(...) -> None: "already completed"
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
SUSPECT = "suspect: "           # a quarantined node's drain reason (service/quarantine.py)
DEFAULT_MAX_RESTARTS = 5       # Slurm's MAX_BATCH_REQUEUE, for requeueable jobs


# -- what the decisions look at -------------------------------------------------------
@dataclass(frozen=True)
class Prolog:
    """A prolog in progress: the nodes that have not answered yet."""
    job_id: int
    started: float
    waiting: tuple[str, ...]


@dataclass(frozen=True)
class RankSeen:
    """One srun task's last sign of life, as its node reported it (among the
    node's longest silent ranks of the job)."""
    node: str
    step_id: int
    rank: int
    last: float


@dataclass(frozen=True)
class Limits:
    """The configured times the timers count."""
    heartbeat_timeout_s: float = 0.0
    prolog_timeout_s: float = 0.0
    started_at: float = 0.0        # this controller's start: silence counts from here at the latest
    grace_s: Mapping[str, float] = field(default_factory=dict)   # partition -> GraceTime
    # QOS -> GraceTime under preempt/qos, where a victim's grace is its QOS's
    # (Slurm's preempt/qos); None: the partition's
    qos_grace_s: Mapping[str, float] | None = None


@dataclass(frozen=True)
class View:
    """What the timers look at. Parts a caller does not need may stay empty."""
    holding: tuple[JobRecord, ...] = ()           # RUNNING, or ended and still completing
    deadline_pending: tuple[JobRecord, ...] = ()  # PENDING with a --deadline
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)
    streams: Mapping[str, float] = field(default_factory=dict)   # open stream -> last heartbeat
    activity: Mapping[int, float] = field(default_factory=dict)  # job -> newest sign of life
    ranks: Mapping[int, tuple[RankSeen, ...]] = field(default_factory=dict)  # job -> quiet ranks
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
    # the nodes the stop implicates (a straggler's), each with why: quarantined
    suspects: tuple[tuple[str, str], ...] = ()


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


def grace_due(job: JobRecord, lim: Limits) -> float | None:
    if (job.state == slurm.RUNNING and job.kill_reason == slurm.PREEMPTED
            and not job.preempt_killed):
        return job.preempt_time + grace_of(job, lim)
    return None


def grace_of(job: JobRecord, lim: Limits) -> float:
    """The GraceTime a preempted job gets: its QOS's under preempt/qos
    (``lim.qos_grace_s``), else its partition's."""
    if lim.qos_grace_s is not None:
        return lim.qos_grace_s.get(job.spec.qos or slurm.DEFAULT_QOS, 0.0)
    return lim.grace_s.get(job.partition, 0.0)


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


def stragglers(job: JobRecord, ranks: Mapping[int, tuple[RankSeen, ...]],
               now: float) -> list[RankSeen]:
    """The ranks of a job with --hang-timeout silent past it at ``now``
    (strictly), longest silent first."""
    after = rank_hang_after(job, ranks)
    if after is None or not now > after:
        return []
    timeout = job.spec.hang_timeout_s
    quiet = [r for r in ranks.get(job.job_id, ()) if now > max(r.last, job.start_time) + timeout]
    return sorted(quiet, key=lambda r: (r.last, r.node, r.rank))


def rank_hang_after(job: JobRecord, ranks: Mapping[int, tuple[RankSeen, ...]]) -> float | None:
    """Past this moment (strictly) the longest silent rank of a job with
    --hang-timeout counts as a straggler."""
    seen = ranks.get(job.job_id)
    timeout = job.spec.hang_timeout_s
    if (not seen or job.state != slurm.RUNNING or timeout <= 0 or job.kill_reason
            or not job.launched):
        return None
    return max(min(r.last for r in seen), job.start_time) + timeout


def straggler_text(quiet: list[RankSeen], now: float, timeout_s: int) -> str:
    """"rank 37 on node12 silent for 300 s; others active" (a few named, the rest counted)."""
    named = [f"rank {r.rank} on {r.node} silent for {now - r.last:.0f} s" for r in quiet[:4]]
    more = f", {len(quiet) - 4} more" if len(quiet) > 4 else ""
    return (", ".join(named) + more + f"; others active (--hang-timeout {timeout_s} s)")


def straggler_nodes(job: JobRecord, quiet: list[RankSeen], now: float
                    ) -> tuple[tuple[str, str], ...]:
    """Each node of a straggler, with why: "job 7 rank 2 silent for 300 s"."""
    out: dict[str, str] = {}
    for r in quiet:
        if r.node not in out:
            out[r.node] = f"job {job.job_id} rank {r.rank} silent for {now - r.last:.0f} s"
    return tuple(out.items())


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
        if after is None or job.job_id in skip:
            continue
        if not now > after:
            quiet = stragglers(job, view.ranks, now)
            if quiet:
                out.append(Stop(job.job_id, HANG, "hang",
                                event=straggler_text(quiet, now, job.spec.hang_timeout_s),
                                suspects=straggler_nodes(job, quiet, now)))
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
        t = grace_due(job, view.limits)
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
                  grace_due(job, lim)):
            if t is not None:
                moments.append(t)
        t = hang_after(job, view.activity)
        if t is not None:
            moments.append(t + SLACK)
        t = rank_hang_after(job, view.ranks)
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
        fields.update(RELEASED)
    if hold:
        fields.update(held=True, hold_admin=False, reason=slurm.REASON_HELD_USER)
    return fields


# -- events: a job's transition, and whom it tells -------------------------------------
# The job row columns of a placement; a run that let go of its nodes clears them.
RELEASED = dict(nodes=(), cpus_per_node=(), mem_per_node=(), gpus_per_node=(), gpu_ids=(),
                tasks_per_node=(), batch_host="")


@dataclass(frozen=True)
class Transition:
    """One job's transition, decided: the job row ``fields`` the service writes in
    its transaction and, once that has committed, the nodes told to end what
    the job runs there (``terminate``: TerminateJob, SIGTERM then SIGKILL
    ``grace_s`` later, ``why`` in the agent's log). ``ended``: the job ended
    here (it leaves the queue, or its nodes' work is over: the scheduler
    looks again)."""
    job_id: int
    fields: Mapping[str, object]
    terminate: tuple[str, ...] = ()
    grace_s: float = 0.0
    why: str = ""
    ended: bool = False


def start(job: JobRecord, now: float, *, nodes: tuple[str, ...], cpus_per_node=(),
          mem_per_node=(), gpus_per_node=(), gpu_ids=(), tasks_per_node=()) -> dict:
    """PENDING -> RUNNING on ``nodes`` (the scheduler's placement): the job row of
    a run that starts now; its time limit ends it at ``end_time``."""
    end = now + job.time_limit_min * 60 if job.time_limit_min > 0 else 0
    return dict(state=slurm.RUNNING, reason=slurm.REASON_NONE, start_time=now, end_time=end,
                nodes=tuple(nodes), cpus_per_node=tuple(cpus_per_node),
                mem_per_node=tuple(mem_per_node), gpus_per_node=tuple(gpus_per_node),
                gpu_ids=tuple(gpu_ids), tasks_per_node=tuple(tasks_per_node),
                batch_host=nodes[0], launched=False, warn_signal_sent=False)


def finish(state: str, reason: str, end_time: float, *, exit_code: int = 0,
           exit_signal: int = 0, completing: tuple[str, ...] = ()) -> dict:
    """The end of a run, in ``state``: the one set of end fields. The nodes, CPUs
    and GPU indices stay on the row (sacct and scontrol show where it ran);
    ``completing`` are the nodes it still holds until each says JobCleaned."""
    return dict(state=state, reason=reason, end_time=end_time, exit_code=exit_code,
                exit_signal=exit_signal, completing=tuple(completing))


def never_started(state: str, now: float, **fields) -> dict:
    """The end of a job that never ran (cancelled or expired while pending): it
    starts and ends ``now``, as slurmctld records it; its pending reason stays
    unless ``fields`` give one."""
    return dict(state=state, start_time=now, end_time=now, **fields)


def stop(job: JobRecord, kill_reason: str, now: float, *, why: str, grace_s: float,
         alive: frozenset[str] | tuple[str, ...] = (), exit_signal: int = 0,
         **fields) -> Transition:
    """Stop a RUNNING job for ``kill_reason``: the one transition of every stopper
    (time limit, deadline, the end of a preemption grace time, scancel, hang,
    requeue, a lost node, an srun/salloc gone away).

    A batch job's nodes are told to kill it, and its script's BatchFinished
    ends the run as ``kill_reason`` says (``batch_ended``). An allocation
    (srun/salloc) has no script to report its end: it ends here, in the state
    the same kill_reason gives a batch job; its nodes among ``alive`` (those
    with an agent stream) clean up. ``fields``: more columns (cancelled_by,
    preempt_killed).
    """
    fields = dict(kill_reason=kill_reason, **fields)
    if job.spec.batch:
        return Transition(job.job_id, fields, tuple(job.nodes), grace_s, why)
    state, reason = end_state(kill_reason, signal=exit_signal)
    completing = tuple(n for n in job.nodes if n in alive)
    fields.update(finish(state, reason, now, exit_signal=exit_signal, completing=completing))
    return Transition(job.job_id, fields, completing, grace_s, why, ended=True)


def cancel(job: JobRecord, now: float, *, by: str, grace_s: float,
           alive: frozenset[str] | tuple[str, ...] = ()) -> Transition | None:
    """scancel (no signal): a pending job ends CANCELLED at once; a running one is
    stopped (scancel overrides a preemption in its grace time); one already
    being stopped for something else has its nodes told again. None: it had
    ended already (Slurm's "Job/step already completing or completed")."""
    if job.state == slurm.PENDING:
        return Transition(job.job_id, never_started(slurm.CANCELLED, now, cancelled_by=by),
                          ended=True)
    if job.state != slurm.RUNNING:
        return None
    if not job.kill_reason or job.kill_reason == slurm.PREEMPTED:
        return stop(job, slurm.CANCELLED, now, why="cancelled", grace_s=grace_s, alive=alive,
                    exit_signal=int(signals.SIGTERM), cancelled_by=by)
    return Transition(job.job_id, {}, tuple(job.nodes), grace_s, "cancelled")


def abandon(job: JobRecord, now: float, *, alive: frozenset[str] | tuple[str, ...] = ()
            ) -> Transition | None:
    """An srun/salloc's client is gone: pending, it is cancelled; running, it is
    stopped CANCELLED at once (SIGKILL, no grace). None: nothing left to do."""
    if job.state == slurm.PENDING:
        return Transition(job.job_id, never_started(slurm.CANCELLED, now), ended=True)
    if job.state != slurm.RUNNING or job.kill_reason:
        return None
    return stop(job, slurm.CANCELLED, now, why="allocation's client went away", grace_s=0.0,
                alive=alive, exit_signal=int(signals.SIGKILL))


def released(job: JobRecord, now: float, exit_code: int, signal: int, *, grace_s: float,
             alive: frozenset[str] | tuple[str, ...] = ()) -> Transition:
    """An srun/salloc's command is done: the allocation ends COMPLETED, or FAILED
    with its exit (sacct's ExitCode); its nodes among ``alive`` clean up."""
    ok = exit_code == 0 and signal == 0
    completing = tuple(n for n in job.nodes if n in alive)
    return Transition(job.job_id, finish(
        slurm.COMPLETED if ok else slurm.FAILED,
        slurm.REASON_NONE if ok else slurm.REASON_NON_ZERO_EXIT, now,
        exit_code=exit_code, exit_signal=signal, completing=completing),
        completing, grace_s, "job ended", ended=True)


def never_runnable(job: JobRecord, now: float, remaining: str) -> Transition:
    """A pending job whose dependency can never be satisfied, and which asked to
    be killed then (--kill-on-invalid-dep, or kill_invalid_depend): CANCELLED,
    reason DependencyNeverSatisfied, never started."""
    return Transition(job.job_id, never_started(
        slurm.CANCELLED, now, reason=slurm.REASON_DEPENDENCY_NEVER, dependency=remaining),
        ended=True)


def expire(job: JobRecord, now: float) -> Transition:
    """A pending job that can no longer end by its --deadline (``Expire``):
    DEADLINE, reason DeadLine, never started."""
    return Transition(job.job_id, never_started(slurm.DEADLINE, now,
                                                reason=slurm.REASON_DEADLINE), ended=True)


def prolog_failed(job: JobRecord) -> Transition:
    """Its prolog failed before its script started: back to PENDING as it was
    (same priority, submit time and restart count: it never ran)."""
    return Transition(job.job_id, dict(state=slurm.PENDING, reason=slurm.REASON_RESOURCES,
                                       start_time=0.0, end_time=0.0, launched=False, **RELEASED))


def requeue(job: JobRecord, now: float, delay_s: float, hold: bool) -> Transition:
    """scontrol requeue(hold) of a job that has ended: pending again at once, the
    same id, one more restart (a running one is ``stop``ped for REQUEUE first
    and pends again when its run has ended: ``batch_ended``)."""
    return Transition(job.job_id, requeue_fields(job, now, delay_s, hold))


def preempt(job: JobRecord, by: int, now: float, requeue: bool) -> dict:
    """A running job chosen as a victim of job ``by``: its grace time starts now
    (``grace_due``); at its end the job is stopped PREEMPTED and then ends, or,
    with ``requeue`` (PreemptMode=REQUEUE), pends again. No --signal warning
    after this: the victim gets its signal now."""
    return dict(kill_reason=slurm.PREEMPTED, preempted_by=by, preempt_time=now,
                preempt_killed=False, preempt_requeue=requeue, warn_signal_sent=True)


# -- a batch run's end ----------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """What decides whether an ended run runs again: the job's requeueability
    (--requeue, else the cluster's JobRequeue), the restart backoff, scontrol
    requeue's delay, and how long its silent nodes may still be fencing it."""
    requeueable: bool = True
    backoff_s: float = 0.0
    backoff_max_s: float = 0.0
    requeue_delay_s: float = 0.0
    fence_wait_s: float = 0.0
    cron_next: float = 0.0        # a scrontab entry's job: its next time (0: not one, or removed)


# what becomes of the job after its run ended (RunEnd.outcome)
FINAL = "final"           # the run's end is the job's end
GAVE_UP = "gave_up"       # the same, with a restart limit reached (a line in its history)
REQUEUED = "requeued"     # scontrol requeue or PreemptMode=REQUEUE: pending again
RESTART = "restart"       # the restart policy runs it again after a backoff
CRON = "cron"             # a scrontab entry's run ended: pending again for its next time


@dataclass(frozen=True)
class RunEnd:
    """A batch run ended: ``state``/``reason`` say how (``end_state``), ``outcome``
    what becomes of the job, ``fields`` its row, ``step_state`` the batch
    step's, ``attempt_state`` the state the run is kept as in the job's
    attempts ("" when it is not kept: the job row is the last run), ``limit``
    and ``delay`` the restart policy's; ``terminate``: the nodes that clean up."""
    job_id: int
    state: str
    reason: str
    outcome: str
    fields: Mapping[str, object]
    step_state: str
    attempt_state: str = ""
    cause: str = ""
    limit: int = 0
    delay: float = 0.0
    terminate: tuple[str, ...] = ()


def batch_ended(job: JobRecord, now: float, *, end_time: float = 0.0, exit_code: int = 0,
                signal: int = 0, error: str = "", lost: bool = False,
                out_of_memory: bool = False,
                alive: frozenset[str] | tuple[str, ...] = (), policy: Policy = Policy()
                ) -> RunEnd | None:
    """A RUNNING batch job's script ended (BatchFinished), or was lost with its
    node (``lost``). What stopped it decides the state, else its exit
    (``end_state``); then:

        stopped for REQUEUE(_HOLD), or preempted with PreemptMode=REQUEUE
                                  -> REQUEUED: pending again after requeue_delay_s
        NODE_FAIL, FAILED (or HANG) with restarts left (``restart_limit``)
                                  -> RESTART: pending again after the backoff
        a scrontab entry (``policy.cron_next``), not cancelled
                                  -> CRON: pending again until its next time
        otherwise                 -> FINAL (GAVE_UP when a limit was reached)

    Either way pending again waits for the fences of its silent nodes too, and
    its nodes among ``alive`` stay "completing" (the requeued job keeps them
    listed) until each has said JobCleaned. None: the run had ended already
    (a result reported twice changes nothing).
    """
    if job.state != slurm.RUNNING:
        return None
    end_time = end_time or now
    state, reason = end_state(job.kill_reason, exit_code=exit_code, signal=signal, error=error,
                              lost=lost, out_of_memory=out_of_memory)
    completing = tuple(n for n in job.nodes if n in alive)
    cause = HANG if job.kill_reason == HANG else state
    limit, delay, attempt = 0, 0.0, ""
    if (job.kill_reason in (REQUEUE, REQUEUE_HOLD)
            or job.kill_reason == slurm.PREEMPTED and job.preempt_requeue) and not lost:
        outcome = REQUEUED
        attempt = slurm.PREEMPTED if state == slurm.PREEMPTED else slurm.REQUEUED
        delay = policy.requeue_delay_s
    elif state in (slurm.NODE_FAIL, slurm.FAILED):
        limit = restart_limit(job, cause, policy.requeueable)
        if job.restarts < limit:
            outcome, attempt = RESTART, state
            delay = restart_backoff_s(job.restarts, policy.backoff_s, policy.backoff_max_s)
        else:
            outcome = GAVE_UP if limit else FINAL
    else:
        outcome = FINAL
    if outcome in (FINAL, GAVE_UP) and policy.cron_next and state != slurm.CANCELLED:
        # scrontab: whatever the run's end, the entry's next time comes (a
        # cancel disables the entry instead, as scancel of a cron job does)
        outcome, attempt = CRON, state
        delay = max(policy.cron_next - now, 0.0)
    if outcome in (REQUEUED, RESTART, CRON):
        fields = dict(requeue_fields(job, now, max(delay, policy.fence_wait_s),
                                     hold=job.kill_reason == REQUEUE_HOLD,
                                     release_nodes=not completing), completing=completing)
    else:
        fields = finish(state, reason, end_time, exit_code=exit_code, exit_signal=signal,
                        completing=completing)
    if outcome == REQUEUED:
        step_state = slurm.REQUEUED
    elif state in (slurm.CANCELLED, slurm.TIMEOUT, slurm.DEADLINE, slurm.PREEMPTED):
        step_state = slurm.CANCELLED
    elif state in (slurm.NODE_FAIL, slurm.OUT_OF_MEMORY):
        step_state = state
    else:
        step_state = slurm.COMPLETED if exit_code == 0 and signal == 0 else slurm.FAILED
    return RunEnd(job.job_id, state, reason, outcome, fields, step_state, attempt, cause, limit,
                  delay, completing)


def node_lost(job: JobRecord, lost: tuple[str, ...], alive: tuple[str, ...], now: float, *,
              grace_s: float, policy: Policy = Policy(),
              connected: frozenset[str] | tuple[str, ...] = ()) -> Transition | RunEnd | None:
    """A node of a RUNNING job was lost (``NodeLost``); ``alive``: the job's other
    nodes that still have an agent; ``connected``: those and the lost ones whose
    agent is still connected (a DOWN a person set): a job that ends here is
    ended on all of them, and only ``alive`` ones stay completing. The whole
    gang stops (``lost_node_outcome``):

        wait         None: its own stop goes on, its script's result ends it
                     (None too when it is no longer running, or already lost)
        end_stopped  Transition: it ends as its stop says, now
        end_alloc    Transition: the allocation ends NODE_FAIL, now
        stop         Transition: ``stop`` for NODE_FAIL (the script lives)
        end_run      RunEnd: the run ends NODE_FAIL, now (``batch_ended``, lost)
    """
    if job.state != slurm.RUNNING or job.kill_reason == NODE_LOST:
        return None
    outcome = lost_node_outcome(job, lost, alive)
    if outcome == "wait":
        return None
    if outcome == "stop":
        return stop(job, NODE_LOST, now, why="node failure", grace_s=grace_s, alive=alive)
    if outcome == "end_run":
        return batch_ended(job, now, end_time=now, signal=9, lost=True, alive=alive,
                           policy=policy)
    if outcome == "end_stopped":
        state, reason = end_state(job.kill_reason, signal=9)
    else:
        state, reason = slurm.NODE_FAIL, slurm.REASON_NODE_DOWN
    return Transition(job.job_id, finish(state, reason, now, exit_signal=9, completing=alive),
                      reachable(job, alive, connected), min(2.0, grace_s), "node failure",
                      ended=True)


def reachable(job: JobRecord, alive, connected) -> tuple[str, ...]:
    """The nodes of ``job`` told to end it after a node loss: those with an agent."""
    return tuple(n for n in job.nodes if n in alive or n in connected)


# -- an agent registers ------------------------------------------------------------------
# what a registering agent is told next about a job (Registration.follow)
LAUNCH = "launch"         # its batch script never started: launch it (again)
TERMINATE = "terminate"   # it is being stopped: stop it (again)
CLEANUP = "cleanup"       # it ended and this node still holds it: end what is left


@dataclass(frozen=True)
class Registration:
    """What an agent's Register changes. ``back``: a node DOWN only for silence
    returns to service (Slurm's ReturnToService=2); a DOWN a person set
    stays. ``expected``: the jobs the node is to keep running (it kills
    the others); ``follow``: (LAUNCH | TERMINATE | CLEANUP, job, why) in
    order; ``lost``: batch scripts it started, no longer runs and has no
    result for: their runs end as lost with the node (``batch_ended``)."""
    back: bool
    expected: tuple[int, ...] = ()
    follow: tuple[tuple[str, int, str], ...] = ()
    lost: tuple[int, ...] = ()


def registered(node: str, rec: NodeRecord | None, jobs: tuple[JobRecord, ...],
               running: frozenset[int], reported: frozenset[int]) -> Registration:
    """``node``'s agent registered, running ``running`` and having just reported
    the results ``reported``; ``jobs``: the jobs holding or cleaning up on it
    (after those results were recorded)."""
    back = rec is not None and rec.down and rec.reason == NOT_RESPONDING
    expected: list[int] = []
    follow: list[tuple[str, int, str]] = []
    lost: list[int] = []
    for job in jobs:
        if node not in job.nodes:
            continue
        if job.state == slurm.RUNNING and not job.kill_reason:
            if (job.spec.batch and job.batch_host == node and job.job_id not in running
                    and job.job_id not in reported):
                if job.launched:
                    lost.append(job.job_id)
                    continue
                follow.append((LAUNCH, job.job_id, ""))
            expected.append(job.job_id)
        elif job.state == slurm.RUNNING:
            follow.append((TERMINATE, job.job_id, job.kill_reason.lower()))
        if node in job.completing:
            follow.append((CLEANUP, job.job_id, "cleanup"))
    return Registration(back, tuple(expected), tuple(follow), tuple(lost))
