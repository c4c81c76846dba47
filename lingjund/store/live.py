"""The live state: every job not yet finished, and every node, in memory.

The scheduler, the timers and ``squeue`` read what is live many times a
second; reading it back from SQLite each time cost a query and a protobuf
parse per job per pass (a pass over 100,000 pending jobs spent seconds
there). ``Live`` holds those records in memory, indexed the ways they are
asked for: by state, by node, by user, and the few with a deadline, a
dependency or a begin time.

It is kept by the store, at the one place every write goes through, rather
than by each service operation after its commit (DESIGN.md's layer 5 sits
above the store): the store is the single writer of jobs and nodes, so a
mirror kept there cannot miss a change any operation makes, and a
transaction that rolls back undoes its changes here too (``undo``). Records
are the store's frozen records; ``spec`` is a protobuf and therefore
mutable: callers copy it before changing it (they already did, since the
record never was theirs to change).

What is "live": a job whose state is active (PENDING, RUNNING, COMPLETING)
or that still holds nodes while it completes, plus finished jobs for
``keep_finished_s`` after their end (Slurm's MinJobAge: squeue still shows
them); after that they live on in accounting only (``evict_finished``).

Example. Job 7 is submitted (PENDING, user 1000), starts on node[1-2],
ends COMPLETED while node2 still cleans up, then node2 reports done:

    put_job(7 PENDING)          by_state PENDING={7}; uid_active[1000]=1
    put_job(7 RUNNING n1,n2)    by_state RUNNING={7}; holding={7};
                                on_node n1={7}, n2={7}
    put_job(7 COMPLETED,        by_state COMPLETED={7}; still holding (its
            completing=(n2,))   nodes are not free); uid_active[1000]=0
    put_job(7 completing=())    holding={}; on_node empty; 7 stays for
                                squeue until keep_finished_s after its end

Every ``put_job`` also notes the job's id for ``take_changed``: the
scheduler's snapshot rebuilds only the requests of jobs put since its last
pass (``service/views.py``), not one per pending job each pass. The note is
bounded: past ``CHANGED_MAX`` ids it gives up and says "everything".
"""
from __future__ import annotations

import heapq
from typing import Iterable

from lingjun import slurm
from lingjund.store.records import JobRecord, NodeRecord


def job_weight(job: JobRecord) -> int:
    """How many jobs a record counts as toward a user's limits: an array's
    pending remainder counts each of its tasks (Slurm's MaxSubmitJobs)."""
    if job.state not in slurm.ACTIVE_STATES:
        return 0
    return slurm.count_indices(job.array_task_str) if job.array_task_str else 1


def is_live(job: JobRecord) -> bool:
    return job.state in slurm.ACTIVE_STATES or bool(job.completing)


def holds_nodes(job: JobRecord) -> bool:
    return job.state == slurm.RUNNING or bool(job.completing)


CHANGED_MAX = 200_000


class Live:
    def __init__(self, keep_finished_s: float):
        self.keep_finished_s = keep_finished_s
        self.jobs: dict[int, JobRecord] = {}
        self.nodes: dict[str, NodeRecord] = {}
        self.by_state: dict[str, set[int]] = {}
        self.holding: set[int] = set()
        self.on_node: dict[str, set[int]] = {}
        self.uid_active: dict[int, int] = {}
        # pending and running jobs (array tasks each) per (uid, account) and
        # per (uid, qos): the association and QOS submit limits
        self.assoc_active: dict[tuple[int, str], int] = {}
        self.qos_active: dict[tuple[int, str], int] = {}
        self.with_deadline: set[int] = set()       # PENDING/RUNNING with --deadline
        self.with_dependency: set[int] = set()     # PENDING still waiting on one
        self.with_begin: set[int] = set()          # PENDING with a begin time
        self._finished: list[tuple[float, int]] = []   # (end time, id): eviction order
        # finished jobs that ended before this may have left memory (then the
        # store answers from SQL)
        self.evicted_before = float("-inf")
        self._changed: set[int] | None = set()     # put since take_changed (None: too many)

    # -- writes (the store's only) -------------------------------------------
    def put_job(self, job: JobRecord | None, job_id: int) -> None:
        """Make job ``job_id`` read as ``job`` (None: not live any more)."""
        changed = self._changed
        if changed is not None:
            changed.add(job_id)
            if len(changed) > CHANGED_MAX:
                self._changed = None
        old = self.jobs.get(job_id)
        if old is not None:
            self._unindex(old)
        if job is None:
            self.jobs.pop(job_id, None)
            return
        self.jobs[job_id] = job
        self._index(job)

    def put_node(self, node: NodeRecord) -> None:
        self.nodes[node.name] = node

    def _index(self, job: JobRecord) -> None:
        jid = job.job_id
        self.by_state.setdefault(job.state, set()).add(jid)
        if holds_nodes(job):
            self.holding.add(jid)
            for n in job.nodes:
                self.on_node.setdefault(n, set()).add(jid)
        w = job_weight(job)
        if w:
            self.uid_active[job.uid] = self.uid_active.get(job.uid, 0) + w
            k = (job.uid, job.spec.account)
            self.assoc_active[k] = self.assoc_active.get(k, 0) + w
            k = (job.uid, job.spec.qos)
            self.qos_active[k] = self.qos_active.get(k, 0) + w
        if job.state == slurm.PENDING:
            if job.dependency:
                self.with_dependency.add(jid)
            if job.eligible_time:
                self.with_begin.add(jid)
        if job.deadline > 0 and job.state in (slurm.PENDING, slurm.RUNNING):
            self.with_deadline.add(jid)
        if not is_live(job):
            heapq.heappush(self._finished, (job.end_time, jid))

    def _unindex(self, job: JobRecord) -> None:
        jid = job.job_id
        ids = self.by_state.get(job.state)
        if ids is not None:
            ids.discard(jid)
        if jid in self.holding:
            self.holding.discard(jid)
            for n in job.nodes:
                on = self.on_node.get(n)
                if on is not None:
                    on.discard(jid)
                    if not on:
                        del self.on_node[n]
        w = job_weight(job)
        if w:
            self.uid_active[job.uid] -= w
            self.assoc_active[(job.uid, job.spec.account)] -= w
            self.qos_active[(job.uid, job.spec.qos)] -= w
        self.with_dependency.discard(jid)
        self.with_begin.discard(jid)
        self.with_deadline.discard(jid)

    def evict_finished(self, before: float) -> None:
        """Forget finished jobs that ended before ``before`` (they stay in SQL)."""
        fin = self._finished
        while fin and fin[0][0] < before:
            end, jid = heapq.heappop(fin)
            job = self.jobs.get(jid)
            if job is not None and not is_live(job) and job.end_time < before:
                self.put_job(None, jid)
        self.evicted_before = max(self.evicted_before, before)

    def take_changed(self) -> set[int] | None:
        """The ids of the jobs put since the last call (None: too many to have
        kept, treat every job as changed); starts a new list."""
        changed, self._changed = self._changed, set()
        return changed

    # -- reads ------------------------------------------------------------------
    def in_states(self, states: Iterable[str]) -> list[JobRecord]:
        ids: list[int] = []
        for s in set(states):
            ids.extend(self.by_state.get(s, ()))
        ids.sort()
        jobs = self.jobs
        return [jobs[i] for i in ids]

    def select(self, ids: Iterable[int]) -> list[JobRecord]:
        jobs = self.jobs
        return [jobs[i] for i in sorted(ids)]
