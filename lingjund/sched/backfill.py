"""When pending jobs could start later: the future of one pass, for backfill and --test-only.

Slurm's sched/backfill in the pure core. When a job cannot start now, the
pass (``cycle.py``) asks ``Future.earliest`` for the first time its whole
gang fits, and on which nodes, and reserves them: from that time until the
time plus the job's limit, those nodes are the job's. A lower job may then
start now only on nodes it does not share with any reservation, or on nodes
whose reservations all begin no earlier than it ends (now + its time limit);
a job without a time limit never starts on a reserved node. Reservations
are whole nodes, as Slurm's (its node_space map is a node bitmap per slot).

What "fits at time T" means. The free capacity at T is what is free now
plus what the running jobs ending by T give back, each ending at its start
plus its time limit (its expected end), rounded up to ``resolution_s``
(Slurm's bf_resolution) so that many ends make few distinct times. Jobs
started earlier in the same pass count as running. Capacity only grows with
time (nothing starts in the future but reservations), so what is free at T
is free over the whole of [T, T + limit), except the nodes some reservation
holds in that interval: those are left out of the placement at T. The
candidate times are now, each rounded end, and each reservation's end.

Example. node[1-4], 2 CPUs each; node1 runs job 7 (2 CPUs) until t=600;
now is t=0. Queue: job 10 asks 4 nodes (limit 10 min), job 11 asks 1 node
(limit 5 min), job 12 asks 1 node (no limit).

    job 10: does not fit now; at t=600 job 7 has ended: node[1-4] are
            free. Reserved: node[1-4] from 600 to 1200.
    job 11: fits now on node2, and ends at 300 <= 600, before the
            reservation starts: it starts now (backfilled).
    job 12: would fit now on node3, but without a limit it would hold
            node3 past 600: not now. Its earliest time is 1200 (after
            job 10's reservation): reserved node1 from 1200 on.

How it is kept. Each node touched by an end has a profile: its states at
now and at each of its end times, built once per pass from the running
jobs' ends, sorted once; the other nodes keep their state of now. A view of
time T is a ``FreeCapacity`` showing each node's state at T, with indexes of
its own (``FreeCapacity.showing``). A few views are kept (the times asked
last); when one more is needed, the nearest is moved: only the nodes whose
profile changes between the two times are put back in its indexes. So jobs
asking about the same few times cost their placements, not a rebuild. A
start in the pass is written into the profiles of its nodes (taken until
its end) and every kept view. Reservations are kept as (start, end, nodes),
only for the nodes involved.

The pass caps the work: at most ``max_job_test`` jobs get a reservation
query (Slurm's bf_max_job_test), and a job whose earliest time is past
``window_min`` (bf_window) gets none; such jobs block their partition as
without backfill, which is always safe.

Pure: no clock (``now`` is an argument), no I/O.
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass
from typing import Iterable, Sequence

from lingjund.sched.capacity import FreeCapacity
from lingjund.sched.pool import NodeFree, Placement, Share
from lingjund.sched.snapshot import UNLIMITED, JobRequest, RunningJob

NEVER = math.inf


@dataclass(frozen=True)
class Backfill:
    """sched/backfill's SchedulerParameters, with Slurm 22.05's defaults."""

    window_min: int = 1440         # bf_window: how far ahead a reservation may be
    max_job_test: int = 500        # bf_max_job_test: jobs given a reservation query per pass
    resolution_s: int = 60         # bf_resolution: expected ends are rounded up to this


def job_end(job: JobRequest, start: float) -> float:
    """When ``job`` started at ``start`` ends at the latest (its time limit); NEVER without one."""
    if job.time_limit_min == UNLIMITED or job.time_limit_min <= 0:
        return NEVER
    return start + job.time_limit_min * 60


class Frontier:
    """For one shape of job in one pass: how late a job of that shape must start, by its
    time limit. What the pass's reservation queries learned, so that the next job of
    the shape does not walk again the times the last one found full.

    Why it holds. A query for a job of limit L that found time T (or none, NEVER)
    says that at no candidate time before T does the job fit for L. The pass only
    takes (a start holds its nodes until its end, a reservation holds its nodes), so
    that stays true for the rest of the pass. A job of the same shape (the same
    partition, usable nodes and ``select.shape``) with a limit L' >= L asks the same
    of the same nodes at each time T', minus the nodes some reservation holds during
    [T', T' + L'): a superset of those held during [T', T' + L). Fewer nodes never
    make a placement that failed succeed (the pass's ``no_room`` holds for the same
    reason), so it fits at no time before T either: its search may begin at T. A
    shorter limit may fit before a reservation that a longer one runs into, so it
    learns nothing from a longer one.

    Example: job 20 (4 nodes, 2 h) finds 14:00; job 21 (4 nodes, 3 h) starts its
    search at 14:00; job 22 (4 nodes, 30 min) starts at the first end time, and may
    find 12:00 in front of job 20's reservation; job 23 (4 nodes, 1 h) then starts
    at 12:00.

    Only while no candidate time was added before all the others (``Future.lowered``
    is 0). A query never asks the times before the first candidate time: they
    show what the future has at now, which the pass asked itself of what is free
    now, and that can differ (a job past its end counts as gone in the future,
    not in the pass). A time added there later (a job started with a short
    limit) may fit where no query looked; the pass then goes on with what each
    shape and limit found itself, as it did before the frontier.

    Kept as the records not outdone by another (no record with a shorter or equal
    limit and a later time): limits ascending, times ascending."""

    __slots__ = ("_limit", "_time")

    def __init__(self) -> None:
        self._limit: list[float] = []     # seconds (NEVER: no limit), ascending
        self._time: list[float] = []      # the time learned for it, ascending

    def not_before(self, limit_s: float) -> float:
        """The first time a job of this shape with ``limit_s`` may fit (0: any)."""
        k = bisect_right(self._limit, limit_s)
        return self._time[k - 1] if k else 0.0

    def learn(self, limit_s: float, found: float) -> None:
        """A job of this shape and ``limit_s`` fits at no candidate time before ``found``."""
        if self.not_before(limit_s) >= found:
            return                        # known already
        k = bisect_left(self._limit, limit_s)
        j = k
        while j < len(self._limit) and self._time[j] <= found:
            j += 1                        # longer limits that learned no later: outdone
        self._limit[k:j] = [limit_s]
        self._time[k:j] = [found]


class Allowed:
    """The node ids a placement may use: those of ``only`` (None: all) not in ``excluded``.

    Stands where the index takes a frozenset of ids (it only asks ``in``)."""

    __slots__ = ("only", "excluded")

    def __init__(self, only: frozenset[int] | None, excluded: set[int]):
        self.only = only
        self.excluded = excluded

    def __contains__(self, i: int) -> bool:
        return i not in self.excluded and (self.only is None or i in self.only)


def allowed(only: frozenset[int] | None, excluded: set[int]):
    """``only`` itself when nothing is excluded (the index's fast path), else an ``Allowed``."""
    return only if not excluded else Allowed(only, excluded)


def _released(job: RunningJob, nodes: Sequence[NodeFree], ids: dict[str, int]
              ) -> Iterable[tuple[int, Share]]:
    """What ``job`` gives back on each of its nodes, as shares (unknown: everything)."""
    for k, name in enumerate(job.nodes):
        i = ids.get(name)
        if i is None:
            continue
        node = nodes[i]
        yield i, Share(node=name,
                       cpus=job.cpus_per_node[k] if k < len(job.cpus_per_node) else node.cpus,
                       mem_mb=job.mem_per_node_mb[k] if k < len(job.mem_per_node_mb) else 0,
                       gpus=job.gpus_per_node[k] if k < len(job.gpus_per_node) else node.gpus,
                       tasks=0, exclusive=job.exclusive,
                       gpu_ids=job.gpu_ids_per_node[k] if k < len(job.gpu_ids_per_node) else (),
                       shards=job.shards_per_node, mps=job.mps_per_node)


class _Held:
    """The ids of the nodes reservations hold during [t, end), for one job's walk
    over candidate times: t ascending, and end (t plus its limit) with it.

    Why: ``Future.excluded`` looks at every reservation for each (t, end), and a
    job's walk asks a new pair at each time (its own limit): with hundreds of
    reservations that was most of a query. Here each reservation comes in once,
    when end passes its start (its nodes added to the set at once), and goes
    once, when t reaches its end; then each of its nodes leaves the set unless
    another reservation still in holds it too (back to back on the node, both
    overlapping the interval). The set answered is this walk's own, changed by
    the next ``during``."""

    __slots__ = ("resv", "by_start", "by_end", "of_node", "k", "j", "active", "ids", "gone")

    def __init__(self, resv: Sequence[tuple[float, float, tuple[int, ...]]],
                 by_start: Sequence[tuple[float, int]], by_end: Sequence[tuple[float, int]],
                 of_node: dict[int, list[int]]):
        self.resv = resv                  # (start, end, ids), by place
        self.by_start = by_start          # (start, place), ascending
        self.by_end = by_end              # (end, place), ascending
        self.of_node = of_node            # id -> places of the reservations holding it
        self.k = 0                        # by_start[:k] came in (or were over already)
        self.j = 0                        # by_end[:j] are over
        self.active: set[int] = set()     # places of the reservations in
        self.ids: set[int] = set()
        self.gone = 0                     # how many went out (their nodes may be free again)

    def during(self, t: float, end: float) -> set[int]:
        resv, active, ids = self.resv, self.active, self.ids
        stop = bisect_left(self.by_start, (end, -1))      # the first starting at end or later
        if stop > self.k:
            for _, r in self.by_start[self.k:stop]:
                if resv[r][1] > t:        # one over already stays over for later t
                    active.add(r)
                    ids.update(resv[r][2])
            self.k = stop
        stop = bisect_right(self.by_end, (t, NEVER))       # the first ending after t
        if stop > self.j:
            of_node = self.of_node
            for _, r in self.by_end[self.j:stop]:
                if r in active:
                    active.discard(r)
                    self.gone += 1
                    for i in resv[r][2]:
                        if active.isdisjoint(of_node[i]):
                            ids.discard(i)
            self.j = stop
        return ids


class Future:
    """Free capacity at any time from ``now`` on, and the reservations made so far.

    ``free`` is the pass's capacity now (read once, at construction: later
    starts come through ``started``); ``running`` the snapshot's running jobs;
    ``started`` the pass's starts so far, as (shares, end)."""

    VIEWS = 8      # views of distinct times kept at once (each: its own indexes)

    def __init__(self, free: FreeCapacity, running: Sequence[RunningJob],
                 started: Iterable[tuple[Sequence[Share], float]], now: float,
                 resolution_s: float = 60, window_s: float = NEVER):
        self.now = now
        self.res = max(0, resolution_s)         # 0: ends as they are, not rounded
        self.horizon = now + window_s
        self.first = self._grid(now + 1) if self.res else now   # the first end time after now
        self.free = free
        self.ids = free.ids
        self.base = [n.copy() for n in free.nodes]   # every node now
        # per node id touched by an end: the times its state changes (the first is
        # now) and its states from then on
        self.prof_t: dict[int, list[float]] = {}
        self.prof_s: dict[int, list[NodeFree]] = {}
        self.at: dict[float, list[int]] = {}    # time -> node ids whose state changes then
        self.times: list[float] = []            # candidate times after now, ascending
        self.resv: list[tuple[float, float, tuple[int, ...]]] = []   # (start, end, node ids)
        self._by_start: list[tuple[float, int]] = []   # (start, its place in resv), ascending
        self._by_end: list[tuple[float, int]] = []     # (end, its place in resv), ascending
        self._of_node: dict[int, list[int]] = {}       # id -> places in resv of those holding it
        self.reserved: set[int] = set()         # ids of every node some reservation holds
        # Candidate times added before all others, counted only where a running
        # job is past its end: only then can the future before the first
        # candidate time hold more than the pass's now (see Frontier), and a
        # time added there fit what no query looked for.
        self.lowered = 0
        self._past_end = any(0 < r.end_time <= now for r in running)
        # (start, end) -> (ids held then, how many of resv they account for)
        self._excl: dict[tuple[float, float], tuple[set[int], int]] = {}
        self.views: list[list] = []             # [time shown, FreeCapacity], most recent last
        ends: dict[int, list[tuple[float, Share]]] = {}
        for r in running:
            if r.end_time <= 0:
                continue                          # unlimited: never gives anything back
            t = self._when(r.end_time)
            for i, share in _released(r, self.base, self.ids):
                ends.setdefault(i, []).append((t, share))
        for shares, end in started:
            if end == NEVER:
                continue
            t = self._when(end)
            for share in shares:
                i = self.ids.get(share.node)
                if i is not None:
                    ends.setdefault(i, []).append((t, share))
        times = set()
        for i, items in ends.items():
            items.sort(key=lambda e: e[0])
            state = self.base[i]
            ts, ss = [now], [state]
            for t, share in items:
                if t != ts[-1]:
                    state = state.copy()
                    ts.append(t)
                    ss.append(state)
                    self.at.setdefault(t, []).append(i)
                    times.add(t)
                state.release(share.cpus, share.mem_mb, share.gpus, share.gpu_ids,
                              share.exclusive, share.shards, share.mps)
            self.prof_t[i], self.prof_s[i] = ts, ss
        self.times = sorted(times)

    # -- time --------------------------------------------------------------------
    def _grid(self, t: float) -> float:
        return math.ceil(t / self.res) * self.res if self.res else t

    def _when(self, end: float) -> float:
        """The candidate time at which an end at ``end`` counts: rounded up, after now;
        a job already past its end counts as gone from now on (it is on its way out)."""
        if end <= self.now:
            return self.now
        return max(self._grid(end), self.first) if self.res else end

    def _state(self, i: int, t: float) -> NodeFree:
        ts = self.prof_t.get(i)
        if ts is None:
            return self.base[i]
        return self.prof_s[i][bisect_right(ts, t) - 1]

    def _add_time(self, t: float) -> None:
        k = bisect_left(self.times, t)
        if k == len(self.times) or self.times[k] != t:
            self.times.insert(k, t)
            if k == 0 and self._past_end:
                self.lowered += 1         # before every other: see Frontier

    def view(self, t: float) -> FreeCapacity:
        """Every node as it is at time ``t``: a view kept from an earlier question, a new
        one while fewer than VIEWS are kept, else the nearest one moved to ``t`` (only
        the nodes whose state changes between the two times are put back)."""
        views = self.views
        for k, v in enumerate(views):
            if v[0] == t:
                views.append(views.pop(k))
                return v[1]
        if len(views) < self.VIEWS:
            state = self._state
            cap = self.free.showing([state(i, t) for i in range(len(self.base))])
            views.append([t, cap])
            return cap
        times = self.times
        rank = bisect_left(times, t)
        k, far = 0, NEVER                # the first of the nearest, in candidate times
        for j, v in enumerate(views):
            d = abs(bisect_left(times, v[0]) - rank)
            if d < far:
                k, far = j, d
        v = views.pop(k)
        views.append(v)
        lo, hi = min(v[0], t), max(v[0], t)
        touched: set[int] = set()
        for k in range(bisect_right(times, lo), bisect_right(times, hi)):
            touched.update(self.at.get(times[k], ()))
        v[0] = t
        cap = v[1]
        for i in touched:
            cap.replace_node(i, self._state(i, t))
        return cap

    # -- what the pass tells it ----------------------------------------------------
    def started(self, shares: Sequence[Share], end: float) -> None:
        """A job of the pass starts now with ``shares`` and runs until ``end`` (NEVER:
        no limit): its nodes hold it from now until its (rounded) end."""
        t = NEVER if end == NEVER else self._when(end)
        for share in shares:
            i = self.ids.get(share.node)
            if i is None:
                continue
            ts = self.prof_t.get(i)
            if ts is None:
                ts, ss = self.prof_t[i], self.prof_s[i] = [self.now], [self.base[i]]
            else:
                ss = self.prof_s[i]
            p = len(ts) if t == NEVER else bisect_left(ts, t)
            if p < len(ts) and ts[p] == t:
                pass                             # the state from its end on is unchanged
            elif t != NEVER:
                ts.insert(p, t)
                ss.insert(p, ss[p - 1].copy())   # from its end on: as if it had not run
                self.at.setdefault(t, []).append(i)
                self._add_time(t)
            for v in self.views:
                v[1].replace_node(i, None)       # out of the indexes while states change
            for k in range(p):
                ss[k].take(share)
            for v in self.views:
                v[1].replace_node(i, self._state(i, v[0]))

    def reserve(self, start: float, end: float, nodes: Iterable[str]) -> None:
        """Hold ``nodes`` whole from ``start`` until ``end`` for a pending job."""
        ids = tuple(i for i in (self.ids.get(n) for n in nodes) if i is not None)
        r = len(self.resv)
        insort(self._by_start, (start, r))
        insort(self._by_end, (end, r))
        for i in ids:
            self._of_node.setdefault(i, []).append(r)
        self.resv.append((start, end, ids))
        self.reserved.update(ids)
        if end != NEVER:
            self._add_time(self._when(end))

    # -- questions -------------------------------------------------------------------
    def excluded(self, start: float, end: float) -> set[int]:
        """Ids of the nodes some reservation holds during [start, end).

        Remembered for the pass, and brought up to date when asked again by looking
        only at the reservations made since: reservations are only added, and the
        same intervals come back (every job of one limit asks the same at now, and
        walks the same candidate times). The set returned is not changed later: an
        update makes a new one."""
        resv = self.resv
        got = self._excl.get((start, end))
        if got is None:
            held: set[int] = set()
            for s, e, ids in resv:
                if s < end and start < e:
                    held.update(ids)
        else:
            held, seen = got
            if seen == len(resv):
                return held
            more = [ids for s, e, ids in resv[seen:] if s < end and start < e]
            if more:
                held = held.union(*more)
        self._excl[(start, end)] = (held, len(resv))
        return held

    def earliest(self, job: JobRequest, part: str, ids: Sequence[int],
                 only: frozenset[int] | None, select, most: int, not_before: float = 0.0,
                 include_now: bool = False) -> tuple[float, Placement] | None:
        """The first candidate time (not before ``not_before``; now itself only with
        ``include_now``) at which all of ``job`` fits for its whole time limit, and
        where; None if no time within the window will do.

        A time is not tried when, since the time before it (which did not fit),
        no reservation ended and every node whose state changes then is reserved
        over the job's interval: the nodes it may use are those of the time before,
        or fewer (reservations only came in), each as it was, and fewer nodes never
        fit what more did not (as the pass already takes of an indexed select: its
        ``no_room``; a plain ``place_gang`` is asked at every time). In a full queue
        most nodes that come free are reserved for higher jobs already, so most
        times are passed this way."""
        indexed = callable(getattr(select, "place_in", None))
        times = self.times[bisect_left(self.times, max(not_before, self.first)):]
        if include_now and not_before <= self.now:
            times = [self.now, *times]
        held = _Held(self.resv, self._by_start, self._by_end, self._of_node)
        tried = False
        for t in times:
            if t > self.horizon:
                break
            end = job_end(job, t)
            gone = held.gone
            excl = held.during(t, end)
            if indexed and tried and held.gone == gone and excl.issuperset(self.at.get(t, ())):
                continue          # nothing it may use came free since the last time: no fit
            tried = True
            cap = self.view(t)
            if indexed:
                placement = select.place_in(job, cap.free(part, allowed(only, excl)), most)
            else:
                nodes = cap.nodes
                placement = select.place_gang(
                    job, [nodes[i] for i in ids if nodes[i].schedulable and i not in excl], most)
            if placement is not None:
                return t, placement
        return None
