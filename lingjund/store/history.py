"""The job history (sacct's), read in SQL on its own connections.

Every job row is kept after the job ends: it is the accounting record. Reading
a million of them must not stop the controller, so history is read here, on a
read-only connection of its own (WAL lets it read while the controller's
connection writes), in a history reader process (service/history_reader.py):
the controller's interpreter never runs these queries. The filters of sacct
run in SQL on indexed columns (schema migration 11); what comes back is the
store's records, never API messages.

The time window, as Slurm's sacct (``man sacct``, -S/-E/-s) and slurmdbd
select it, for a window [start, end]:

- without states: jobs eligible or running in it: eligible (or started)
  before ``end`` and not ended before ``start``;
- with states, each state its own test: PENDING, pending at some time in it
  (from eligible to start, or to the end of a job that never started);
  RUNNING, running at some time in it; COMPLETING, completing now; any end
  state (COMPLETED, FAILED...), in that state and ended in it.

Without a window (``sacct -j`` without -S/-E) states are matched as they are
now.

The purge rule (slurmdbd's PurgeJobAfter) deletes finished jobs that ended
before a cutoff, with their steps, earlier runs and events, a bounded batch
per transaction on a connection of its own.
"""
from __future__ import annotations

import dataclasses
import json
import sqlite3
from dataclasses import dataclass
from typing import Iterator

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.store.store import _JSON_COLUMNS, Attempt, JobRecord, StepRecord

_BOOL_COLUMNS = tuple(f for f, t in JobRecord.__annotations__.items() if t == "bool")

PAGE_ROWS = 2000          # job rows fetched per page
_CHUNK = 500              # ids per IN (...) list


@dataclass(frozen=True)
class HistoryQuery:
    """What sacct asks for; an empty filter lets everything through."""
    job_ids: tuple[int, ...] = ()     # these jobs, and every task of the arrays they name
    users: tuple[str, ...] = ()       # user names, or uids written in digits
    partitions: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    states: tuple[str, ...] = ()      # Slurm state names
    window: tuple[float, float] | None = None   # (start, end), Unix seconds; None = any time

    def where(self) -> tuple[str, list]:
        """The WHERE clause (without the word) and its arguments."""
        where: list[str] = []
        args: list = []

        def marks(values) -> str:
            return ", ".join("?" for _ in values)

        if self.job_ids:
            ids = list(self.job_ids)
            where.append(f"(job_id IN ({marks(ids)}) OR array_job_id IN ({marks(ids)}))")
            args += ids + ids
        if self.users:
            names = list(self.users)
            uids = [int(u) for u in names if u.isdigit()]
            test = f"user IN ({marks(names)})"
            if uids:
                test = f"({test} OR uid IN ({marks(uids)}))"
            where.append(test)
            args += names + uids
        if self.partitions:
            where.append(f"partition IN ({marks(self.partitions)})")
            args += list(self.partitions)
        if self.names:
            where.append(f"name IN ({marks(self.names)})")
            args += list(self.names)
        if self.window is None:
            if self.states:
                tests = []
                plain = [s for s in self.states if s != slurm.COMPLETING]
                if plain:
                    tests.append(f"state IN ({marks(plain)})")
                    args += plain
                if slurm.COMPLETING in self.states:
                    tests.append("completing != '[]'")
                where.append("(" + " OR ".join(tests) + ")")
        else:
            start, end = self.window
            if not self.states:
                # eligible or running in the window; a job waiting to run again
                # (restarted, requeued) was eligible since it was submitted
                where.append("(end_time = 0 OR end_time >= ?)")
                where.append("((eligible_time > 0 AND eligible_time <= ?) OR "
                             "(start_time > 0 AND start_time <= ?) OR "
                             "(restarts > 0 AND submit_time <= ?))")
                args += [start, end, end, end]
            else:
                tests = []
                for s in self.states:
                    if s == slurm.PENDING:
                        tests.append("(eligible_time > 0 AND eligible_time <= ? AND "
                                     "(CASE WHEN start_time > 0 THEN start_time "
                                     "WHEN end_time > 0 THEN end_time ELSE 9e18 END) >= ?)")
                        args += [end, start]
                    elif s == slurm.RUNNING:
                        tests.append("(start_time > 0 AND start_time <= ? AND "
                                     "(end_time = 0 OR end_time >= ?))")
                        args += [end, start]
                    elif s == slurm.COMPLETING:
                        tests.append("completing != '[]'")
                    else:
                        tests.append("(state = ? AND end_time > 0 AND end_time >= ? AND end_time <= ?)")
                        args += [s, start, end]
                where.append("(" + " OR ".join(tests) + ")")
        return " AND ".join(where) or "1", args

    def candidates(self) -> tuple[str, list] | None:
        """A query of job ids, on one index, that holds every job the filter
        selects (and maybe more: the WHERE clause decides). Rows are then read
        by id in id order, as sacct prints them, with no sort; without it
        SQLite prefers a scan of every row in id order to an index and a sort.
        None: no index helps (job ids are looked up directly)."""
        if self.job_ids:
            return None
        # every job in the window, whatever the states asked: not ended before it
        ended = ["end_time = 0", "end_time >= ?"] if self.window else [""]
        end_args = [[], [self.window[0]]] if self.window else [[]]

        def union(column: str, values) -> tuple[str, list]:
            parts, args = [], []
            for cond, extra in zip(ended, end_args):
                test = f"{column} IN ({', '.join('?' for _ in values)})" if column else ""
                test = " AND ".join(t for t in (test, cond) if t)
                parts.append(f"SELECT job_id FROM jobs WHERE {test}")
                args += list(values) + extra
            return " UNION ALL ".join(parts), args

        if self.users and not any(u.isdigit() for u in self.users):
            return union("user", self.users)
        if self.names:
            return union("name", self.names)
        if self.states and self.window and not {slurm.PENDING, slurm.RUNNING,
                                                slurm.COMPLETING} & set(self.states):
            states = list(self.states)
            return (f"SELECT job_id FROM jobs WHERE state IN ({', '.join('?' for _ in states)}) "
                    "AND end_time BETWEEN ? AND ?", states + list(self.window))
        if self.window:
            return union("", ())
        if self.states:
            return union("state", self.states)
        return None

    def sql(self) -> tuple[str, list]:
        where, args = self.where()
        cand = self.candidates()
        if cand is None:
            return f"SELECT * FROM jobs WHERE {where} ORDER BY job_id", args
        return (f"SELECT * FROM jobs WHERE job_id IN ({cand[0]}) AND {where} ORDER BY job_id",
                cand[1] + args)


def connect_readonly(path: str) -> sqlite3.Connection:
    """A connection that can only read (``mode=ro``), for one thread at a time."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                           check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class HistoryReader:
    """One sacct's read of the history: a read-only connection holding one
    snapshot (a read transaction) from ``open`` to ``close``, so the pages
    of one answer agree with each other.

    Not thread-safe: one thread at a time."""

    def __init__(self, path: str):
        self.conn = connect_readonly(path)
        self.conn.execute("BEGIN")
        self._lists: dict[str, tuple] = {}

    def close(self) -> None:
        try:
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")
        finally:
            self.conn.close()

    def plan(self, q: HistoryQuery) -> list[str]:
        """EXPLAIN QUERY PLAN of ``q``'s query, one line per step."""
        sql, args = q.sql()
        return [r["detail"] for r in self.conn.execute("EXPLAIN QUERY PLAN " + sql, args)]

    def pages(self, q: HistoryQuery, rows: int = PAGE_ROWS) -> Iterator[list[JobRecord]]:
        """The jobs ``q`` selects, in job id order, ``rows`` at a time."""
        sql, args = q.sql()
        cur = self.conn.execute(sql, args)
        while True:
            batch = cur.fetchmany(rows)
            if not batch:
                return
            yield [self._job(r) for r in batch]

    def _job(self, row: sqlite3.Row) -> JobRecord:
        """store._job_from_row, with each JSON list column's text decoded once
        per reader: a million rows hold a few thousand distinct node lists."""
        values = dict(row)
        spec = api_pb2.JobSpec()
        spec.ParseFromString(values["spec"])
        values["spec"] = spec
        for c in _JSON_COLUMNS:
            values[c] = self._list(values[c])
        for c in _BOOL_COLUMNS:
            values[c] = bool(values[c])
        return _frozen(JobRecord, values)

    def _list(self, text: str) -> tuple:
        got = self._lists.get(text)
        if got is None:
            got = tuple(json.loads(text))
            if len(self._lists) < 100_000:
                self._lists[text] = got
        return got

    def inventories(self) -> dict[str, agent_pb2.Inventory]:
        """What each registered node reported (its CPUs, its GPU type...)."""
        out = {}
        for r in self.conn.execute("SELECT name, inventory FROM nodes"):
            inv = agent_pb2.Inventory()
            if r["inventory"]:
                inv.ParseFromString(r["inventory"])
            out[r["name"]] = inv
        return out

    def node_cpus(self) -> dict[str, int]:
        """The CPUs each registered node reported."""
        return {name: inv.cpus for name, inv in self.inventories().items()}

    def steps(self, job_ids: list[int]) -> dict[int, list[StepRecord]]:
        out: dict[int, list[StepRecord]] = {}
        for chunk in _chunks(job_ids):
            for r in self.conn.execute(
                    f"SELECT * FROM steps WHERE job_id IN ({_marks(chunk)}) ORDER BY job_id, rowid",
                    chunk):
                values = dict(r)
                values["nodes"] = self._list(values["nodes"])
                out.setdefault(r["job_id"], []).append(_frozen(StepRecord, values))
        return out

    def derived_exits(self, job_ids: list[int]) -> dict[int, tuple[int, int]]:
        """Each job's DerivedExitCode without reading its steps: the highest
        exit code of its steps other than the batch step, and that step's
        signal (the first such step, by record order); else 0:125 where a
        step ended OUT_OF_MEMORY (Slurm's SIG_OOM); absent = 0:0."""
        out: dict[int, tuple[int, int]] = {}
        for chunk in _chunks(job_ids):
            for r in self.conn.execute(
                    f"SELECT job_id, exit_code, exit_signal FROM steps WHERE job_id IN ({_marks(chunk)}) "
                    "AND step_id != 'batch' AND (exit_code > 0 OR exit_signal = ?) "
                    "ORDER BY job_id, exit_code DESC, rowid", [*chunk, slurm.OOM_SIGNAL]):
                out.setdefault(r["job_id"], (r["exit_code"], r["exit_signal"]))
        return out

    def attempts(self, job_ids: list[int]) -> dict[int, list[Attempt]]:
        out: dict[int, list[Attempt]] = {}
        for chunk in _chunks(job_ids):
            for r in self.conn.execute(
                    f"SELECT * FROM job_attempts WHERE job_id IN ({_marks(chunk)}) "
                    "ORDER BY job_id, attempt", chunk):
                r = dict(r)
                r["nodes"] = tuple(json.loads(r["nodes"]))
                out.setdefault(r["job_id"], []).append(Attempt(**r))
        return out


# -- the purge rule -----------------------------------------------------------------

def connect_writer(path: str) -> sqlite3.Connection:
    """A connection of the purge's own (the controller's stays with its event loop)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def purge_batch(conn: sqlite3.Connection, cutoff: float, limit: int) -> int:
    """Delete up to ``limit`` finished jobs that ended before ``cutoff``, oldest
    first, with their steps, earlier runs and events, in one transaction;
    returns how many jobs went. A job still pending, running or completing
    is never touched, nor an array's record that still holds pending tasks."""
    finished = sorted(slurm.FINISHED_STATES)
    conn.execute("BEGIN IMMEDIATE")
    try:
        ids = [r[0] for r in conn.execute(
            f"SELECT job_id FROM jobs WHERE end_time > 0 AND end_time < ? "
            f"AND state IN ({_marks(finished)}) AND completing = '[]' AND array_task_str = '' "
            "ORDER BY end_time LIMIT ?", [cutoff, *finished, limit])]
        for chunk in _chunks(ids):
            m = _marks(chunk)
            for table in ("steps", "job_attempts", "job_events", "watch_events", "running_steps", "jobs"):
                conn.execute(f"DELETE FROM {table} WHERE job_id IN ({m})", chunk)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return len(ids)


def _frozen(cls, values: dict):
    """A frozen record from a row that holds every one of its fields (the
    table's columns are the record's fields): the generated __init__ sets
    them one by one through object.__setattr__, a third of a history read."""
    missing = _FIELDS[cls] - values.keys()
    if missing:
        return cls(**values)
    rec = object.__new__(cls)
    rec.__dict__.update(values)
    return rec


_FIELDS = {cls: frozenset(f.name for f in dataclasses.fields(cls)) for cls in (JobRecord, StepRecord)}


def _marks(values) -> str:
    return ", ".join("?" for _ in values)


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i:i + _CHUNK]
