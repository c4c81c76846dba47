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
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import sqlite_utils

from lingjun.v1 import api_pb2, agent_pb2
from lingjund.store.schema import MIGRATIONS

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


_JSON_COLUMNS = ("nodes", "cpus_per_node", "mem_per_node", "gpus_per_node",
                 "tasks_per_node", "completing")


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    name: str
    user: str
    uid: int
    partition: str
    state: str
    reason: str
    priority: int
    submit_time: float
    time_limit_min: int
    spec: api_pb2.JobSpec
    client_token: str | None = None
    eligible_time: float = 0.0
    start_time: float = 0.0
    end_time: float = 0.0
    nodes: tuple[str, ...] = ()
    cpus_per_node: tuple[int, ...] = ()
    mem_per_node: tuple[int, ...] = ()
    gpus_per_node: tuple[int, ...] = ()
    tasks_per_node: tuple[int, ...] = ()
    exclusive: bool = False
    batch_host: str = ""
    launched: bool = False
    kill_reason: str = ""
    completing: tuple[str, ...] = ()
    exit_code: int = 0
    exit_signal: int = 0
    cancelled_by: str = ""
    restarts: int = 0
    held: bool = False
    next_step_id: int = 0
    stdout_path: str = ""
    stderr_path: str = ""
    array_job_id: int = 0             # 0 = not part of an array
    array_task_id: int = -1           # -1 = a plain job, or the array's meta record
    array_task_str: str = ""          # meta record: the tasks still pending ("4-9,12")
    array_max_running: int = 0        # meta record: the %N throttle (0 = none)
    warn_signal_sent: bool = False    # --signal's warning went out for this run
    dependency: str = ""              # what is left to wait for ("afterok:7(unfulfilled)"); "" = none
    hold_admin: bool = False          # held by an operator (JobHeldAdmin); only with held
    deadline: float = 0.0             # --deadline, Unix seconds; 0 = none
    # the last preemption (service/preemption.py); 0 = never
    preempted_by: int = 0
    preempt_time: float = 0.0
    preempt_killed: bool = False      # its grace time ran out: the kill was sent
    preempt_requeue: bool = False     # PreemptMode=REQUEUE: back to the queue when it ends


@dataclass(frozen=True)
class StepRecord:
    job_id: int
    step_id: str
    name: str
    state: str
    exit_code: int = 0
    exit_signal: int = 0
    nodes: tuple[str, ...] = ()
    num_tasks: int = 1
    num_cpus: int = 1
    start_time: float = 0.0
    end_time: float = 0.0
    max_rss_kb: int = 0
    ave_rss_kb: int = 0               # mean over tasks of each task's mean sampled RSS
    max_rss_node: str = ""            # node of the task with the highest peak
    max_rss_task: int = 0             # that task's rank
    user_cpu_ms: int = 0              # summed over tasks
    system_cpu_ms: int = 0


@dataclass(frozen=True)
class RunningStepRecord:
    """An srun step while it runs: what a restarted controller needs to follow it."""
    job_id: int
    step_id: int
    name: str
    nodes: tuple[str, ...]
    rank_node: dict[int, str]
    cpus: dict[str, int]
    num_tasks: int
    num_cpus: int
    start_time: float
    kill_on_bad_exit: bool = False


@dataclass(frozen=True)
class NodeRecord:
    name: str
    registered: bool = False
    drain: bool = False
    down: bool = False
    reason: str = ""
    reason_user: str = ""
    reason_time: float = 0.0
    inventory: agent_pb2.Inventory = field(default_factory=agent_pb2.Inventory)
    agent_start_time: float = 0.0
    last_seen: float = 0.0
    last_busy_time: float = 0.0
    net_status: api_pb2.NetStatusReport | None = None   # None = no report yet
    drain_by_probe: bool = False      # the DRAIN was a probe's, not a person's


@dataclass(frozen=True)
class JobEvent:
    """One thing that happened to a job (lingjun events)."""
    job_id: int
    time: float
    kind: str
    text: str


@dataclass(frozen=True)
class Attempt:
    """One ended run of a job that ran again (sacct -D)."""
    job_id: int
    attempt: int                      # 1 = the first run
    state: str                        # how it ended
    nodes: tuple[str, ...] = ()
    start_time: float = 0.0
    end_time: float = 0.0
    exit_code: int = 0
    exit_signal: int = 0


def _job_from_row(row: dict) -> JobRecord:
    row = dict(row)
    spec = api_pb2.JobSpec()
    spec.ParseFromString(row.pop("spec"))
    for c in _JSON_COLUMNS:
        row[c] = tuple(json.loads(row[c]))
    for c in ("exclusive", "launched", "held", "warn_signal_sent", "hold_admin",
              "preempt_killed", "preempt_requeue"):
        row[c] = bool(row[c])
    return JobRecord(spec=spec, **row)


def _job_to_row(fields: dict) -> dict:
    out = {}
    for k, v in fields.items():
        if k in _JSON_COLUMNS:
            v = json.dumps(list(v))
        elif k == "spec":
            v = v.SerializeToString()
        elif isinstance(v, bool):
            v = int(v)
        out[k] = v
    return out


def _step_from_row(row: dict) -> StepRecord:
    row = dict(row)
    row["nodes"] = tuple(json.loads(row["nodes"]))
    return StepRecord(**row)


def _node_from_row(row: dict) -> NodeRecord:
    row = dict(row)
    inv = agent_pb2.Inventory()
    if row.get("inventory"):
        inv.ParseFromString(row["inventory"])
    row["inventory"] = inv
    if row.get("net_status") is not None:
        net = api_pb2.NetStatusReport()
        net.ParseFromString(row["net_status"])
        row["net_status"] = net
    for c in ("registered", "drain", "down", "drain_by_probe"):
        row[c] = bool(row[c])
    return NodeRecord(**row)


class Store:
    def __init__(self, path: str, synchronous: str = "FULL"):
        self.path = path
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db = sqlite_utils.Database(conn)
        self.db.enable_wal()
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA busy_timeout=5000")
        self._lock = threading.RLock()
        self._depth = 0
        self._migrate()

    # -- transactions ---------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator["Store"]:
        """Nestable; only the outermost block commits (or rolls back)."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self.db.execute("BEGIN IMMEDIATE")
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
                    self.db.execute("COMMIT")
                except sqlite3.Error as e:
                    self._rollback()
                    if is_full(e):
                        raise StoreFull(f"{self.path}: {e}") from e
                    raise

    def _rollback(self) -> None:
        """End the open transaction, if SQLite has not ended it itself (it may,
        on SQLITE_FULL and I/O errors)."""
        if self.db.conn.in_transaction:
            self.db.execute("ROLLBACK")

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
        return int(cur.lastrowid)

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

    def job(self, job_id: int) -> JobRecord | None:
        row = next(self.db.query("SELECT * FROM jobs WHERE job_id = ?", [job_id]), None)
        return _job_from_row(row) if row else None

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
        from lingjun import slurm
        states = sorted(slurm.ACTIVE_STATES)
        marks = ", ".join("?" for _ in states)
        n = 0
        for row in self.db.query(f"SELECT array_task_str FROM jobs WHERE uid = ? AND state IN ({marks})",
                                 [uid, *states]):
            n += len(slurm.unfold_indices(row["array_task_str"])) if row["array_task_str"] else 1
        return n

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
        return [_job_from_row(r) for r in self.db.query(
            "SELECT * FROM jobs WHERE state = 'PENDING' AND dependency != '' ORDER BY job_id")]

    def deadline_jobs(self) -> list[JobRecord]:
        """Pending and running jobs that have a --deadline."""
        return [_job_from_row(r) for r in self.db.query(
            "SELECT * FROM jobs WHERE state IN ('PENDING', 'RUNNING') AND deadline > 0 "
            "ORDER BY job_id")]

    def next_eligible_time(self, after: float) -> float | None:
        """The earliest begin time of a pending job still to come."""
        row = self.db.execute("SELECT MIN(eligible_time) FROM jobs WHERE state = 'PENDING' "
                              "AND eligible_time > ?", [after]).fetchone()
        return row[0] if row and row[0] is not None else None

    def holding_jobs(self) -> list[JobRecord]:
        """Jobs that hold resources: running, or finished but still completing."""
        return [_job_from_row(r) for r in self.db.query(
            "SELECT * FROM jobs WHERE state = 'RUNNING' OR completing != '[]' ORDER BY job_id")]

    def jobs_on_node(self, name: str) -> list[JobRecord]:
        """The holding jobs (``holding_jobs``) that hold ``name`` or are completing
        on it. For now a text match on the JSON node lists (the name with its
        quotes, as json.dumps writes it, so node1 does not match node10)."""
        quoted = json.dumps(name)
        return [_job_from_row(r) for r in self.db.query(
            "SELECT * FROM jobs WHERE (state = 'RUNNING' OR completing != '[]')"
            " AND (instr(nodes, ?) > 0 OR instr(completing, ?) > 0) ORDER BY job_id",
            [quoted, quoted])]

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
            start_time=r.start_time, kill_on_bad_exit=int(r.kill_on_bad_exit)),
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
            start_time=r["start_time"], kill_on_bad_exit=bool(r["kill_on_bad_exit"]))
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

    def nodes(self) -> dict[str, NodeRecord]:
        return {r["name"]: _node_from_row(r) for r in self.db.query("SELECT * FROM nodes")}

    def node(self, name: str) -> NodeRecord | None:
        row = next(self.db.query("SELECT * FROM nodes WHERE name = ?", [name]), None)
        return _node_from_row(row) if row else None

    # -- job events and earlier attempts -------------------------------
    def add_job_event(self, job_id: int, time: float, kind: str, text: str) -> None:
        self.db.execute("INSERT INTO job_events (job_id, time, kind, text) VALUES (?, ?, ?, ?)",
                        [job_id, time, kind, text])

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
    def put_probe_results(self, node: str, results: Iterable[api_pb2.SanityResult]) -> None:
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

    def probe_results(self, nodes: Iterable[str] | None = None) -> dict[str, list[api_pb2.SanityResult]]:
        out: dict[str, list[api_pb2.SanityResult]] = {}
        for r in self.db.query("SELECT * FROM probe_results ORDER BY node, name"):
            if nodes is not None and r["node"] not in nodes:
                continue
            out.setdefault(r["node"], []).append(api_pb2.SanityResult(
                name=r["name"], severity=r["severity"], ok=bool(r["ok"]), reason=r["reason"],
                duration_s=r["duration_s"], time=r["time"], phase=r["phase"]))
        return out

    def add_node_event(self, node: str, time: float, event: str, reason: str = "",
                       job_id: int = 0, by: str = "") -> None:
        self.db.execute("INSERT INTO node_events (time, node, event, reason, job_id, by) "
                        "VALUES (?, ?, ?, ?, ?, ?)", [time, node, event, reason, job_id, by])

    def node_events(self, node: str, since: float = 0.0, event: str | None = None,
                    limit: int = 0, by_probe: bool = False) -> list[api_pb2.SanityEvent]:
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
        return [api_pb2.SanityEvent(time=r["time"], node=r["node"], event=r["event"],
                                    reason=r["reason"], job_id=r["job_id"], by=r["by"])
                for r in self.db.query(sql, args)]

    def last_person_event_time(self, node: str) -> float:
        row = self.db.execute("SELECT MAX(time) FROM node_events WHERE node = ? AND by != ''",
                              [node]).fetchone()
        return row[0] or 0.0

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
