"""The only place that speaks SQL.

``Store`` wraps one SQLite file (through sqlite-utils, WAL mode) and hands
out frozen records. Writes happen inside ``with store.transaction():``; a
caller that acknowledges anything (a submission, an agent's result) does so
only after that block has committed, so ``kill -9`` of the controller at any
moment loses nothing it acknowledged.

A full disk: a write that finds no space (SQLite's SQLITE_FULL, "database
or disk is full", or ENOSPC) rolls its whole transaction back, if SQLite
has not already, and raises ``StoreFull``; nothing of it was written, the
connection stays usable, reads go on, and the next transaction succeeds
once space returns. (A COMMIT that fails must not leave the transaction
open: every later BEGIN would fail and the controller would never recover.)
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import sqlite3
import threading
import time
import logging
from typing import Callable, Iterable, Iterator

import sqlite_utils

from lingjun import slurm
from lingjund.store import assoc as assocmod
from lingjund.store.live import Live, is_live
from lingjund.store.records import (  # noqa: F401  (re-exported: the store's records)
    _JSON_COLUMNS, Attempt, JobEvent, JobRecord, NodeEvent, NodeRecord, ProbeResult,
    RunningStepRecord, StepRecord, WatchEvent, json_value,
    _job_from_row, _job_to_row, _node_from_row, _step_from_row)
from lingjund.store.schema import MIGRATIONS

log = logging.getLogger("lingjund.store")

# Told of a job's state change once it is committed: (before, after).
StateWatcher = Callable[[JobRecord, JobRecord], None]
NodeWatcher = Callable[["NodeRecord | None", NodeRecord], None]
# Told of the watch events a commit wrote, in seq order, once it is committed.
ChangeListener = Callable[[list[WatchEvent]], None]

_WATCH_COLUMNS = ("time", "job_id", "node", "kind", "state", "previous_state", "text", "exit_code")


def node_state(node: NodeRecord) -> str:
    """The node's state as WatchNodes tells it: DRAIN (whatever else), DOWN
    (not registered, or marked down), or UP."""
    if node.drain:
        return "DRAIN"
    return "DOWN" if node.down or not node.registered else "UP"


def _job_text(job: JobRecord) -> str:
    return job.reason if job.state == slurm.PENDING else job.kill_reason

class StoreFull(Exception):
    """The disk under the database is full; nothing of the transaction was written."""


def is_full(e: BaseException) -> bool:
    """Is ``e`` the database (or any write of ours) finding no space left?"""
    if isinstance(e, StoreFull):
        return True
    if isinstance(e, sqlite3.Error):
        return (getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
                or "database or disk is full" in str(e))
    return isinstance(e, OSError) and e.errno == errno.ENOSPC


_BOOL_FIELDS = frozenset({"exclusive", "launched", "held", "warn_signal_sent", "hold_admin",
                          "preempt_killed", "preempt_requeue", "registered", "drain", "down",
                          "drain_by_probe", "priority_set"})


def _record_fields(fields: dict) -> dict:
    """Values as a record read back from SQL holds them: tuples, bools, and
    protobufs of our own (the caller's object stays the caller's)."""
    out = {}
    for k, v in fields.items():
        if k in _JSON_COLUMNS:
            v = json_value(k, v)
        elif k in _BOOL_FIELDS:
            v = bool(v)
        elif hasattr(v, "SerializeToString"):
            copy = type(v)()
            copy.CopyFrom(v)
            v = copy
        out[k] = v
    return out


class Store:
    """The SQLite file, and the live state kept in step with it (``live``).

    Every write of a job or node goes through ``insert_job``/``update_job``/
    ``put_node``, which apply it to ``live`` as well; a transaction that rolls
    back undoes those (``_undo``). Reads of what is live (pending and running
    jobs, jobs holding nodes, nodes) answer from memory without SQL; reads of
    history go to SQL.
    """

    def __init__(self, path: str, synchronous: str = "FULL", keep_finished_s: float = 300.0,
                 now: float | None = None):
        self.path = path
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db = sqlite_utils.Database(conn)
        self.db.enable_wal()
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA busy_timeout=5000")
        self._lock = threading.RLock()
        self._depth = 0
        self._undo: list[tuple[str, object, object]] | None = None
        self._watchers: list[StateWatcher] = []
        self._node_watchers: list[NodeWatcher] = []
        self._listeners: list[ChangeListener] = []
        self._watch_new: list[WatchEvent] = []     # written by the open transaction
        self._migrate()
        self.live = Live(keep_finished_s)
        self._load_live(time.time() if now is None else now)
        self.assoc = assocmod.load(self.db)     # accounts, users, associations, QOS
        self.ensure_assoc_defaults()

    def _load_live(self, now: float) -> None:
        """Read what is live back from the file (at start)."""
        live = self.live
        live.evicted_before = now - live.keep_finished_s
        states = sorted(slurm.ACTIVE_STATES)
        for row in self.db.query(
                "SELECT * FROM jobs WHERE state IN ({}) OR completing != '[]' OR end_time >= ? "
                "ORDER BY job_id".format(", ".join("?" for _ in states)),
                [*states, live.evicted_before]):
            job = _job_from_row(row)
            live.put_job(job, job.job_id)
        for row in self.db.query("SELECT * FROM nodes ORDER BY rowid"):
            live.put_node(_node_from_row(row))

    # -- transactions ---------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator["Store"]:
        """Nestable; only the outermost block commits (or rolls back)."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self.db.execute("BEGIN IMMEDIATE")
                self._undo = []
            self._depth += 1
            try:
                yield self
            except BaseException as e:
                self._depth -= 1
                if outer:
                    self._rollback()
                    if is_full(e) and not isinstance(e, StoreFull):
                        raise StoreFull(f"{self.path}: {e}") from e
                raise
            self._depth -= 1
            if outer:
                try:
                    self._log_state_changes(self._undo)
                    self.db.execute("COMMIT")
                except sqlite3.Error as e:
                    self._rollback()
                    if is_full(e):
                        raise StoreFull(f"{self.path}: {e}") from e
                    raise
                undo, self._undo = self._undo, None
                new, self._watch_new = self._watch_new, []
                if self._watchers:
                    self._tell_watchers(undo)
                if self._node_watchers:
                    self._tell_node_watchers(undo)
                if new:
                    self._publish(new)

    # -- state changes, told once committed --------------------------------------
    def watch_states(self, watcher: StateWatcher) -> None:
        """Call ``watcher(before, after)`` for every job whose state a committed
        write changed (PENDING -> RUNNING, RUNNING -> COMPLETED, RUNNING ->
        PENDING...), after the commit and never for a rolled-back one. A
        transaction that changes a job twice tells its first and last state
        only, and nothing when they are the same. Watchers run on the
        writer's thread and must be quick (queue the work, do not do it)."""
        self._watchers.append(watcher)

    def watch_nodes(self, watcher: NodeWatcher) -> None:
        """Call ``watcher(before, after)`` for every node a committed write
        changed (``before`` None for a node new to the store), after the commit,
        as ``watch_states``; the watcher decides what counts as a change."""
        self._node_watchers.append(watcher)

    def _tell_watchers(self, undo: list[tuple[str, object, object]]) -> None:
        first: dict[int, JobRecord | None] = {}
        for kind, key, old in undo:
            if kind == "job" and key not in first:
                first[key] = old            # None: the transaction inserted the row
        jobs = self.live.jobs
        for job_id, before in first.items():
            after = jobs.get(job_id)
            if after is None:
                continue
            if before is None:
                # A row born in a state other than PENDING is an array task split off
                # its meta record as it starts: it was pending there until now.
                if after.state == slurm.PENDING:
                    continue
                before = dataclasses.replace(after, state=slurm.PENDING)
            if after.state != before.state:
                self._tell(before, after)

    def _tell_node_watchers(self, undo: list[tuple[str, object, object]]) -> None:
        first: dict[str, NodeRecord | None] = {}
        for kind, key, old in undo:
            if kind == "node" and key not in first:
                first[key] = old
        for name, before in first.items():
            after = self.live.nodes.get(name)
            if after is not None:
                self._tell_node(before, after)

    def _tell_node(self, before: NodeRecord | None, after: NodeRecord) -> None:
        for watcher in self._node_watchers:
            try:
                watcher(before, after)
            except Exception:        # a watcher's fault must not undo a commit
                log.exception("node %s: a node watcher failed", after.name)

    def _tell(self, before: JobRecord, after: JobRecord) -> None:
        for watcher in self._watchers:
            try:
                watcher(before, after)
            except Exception:        # a watcher's fault must not undo a commit
                log.exception("job %d: a state watcher failed", after.job_id)

    # -- the watch log: durable, numbered, told to listeners once committed --------
    def listen_changes(self, listener: ChangeListener) -> None:
        """Call ``listener(events)`` with the watch events each commit wrote
        (in seq order), after the commit, on the writer's thread: it must be
        quick (queue, do not work)."""
        self._listeners.append(listener)

    def _log_watch(self, **fields) -> None:
        row = {c: fields.get(c, "" if c in ("node", "kind", "state", "previous_state", "text") else 0)
               for c in _WATCH_COLUMNS}
        cur = self.db.execute("INSERT INTO watch_events ({}) VALUES ({})".format(
            ", ".join(_WATCH_COLUMNS), ", ".join("?" for _ in _WATCH_COLUMNS)), list(row.values()))
        ev = WatchEvent(seq=int(cur.lastrowid), **row)
        if self._undo is not None:
            self._watch_new.append(ev)
        else:                               # a write outside a transaction: committed now
            self._publish([ev])

    def _log_job_state(self, before: JobRecord | None, after: JobRecord, now: float) -> None:
        if before is not None:
            previous = before.state
        else:   # a new row: a submission, or an array task split off its record as it starts
            previous = "" if after.state == slurm.PENDING else slurm.PENDING
        self._log_watch(time=now, job_id=after.job_id, kind="state", state=after.state,
                        previous_state=previous,
                        text=_job_text(after), exit_code=after.exit_code)

    def _log_node_state(self, before: NodeRecord | None, after: NodeRecord, now: float) -> None:
        self._log_watch(time=now, node=after.name, kind="state", state=node_state(after),
                        previous_state=node_state(before) if before is not None else "",
                        text=after.reason)

    def _log_state_changes(self, undo: list[tuple[str, object, object]] | None) -> None:
        """Before the commit: a watch row for each job and node whose state
        the transaction changed (first state against last; none when equal)."""
        if not undo:
            return
        first_job: dict[int, JobRecord | None] = {}
        first_node: dict[str, NodeRecord | None] = {}
        for kind, key, old in undo:
            if kind == "job":
                first_job.setdefault(key, old)
            else:
                first_node.setdefault(key, old)
        now = time.time()
        jobs, nodes = self.live.jobs, self.live.nodes
        for job_id, before in first_job.items():
            after = jobs.get(job_id)
            if after is not None and (before is None or after.state != before.state):
                self._log_job_state(before, after, now)
        for name, before in first_node.items():
            after = nodes.get(name)
            if after is not None and (before is None or node_state(after) != node_state(before)):
                self._log_node_state(before, after, now)

    def _publish(self, events: list[WatchEvent]) -> None:
        for listener in self._listeners:
            try:
                listener(events)
            except Exception:        # a listener's fault must not undo a commit
                log.exception("a watch listener failed")

    def watch_events(self, after: int, *, jobs: bool, job_ids: Iterable[int] = (),
                     nodes: Iterable[str] = (), limit: int = 1000) -> list[WatchEvent]:
        """The watch log after cursor ``after``, oldest first, at most ``limit``:
        job rows (``jobs``) or node rows, only ``job_ids``/``nodes`` when given."""
        sql = "SELECT * FROM watch_events WHERE seq > ? AND " + ("job_id != 0" if jobs else "node != ''")
        args: list = [after]
        ids = list(job_ids) if jobs else list(nodes)
        if ids:
            sql += " AND {} IN ({})".format("job_id" if jobs else "node", ", ".join("?" for _ in ids))
            args += ids
        sql += f" ORDER BY seq LIMIT {int(limit)}"
        with self._lock:
            return [WatchEvent(**r) for r in self.db.query(sql, args)]

    def last_watch_seq(self) -> int:
        with self._lock:
            row = self.db.execute("SELECT MAX(seq) FROM watch_events").fetchone()
        return int(row[0] or 0)

    def _rollback(self) -> None:
        """End the open transaction, if SQLite has not ended it itself (it may,
        on SQLITE_FULL and I/O errors), and undo its changes to the live state."""
        self._watch_new = []
        if self.db.conn.in_transaction:
            self.db.execute("ROLLBACK")
        undo, self._undo = self._undo or [], None
        for kind, key, old in reversed(undo):
            if kind == "job":
                self.live.put_job(old, key)
            elif kind == "assoc":
                if old is None:
                    self.assoc.remove(key[0], key[1:])
                else:
                    self.assoc.put(old)
            elif old is None:
                self.live.nodes.pop(key, None)
            else:
                self.live.put_node(old)

    # -- the live state, kept in step with every write --------------------------
    def _set_live_job(self, job_id: int, job: JobRecord | None) -> None:
        live = self.live
        before = live.jobs.get(job_id)
        if self._undo is not None:
            self._undo.append(("job", job_id, before))
        if job is not None and not is_live(job) and job.end_time < live.evicted_before:
            job = None          # finished long ago: history only
        live.put_job(job, job_id)
        if (self._undo is None and job is not None
                and (before is None or before.state != job.state)):  # outside a transaction: committed now
            self._log_job_state(before, job, time.time())
            if self._watchers and before is not None:
                self._tell(before, job)

    def _job_sql(self, job_id: int) -> JobRecord | None:
        row = next(self.db.query("SELECT * FROM jobs WHERE job_id = ?", [job_id]), None)
        return _job_from_row(row) if row else None

    def _node_sql(self, name: str) -> NodeRecord | None:
        row = next(self.db.query("SELECT * FROM nodes WHERE name = ?", [name]), None)
        return _node_from_row(row) if row else None

    def evict_finished(self, before: float) -> None:
        """Finished jobs that ended before ``before`` leave memory (squeue no
        longer shows them; sacct reads them from SQL)."""
        self.live.evict_finished(before)

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for i, script in enumerate(MIGRATIONS[version:], start=version + 1):
            with self.transaction():
                for stmt in script.split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
                self.db.execute(f"PRAGMA user_version={i}")

    def close(self) -> None:
        self.db.conn.close()

    # -- jobs -------------------------------------------------------------------
    def insert_job(self, **fields) -> int:
        """Insert a job; the id is SQLite's (never reused) unless given."""
        cur = self.db.execute(
            "INSERT INTO jobs ({}) VALUES ({})".format(
                ", ".join(fields), ", ".join("?" for _ in fields)),
            list(_job_to_row(fields).values()))
        job_id = int(cur.lastrowid)
        self._set_live_job(job_id, self._job_sql(job_id))
        return job_id

    def next_job_id(self) -> int:
        """The id the next insert_job would get (sbatch --test-only names it)."""
        row = next(self.db.query("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'"), None)
        return int(row["seq"]) + 1 if row else 1

    def update_job(self, job_id: int, **fields) -> None:
        if not fields:
            return
        row = _job_to_row(fields)
        self.db.execute(
            "UPDATE jobs SET {} WHERE job_id = ?".format(", ".join(f"{k} = ?" for k in row)),
            [*row.values(), job_id])
        old = self.live.jobs.get(job_id)
        if old is None:
            job = self._job_sql(job_id)     # history coming back (a requeue), or no such job
        else:
            job = dataclasses.replace(old, **_record_fields(fields))
        self._set_live_job(job_id, job)

    def set_reasons(self, reasons: dict[int, str]) -> None:
        """Many jobs' pending reasons at once (a pass decides one for each)."""
        if not reasons:
            return
        self.db.conn.executemany("UPDATE jobs SET reason = ? WHERE job_id = ?",
                                 [(r, i) for i, r in reasons.items()])
        jobs = self.live.jobs
        for job_id, reason in reasons.items():
            old = jobs.get(job_id)
            self._set_live_job(job_id, dataclasses.replace(old, reason=reason) if old is not None
                               else self._job_sql(job_id))

    def set_expected(self, expected: dict[int, tuple[float, tuple[str, ...]]]) -> None:
        """Many pending jobs' reservations at once: (expected start, nodes), (0, ())
        for none (a pass decides them)."""
        if not expected:
            return
        self.db.conn.executemany("UPDATE jobs SET sched_start = ?, sched_nodes = ? WHERE job_id = ?",
                                 [(t, json.dumps(list(n)), i) for i, (t, n) in expected.items()])
        jobs = self.live.jobs
        for job_id, (t, nodes) in expected.items():
            old = jobs.get(job_id)
            self._set_live_job(job_id, dataclasses.replace(old, sched_start=t, sched_nodes=nodes)
                               if old is not None else self._job_sql(job_id))

    def set_priorities(self, priorities: dict[int, int]) -> None:
        """Many pending jobs' priorities at once (a pass computes them: priority/multifactor)."""
        if not priorities:
            return
        self.db.conn.executemany("UPDATE jobs SET priority = ? WHERE job_id = ?",
                                 [(p, i) for i, p in priorities.items()])
        jobs = self.live.jobs
        for job_id, prio in priorities.items():
            old = jobs.get(job_id)
            self._set_live_job(job_id, dataclasses.replace(old, priority=prio) if old is not None
                               else self._job_sql(job_id))

    def job(self, job_id: int) -> JobRecord | None:
        job = self.live.jobs.get(job_id)
        return job if job is not None else self._job_sql(job_id)

    def job_by_token(self, token: str) -> JobRecord | None:
        row = next(self.db.query("SELECT * FROM jobs WHERE client_token = ?", [token]), None)
        return _job_from_row(row) if row else None

    def jobs(self, *, states: Iterable[str] | None = None, job_ids: Iterable[int] | None = None,
             ended_after: float | None = None, with_array_tasks: bool = False,
             tasks_ended_after: float | None = None) -> list[JobRecord]:
        """Jobs matching every filter given, in job id order.

        ``ended_after`` keeps unfinished jobs and those that ended after it.
        ``with_array_tasks``: an id that names an array (its meta record's id)
        also selects every task split off it, as Slurm's "squeue -j A" does;
        ``tasks_ended_after`` then keeps only the tasks unfinished or ended
        after it (a drained 10,000-task array is not read back whole).
        """
        if job_ids is None:
            live = self.live
            if states is not None and ended_after is None:
                states = set(states)
                if states <= slurm.ACTIVE_STATES:
                    return live.in_states(states)
            elif states is None and ended_after is not None and ended_after >= live.evicted_before:
                live.evict_finished(ended_after)
                return live.select(i for i, j in live.jobs.items()
                                   if j.end_time == 0 or j.end_time >= ended_after or j.completing)
        where, args = [], []
        if states is not None:
            states = list(states)
            where.append("state IN ({})".format(", ".join("?" for _ in states) or "NULL"))
            args += states
        if job_ids is not None:
            ids = list(job_ids)
            marks = ", ".join("?" for _ in ids) or "NULL"
            if with_array_tasks and tasks_ended_after is not None:
                where.append(f"(job_id IN ({marks}) OR (array_job_id IN ({marks}) AND "
                             "(end_time = 0 OR end_time >= ? OR completing != '[]')))")
                args += ids + ids + [tasks_ended_after]
            elif with_array_tasks:
                where.append(f"(job_id IN ({marks}) OR array_job_id IN ({marks}))")
                args += ids + ids
            else:
                where.append(f"job_id IN ({marks})")
                args += ids
        if ended_after is not None:
            where.append("(end_time = 0 OR end_time >= ? OR completing != '[]')")
            args.append(ended_after)
        sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
        return [_job_from_row(r) for r in self.db.query(sql + " ORDER BY job_id", args)]

    def active_job_count(self, uid: int) -> int:
        """A user's pending and running jobs, each array task one job
        (the pending remainder of an array counts its tasks), as Slurm's
        MaxSubmitJobs counts them."""
        return self.live.uid_active.get(uid, 0)

    def array_jobs(self, array_job_id: int) -> list[JobRecord]:
        """Every row of one array: the meta record and the tasks split off it."""
        return [_job_from_row(r) for r in self.db.query(
            "SELECT * FROM jobs WHERE array_job_id = ? ORDER BY job_id", [array_job_id])]

    def split_array_task(self, meta: JobRecord, task_id: int, **fields) -> int:
        """A new row for task ``task_id`` of ``meta``'s array: a copy of the meta
        record with a job id of its own and ``fields`` applied; returns the id."""
        row = {f.name: getattr(meta, f.name) for f in dataclasses.fields(JobRecord)
               if f.name not in ("job_id", "client_token")}
        row.update(array_task_id=task_id, array_task_str="", **fields)
        return self.insert_job(**row)

    def jobs_and_arrays(self, ids: Iterable[int]) -> list[JobRecord]:
        """The jobs with these ids, and every record of the arrays they head."""
        ids = list(ids)
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        return [_job_from_row(r) for r in self.db.query(
            f"SELECT * FROM jobs WHERE job_id IN ({marks}) OR array_job_id IN ({marks}) "
            "ORDER BY job_id", ids + ids)]

    def dependent_jobs(self) -> list[JobRecord]:
        """Pending jobs that still wait on a dependency."""
        return self.live.select(self.live.with_dependency)

    def deadline_jobs(self) -> list[JobRecord]:
        """Pending and running jobs that have a --deadline."""
        return self.live.select(self.live.with_deadline)

    def next_eligible_time(self, after: float) -> float | None:
        """The earliest begin time of a pending job still to come."""
        jobs = self.live.jobs
        return min((t for i in self.live.with_begin if (t := jobs[i].eligible_time) > after),
                   default=None)

    def holding_jobs(self) -> list[JobRecord]:
        """Jobs that hold resources: running, or finished but still completing."""
        return self.live.select(self.live.holding)

    def jobs_on_node(self, name: str) -> list[JobRecord]:
        """The jobs holding resources on node ``name``."""
        return self.live.select(self.live.on_node.get(name, ()))

    # -- steps ------------------------------------------------------------------
    def put_step(self, step: StepRecord) -> None:
        row = dataclasses.asdict(step)
        row["nodes"] = json.dumps(list(step.nodes))
        self.db["steps"].upsert(row, pk=("job_id", "step_id"))

    def put_running_step(self, r: RunningStepRecord) -> None:
        self.db["running_steps"].upsert(dict(
            job_id=r.job_id, step_id=r.step_id, name=r.name, nodes=json.dumps(list(r.nodes)),
            rank_node=json.dumps({str(k): v for k, v in r.rank_node.items()}),
            cpus=json.dumps(r.cpus), num_tasks=r.num_tasks, num_cpus=r.num_cpus,
            start_time=r.start_time, kill_on_bad_exit=int(r.kill_on_bad_exit),
            gpus=json.dumps({n: list(ids) for n, ids in r.gpus.items()})),
            pk=("job_id", "step_id"))

    def delete_running_step(self, job_id: int, step_id: int) -> None:
        self.db.execute("DELETE FROM running_steps WHERE job_id = ? AND step_id = ?",
                        [job_id, step_id])

    def running_steps(self) -> list[RunningStepRecord]:
        return [RunningStepRecord(
            job_id=r["job_id"], step_id=r["step_id"], name=r["name"],
            nodes=tuple(json.loads(r["nodes"])),
            rank_node={int(k): v for k, v in json.loads(r["rank_node"]).items()},
            cpus=json.loads(r["cpus"]), num_tasks=r["num_tasks"], num_cpus=r["num_cpus"],
            start_time=r["start_time"], kill_on_bad_exit=bool(r["kill_on_bad_exit"]),
            gpus={n: tuple(ids) for n, ids in json.loads(r["gpus"]).items()})
            for r in self.db.query("SELECT * FROM running_steps ORDER BY job_id, step_id")]

    def steps(self, job_ids: Iterable[int]) -> dict[int, list[StepRecord]]:
        ids = list(job_ids)
        out: dict[int, list[StepRecord]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for r in self.db.query(
                    "SELECT * FROM steps WHERE job_id IN ({}) ORDER BY job_id, rowid".format(
                        ", ".join("?" for _ in chunk)), chunk):
                s = _step_from_row(r)
                out.setdefault(s.job_id, []).append(s)
        return out

    # -- nodes ------------------------------------------------------------------
    def put_node(self, name: str, **fields) -> None:
        row = {"name": name}
        for k, v in fields.items():
            if k in ("inventory", "net_status"):
                v = v.SerializeToString()
            elif isinstance(v, bool):
                v = int(v)
            row[k] = v
        # One statement: sqlite_utils' upsert ran about twenty (it reads the
        # table's columns each time), most of a registration's cost.
        cols = list(row)
        update = ", ".join(f"{c} = excluded.{c}" for c in cols[1:])
        self.db.execute(
            f"INSERT INTO nodes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            + (f" ON CONFLICT(name) DO UPDATE SET {update}" if update else " ON CONFLICT(name) DO NOTHING"),
            list(row.values()))
        live = self.live
        old = live.nodes.get(name)
        if self._undo is not None:
            self._undo.append(("node", name, old))
        if old is None:
            live.put_node(self._node_sql(name))
        else:
            live.put_node(dataclasses.replace(old, **_record_fields(fields)))
        if self._undo is None and self._node_watchers:     # outside a transaction: committed now
            self._tell_node(old, live.nodes[name])
        if self._undo is None:              # outside a transaction: committed now (the watch log)
            new = live.nodes[name]
            if old is None or node_state(old) != node_state(new):
                self._log_node_state(old, new, time.time())

    def nodes(self) -> dict[str, NodeRecord]:
        return dict(self.live.nodes)

    def node(self, name: str) -> NodeRecord | None:
        return self.live.nodes.get(name)

    # -- job events and earlier attempts -------------------------------
    # -- scrontab ------------------------------------------------------------------
    def crontab(self, user: str) -> tuple[str, tuple[int, ...]] | None:
        """A user's crontab as written and the ids of its entries' jobs; None: none."""
        row = next(self.db.query("SELECT text, job_ids FROM crontabs WHERE user = ?", [user]), None)
        return (row["text"], tuple(json.loads(row["job_ids"]))) if row else None

    def put_crontab(self, user: str, text: str | None, job_ids: Iterable[int] = ()) -> None:
        """Set (``text`` None: remove) a user's crontab, in the caller's transaction."""
        if text is None:
            self.db.execute("DELETE FROM crontabs WHERE user = ?", [user])
            return
        self.db.execute("INSERT INTO crontabs (user, text, job_ids) VALUES (?, ?, ?) "
                        "ON CONFLICT(user) DO UPDATE SET text = excluded.text, "
                        "job_ids = excluded.job_ids", [user, text, json.dumps(list(job_ids))])

    def add_job_event(self, job_id: int, time: float, kind: str, text: str) -> None:
        self.db.execute("INSERT INTO job_events (job_id, time, kind, text) VALUES (?, ?, ?, ?)",
                        [job_id, time, kind, text])
        job = self.live.jobs.get(job_id)
        self._log_watch(time=time, job_id=job_id, kind=kind, text=text,
                        state=job.state if job is not None else "")

    def job_events(self, job_id: int) -> list[JobEvent]:
        return [JobEvent(**r) for r in self.db.query(
            "SELECT * FROM job_events WHERE job_id = ? ORDER BY time, rowid", [job_id])]

    def put_attempt(self, a: Attempt) -> None:
        """Record one ended run; recording the same attempt again keeps the first."""
        row = dataclasses.asdict(a)
        row["nodes"] = json.dumps(list(a.nodes))
        self.db.execute("INSERT OR IGNORE INTO job_attempts ({}) VALUES ({})".format(
            ", ".join(row), ", ".join("?" for _ in row)), list(row.values()))

    def attempts(self, job_ids: Iterable[int]) -> dict[int, list[Attempt]]:
        ids = list(job_ids)
        out: dict[int, list[Attempt]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for r in self.db.query(
                    "SELECT * FROM job_attempts WHERE job_id IN ({}) ORDER BY job_id, attempt".format(
                        ", ".join("?" for _ in chunk)), chunk):
                r = dict(r)
                r["nodes"] = tuple(json.loads(r["nodes"]))
                out.setdefault(r["job_id"], []).append(Attempt(**r))
        return out

    # -- probe results and node events ---------------------------------
    def put_probe_results(self, node: str, results: Iterable[ProbeResult]) -> None:
        rows = [dict(node=node, name=r.name, severity=r.severity, ok=int(r.ok), reason=r.reason,
                     duration_s=r.duration_s, time=r.time, phase=r.phase) for r in results]
        if rows:
            self.db["probe_results"].upsert_all(rows, pk=("node", "name"))

    def forget_probe_results(self, node: str, prefix: str, keep: Iterable[str]) -> None:
        """Drop the node's results named ``prefix...`` not in ``keep`` (a drop-in removed)."""
        keep = list(keep)
        marks = ", ".join("?" for _ in keep) or "NULL"
        self.db.execute(f"DELETE FROM probe_results WHERE node = ? AND name LIKE ? "
                        f"AND name NOT IN ({marks})", [node, prefix + "%", *keep])

    def probe_results(self, nodes: Iterable[str] | None = None) -> dict[str, list[ProbeResult]]:
        """Each node's last probe results, by node (``nodes``: only those)."""
        wanted = None if nodes is None else set(nodes)
        out: dict[str, list[ProbeResult]] = {}
        for r in self.db.query("SELECT * FROM probe_results ORDER BY node, name"):
            if wanted is not None and r["node"] not in wanted:
                continue
            out.setdefault(r["node"], []).append(ProbeResult(
                node=r["node"], name=r["name"], severity=r["severity"], ok=bool(r["ok"]),
                reason=r["reason"], duration_s=r["duration_s"], time=r["time"], phase=r["phase"]))
        return out

    def add_node_event(self, node: str, time: float, event: str, reason: str = "",
                       job_id: int = 0, by: str = "") -> None:
        self.db.execute("INSERT INTO node_events (time, node, event, reason, job_id, by) "
                        "VALUES (?, ?, ?, ?, ?, ?)", [time, node, event, reason, job_id, by])

    def node_events(self, node: str, since: float = 0.0, event: str | None = None,
                    limit: int = 0, by_probe: bool = False) -> list[NodeEvent]:
        """The node's events from ``since`` on, newest first (``by_probe``: only
        the probes' own, not what people did)."""
        sql = "SELECT * FROM node_events WHERE node = ? AND time >= ?"
        args: list = [node, since]
        if event is not None:
            sql += " AND event = ?"
            args.append(event)
        if by_probe:
            sql += " AND by = ''"
        sql += " ORDER BY id DESC" + (f" LIMIT {int(limit)}" if limit else "")
        return [NodeEvent(time=r["time"], node=r["node"], event=r["event"], reason=r["reason"],
                          job_id=r["job_id"], by=r["by"])
                for r in self.db.query(sql, args)]

    def last_person_event_time(self, node: str) -> float:
        row = self.db.execute("SELECT MAX(time) FROM node_events WHERE node = ? AND by != ''",
                              [node]).fetchone()
        return row[0] or 0.0

    # -- accounts, users, associations, QOS (store/assoc.py) ------------------------
    def put_assoc_record(self, rec: assocmod.Record) -> assocmod.Record:
        """Write an account, user, association or QOS (new or changed), here
        and in ``assoc``; the record as stored."""
        rec = assocmod.write(self.db, rec)
        old = self.assoc.put(rec)
        if self._undo is not None:
            if old is None:
                self._undo.append(("assoc", assocmod.record_key(rec), None))
            else:
                self._undo.append(("assoc", assocmod.record_key(old), old))
        return rec

    def delete_assoc_record(self, rec: assocmod.Record) -> None:
        table, *key = assocmod.record_key(rec)
        assocmod.delete(self.db, table, tuple(key))
        old = self.assoc.remove(table, tuple(key))
        if self._undo is not None and old is not None:
            self._undo.append(("assoc", (table, *key), old))

    def ensure_assoc_defaults(self, cluster: str = "") -> None:
        """Account root, user root, their associations and QOS normal on a
        store that has no account yet (a fresh one)."""
        if self.assoc.accounts:
            return
        with self.transaction():
            for rec in assocmod.defaults(cluster):
                self.put_assoc_record(rec)

    def save_usage(self, usage: dict[tuple[str, str, str], tuple[float, float]]) -> None:
        """Associations' decayed usage: key -> (raw usage, as of when)."""
        assocmod.save_usage(self.db, usage)
        assocs = self.assoc.assocs
        for k, (u, t) in usage.items():
            a = assocs.get(k)
            if a is not None:
                assocs[k] = dataclasses.replace(a, raw_usage=u, usage_time=t)

    def dump(self) -> dict[str, list[dict]]:
        """Every row of every table, the schema version too (for tests that
        check a refused or hostile request changed nothing). Tables are read
        from sqlite_master, so a table another change adds is compared too."""
        with self._lock:
            tables = [r["name"] for r in self.db.query(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name")]
            out = {t: [dict(r) for r in self.db.query(f'SELECT * FROM "{t}" ORDER BY rowid')]
                   for t in tables}
            out["user_version"] = [{"v": self.db.execute("PRAGMA user_version").fetchone()[0]}]
            return out
