"""squeue's tables: -o's %-letters, -O's field names, the default, -l and
--start formats; from Slurm 22.05's src/squeue/print.c (one _print_job_*
per letter) and opts.c (the default formats, the -O field table).

Nothing here talks to the controller or reads the clock: ``now`` comes from
the reply (JobInfo.now / GetJobsResponse.now), so every function can be
checked against golden Slurm output with hand-built messages.

    >>> job = api_pb2.JobInfo(job_id=7, name="wrap", user="root", state="RUNNING",
    ...                       partition="debug", num_nodes=1, nodes="node1",
    ...                       start_time=100, now=103, time_limit_min=-1)
    >>> print(squeue_table([job]), end="")
                 JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
                     7     debug     wrap     root  R       0:03      1 node1
"""
from __future__ import annotations

import itertools
import operator
from functools import lru_cache
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Iterable, Sequence

from lingjun import slurm
from cli.formats.fields import FormatError, pad, parse_format, render_row, row_plan, split_O_token
from cli.formats.units import timestamp_or_na, time_limit
from cli.formats.jobs import (array_job_text, array_task_field, job_used_seconds, min_cpus,
                              tres_per_node)
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2

SQUEUE_DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SQUEUE_LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
# squeue --start (Slurm 22.05's, as /usr/bin/squeue --start prints it)
SQUEUE_START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"

SQUEUE_HEADERS = {
    "i": "JOBID", "A": "JOBID", "j": "NAME", "u": "USER", "U": "UID", "g": "GROUP",
    "G": "GID", "t": "ST", "T": "STATE", "M": "TIME", "D": "NODES",
    "R": "NODELIST(REASON)", "r": "REASON", "N": "NODELIST", "P": "PARTITION",
    "l": "TIME_LIMIT", "L": "TIME_LEFT", "S": "START_TIME", "V": "SUBMIT_TIME",
    "e": "END_TIME", "C": "CPUS", "c": "MIN_CPUS", "m": "MIN_MEMORY",
    "b": "TRES_PER_NODE", "n": "REQ_NODES", "a": "ACCOUNT", "q": "QOS",
    "p": "PRIORITY", "Q": "PRIORITY", "y": "NICE", "Z": "WORK_DIR", "k": "COMMENT",
    "o": "COMMAND", "h": "OVER_SUBSCRIBE", "B": "EXEC_HOST", "E": "DEPENDENCY",
    "f": "FEATURES", "F": "ARRAY_JOB_ID", "K": "ARRAY_TASK_ID", "O": "CONTIGUOUS",
    "x": "EXC_NODES", "z": "S:C:T", "w": "WCKEY", "v": "RESERVATION",
    "d": "MIN_TMP_DISK", "H": "SOCKETS", "I": "CORES", "J": "THREADS",
    "s": "SELECT_JOBINFO", "W": "LICENSES", "X": "CORE_SPEC", "Y": "SCHEDNODES",
}
# squeue %R: these states show "(Reason)" instead of the allocation.
_REASON_STATES = frozenset({slurm.PENDING, slurm.TIMEOUT, slurm.OUT_OF_MEMORY,
                            slurm.DEADLINE, slurm.FAILED})


def _start_time(r: _JobRow) -> str:
    """%S: when it started; for a pending job when it is expected to (backfill), or N/A."""
    if r.state == slurm.PENDING:
        return timestamp_or_na(r.job.sched_start_time)
    return timestamp_or_na(r.job.start_time)


class _JobRow:
    """One job as squeue's letters see it; what several letters share is computed once."""
    __slots__ = ("job", "now", "state", "reason", "_used")

    def __init__(self, job: api_pb2.JobInfo, now: int | None):
        self.job, self.now = job, now
        self.state = job.state or slurm.PENDING
        self.reason = job.reason or slurm.REASON_NONE
        self._used: int | None = None

    @property
    def used(self) -> int:
        if self._used is None:
            self._used = job_used_seconds(self.job, self.now)
        return self._used


def _time_left(r: _JobRow) -> str:
    if r.job.time_limit_min < 0:
        return "UNLIMITED"
    return slurm.format_elapsed(max(0, r.job.time_limit_min * 60 - r.used))


def _min_memory(r: _JobRow) -> str:
    mem = r.job.mem_per_node_mb
    return slurm.format_size_mb(mem) if mem > 0 else "0"


# Every squeue % letter: its text for one job. A table, so that a format
# computes only its own letters (100,000 jobs times every letter was most of
# squeue's time).
_SQUEUE_LETTERS: dict[str, Callable[[_JobRow], str]] = {
    "i": lambda r: array_job_text(r.job), "A": lambda r: str(r.job.job_id),
    "j": lambda r: r.job.name, "u": lambda r: r.job.user,
    "U": lambda r: str(r.job.uid), "g": lambda r: r.job.group, "G": lambda r: str(r.job.gid),
    "t": lambda r: slurm.job_state_code(r.state), "T": lambda r: r.state,
    "M": lambda r: slurm.format_elapsed(r.used), "D": lambda r: str(r.job.num_nodes),
    "R": lambda r: f"({r.reason})" if r.state in _REASON_STATES else r.job.nodes,
    "r": lambda r: r.reason, "N": lambda r: r.job.nodes, "P": lambda r: r.job.partition,
    "l": lambda r: slurm.format_time_limit(r.job.time_limit_min), "L": _time_left,
    "S": lambda r: _start_time(r), "V": lambda r: timestamp_or_na(r.job.submit_time),
    "e": lambda r: timestamp_or_na(r.job.end_time), "C": lambda r: str(r.job.num_cpus),
    "c": lambda r: str(min_cpus(r.job)),
    "m": _min_memory,
    "b": lambda r: tres_per_node(r.job), "n": lambda r: r.job.req_nodes,
    "a": lambda r: r.job.account or "(null)",
    "q": lambda r: r.job.qos or "(null)",
    "p": lambda r: f"{r.job.priority / 4294967295:.14f}" if r.job.priority else "0.00000000000000",
    "Q": lambda r: str(r.job.priority), "y": lambda r: str(r.job.nice),
    "Z": lambda r: r.job.work_dir,
    "k": lambda r: r.job.comment or "(null)", "o": lambda r: r.job.command or "(null)",
    "h": lambda r: "NO" if r.job.exclusive else "OK", "B": lambda r: r.job.batch_host or "n/a",
    "E": lambda r: r.job.dependency or "(null)", "f": lambda r: r.job.features or "(null)",
    "F": lambda r: str(r.job.array_job_id or r.job.job_id),
    "K": lambda r: array_task_field(r.job), "O": lambda r: "0",
    "x": lambda r: r.job.exc_nodes, "z": lambda r: "*:*:*", "w": lambda r: "(null)",
    "v": lambda r: "(null)", "d": lambda r: "0",
    "H": lambda r: "*", "I": lambda r: "*", "J": lambda r: "*", "s": lambda r: "(null)",
    "W": lambda r: "(null)", "X": lambda r: "N/A",
    "Y": lambda r: r.job.sched_nodes or "(null)",
}


def squeue_values(job: api_pb2.JobInfo, now: int | None = None,
                  letters: Iterable[str] | None = None) -> dict[str, str]:
    """squeue % letters' text for one job: every letter, or only ``letters``."""
    r = _JobRow(job, now)
    if letters is None:
        return {k: f(r) for k, f in _SQUEUE_LETTERS.items()}
    return {k: _SQUEUE_LETTERS[k](r) for k in letters if k in _SQUEUE_LETTERS}


def sort_jobs(jobs: Sequence[api_pb2.JobInfo]) -> list[api_pb2.JobInfo]:
    """squeue's default order "P,t,-p": partition, state name, priority descending.

    Slurm compares state *names*, so CANCELLED < COMPLETED < PENDING < RUNNING;
    ties go by job id, an array task by its array's id and then its index (squeue
    sorts by id first: golden squeue_default_after_completion lists 12_1, 12_2,
    12_3 though 12_3 kept the array's own id 12). The controller sorts the same
    way when asked (slurm.squeue_order_key), and says so in its reply.
    """
    return sorted(jobs, key=slurm.squeue_order_key)


# What each squeue % letter reads of a JobInfo: a command asks the controller
# for these fields only (GetJobsRequest.job_fields). tests/cli/test_formats.py
# checks that a job cut down to them prints as the whole job does.
SQUEUE_LETTER_FIELDS: dict[str, tuple[str, ...]] = {
    "i": ("job_id", "array_job_id", "array_task_id", "array_task_str", "state"),
    "A": ("job_id",), "j": ("name",), "u": ("user",), "U": ("uid",), "g": ("group",),
    "G": ("gid",), "t": ("state",), "T": ("state",), "M": ("state", "start_time", "end_time"),
    "D": ("num_nodes",), "R": ("state", "reason", "nodes"), "r": ("reason",), "N": ("nodes",),
    "P": ("partition",), "l": ("time_limit_min",),
    "L": ("time_limit_min", "state", "start_time", "end_time"),
    "S": ("start_time", "sched_start_time", "state"), "V": ("submit_time",), "e": ("end_time",), "C": ("num_cpus",),
    "c": ("cpus_per_task", "ntasks_per_node"), "m": ("mem_per_node_mb",),
    "b": ("gpus_per_node", "gpu_type", "shards_per_node", "mps_per_node"), "n": ("req_nodes",), "a": ("account",), "q": ("qos",),
    "p": ("priority",), "Q": ("priority",), "y": ("nice",), "Z": ("work_dir",),
    "k": ("comment",), "o": ("command",), "h": ("exclusive",), "B": ("batch_host",),
    "E": ("dependency",), "f": ("features",), "F": ("array_job_id", "job_id"),
    "K": ("array_job_id", "array_task_id", "array_task_str"), "x": ("exc_nodes",),
    "Y": ("sched_nodes",),
}
# What squeue itself reads besides its columns: the order, -j and -r.
SQUEUE_BASE_FIELDS = ("job_id", "array_job_id", "array_task_id", "array_task_str", "state",
                      "partition", "priority")


def _attr(jobs, name: str) -> list:
    return list(map(operator.attrgetter(name), jobs))


def _col_job_id(jobs, now):
    if not any(_attr(jobs, "array_job_id")):
        return list(map(str, _attr(jobs, "job_id")))
    return [array_job_text(j) if j.array_job_id else str(j.job_id) for j in jobs]


def _states(jobs) -> list[str]:
    return [s or slurm.PENDING for s in _attr(jobs, "state")]


@lru_cache(maxsize=256)
def _state_code(state: str) -> str:
    return slurm.job_state_code(state)


def _col_used(jobs, now):
    pending = slurm.PENDING
    return ["0:00" if s == pending or not t else slurm.format_elapsed(job_used_seconds(j, now))
            for j, s, t in zip(jobs, _attr(jobs, "state"), _attr(jobs, "start_time"))]


@lru_cache(maxsize=4096)
def _in_parens(reason: str) -> str:
    return f"({reason or slurm.REASON_NONE})"


def _col_reason_list(jobs, now):
    shown = _REASON_STATES | {""}        # no state reads as PENDING
    return [_in_parens(r) if s in shown else n
            for s, r, n in zip(_attr(jobs, "state"), _attr(jobs, "reason"), _attr(jobs, "nodes"))]


# The letters of the default and common formats, a column at a time (a list
# comprehension over the jobs costs a fraction of a call per letter per job);
# the others go through _SQUEUE_LETTERS job by job. Each gives what its
# _SQUEUE_LETTERS entry gives, checked by tests/cli/test_squeue_fields.py.
_SQUEUE_COLUMNS: dict[str, Callable[[Sequence[api_pb2.JobInfo], int | None], list[str]]] = {
    "i": _col_job_id,
    "A": lambda jobs, now: list(map(str, _attr(jobs, "job_id"))),
    "j": lambda jobs, now: _attr(jobs, "name"),
    "u": lambda jobs, now: _attr(jobs, "user"),
    "P": lambda jobs, now: _attr(jobs, "partition"),
    "N": lambda jobs, now: _attr(jobs, "nodes"),
    "r": lambda jobs, now: [r or slurm.REASON_NONE for r in _attr(jobs, "reason")],
    "T": lambda jobs, now: _states(jobs),
    "t": lambda jobs, now: list(map(_state_code, _states(jobs))),
    "D": lambda jobs, now: list(map(str, _attr(jobs, "num_nodes"))),
    "C": lambda jobs, now: list(map(str, _attr(jobs, "num_cpus"))),
    "l": lambda jobs, now: list(map(time_limit, _attr(jobs, "time_limit_min"))),
    "M": _col_used,
    "R": _col_reason_list,
}


def squeue_column(jobs: Sequence[api_pb2.JobInfo], letter: str, now: int | None) -> list[str]:
    """One % letter's text for each of ``jobs`` ("" for a letter squeue does not know)."""
    col = _SQUEUE_COLUMNS.get(letter)
    if col is not None:
        return col(jobs, now)
    f = _SQUEUE_LETTERS.get(letter)
    if f is None:
        return [""] * len(jobs)
    return [f(_JobRow(j, now)) for j in jobs]


def _padded(col: list[str], width: int, right: bool, before: str) -> list[str]:
    """``before`` + pad(v, width, right) for each v of a column; a column of few
    distinct values (partition, state, user...) pads each of them once."""
    if width <= 0:
        return [before + v for v in col] if before else col
    distinct = set(col)
    if len(distinct) * 4 < len(col):
        memo = {v: before + (v[:width].rjust(width) if right else v[:width].ljust(width))
                for v in distinct}
        return [memo[v] for v in col]
    if right:
        return [before + v[:width].rjust(width) for v in col]
    return [before + v[:width].ljust(width) for v in col]


def _render_columns(pieces: list, columns: list[list[str]], rows: int) -> str:
    """The rows of a table: ``pieces`` is the row's layout, literal text and
    (column, width, right) cells, each column's cells padded at once."""
    cells, before = [], ""
    for piece in pieces:
        if isinstance(piece, str):
            before += piece
            continue
        i, width, right = piece
        cells.append(_padded(columns[i], width, right, before))
        before = ""
    cells.append(itertools.repeat(before, rows))
    return "".join(map("".join, zip(*cells)))


def squeue_table(jobs: Sequence[api_pb2.JobInfo], fmt: str = SQUEUE_DEFAULT_FORMAT,
                 header: bool = True, now: int | None = None, sort: bool = True) -> str:
    """squeue with a %-format (-o); jobs sorted as Slurm sorts them (unless
    ``sort`` is False: they come sorted already)."""
    fields, trailer = parse_format(fmt)
    plan, end = row_plan(fields, trailer, {})
    head = render_row(plan, end, SQUEUE_HEADERS.get) if header else ""
    jobs = sort_jobs(jobs) if sort else list(jobs)
    # The row's layout, each letter a column computed once.
    pieces: list = []
    index: dict[str, int] = {}
    for prefix, letter, w, justify in plan:
        pieces.append(prefix)
        if letter is None:
            continue
        if letter not in _SQUEUE_LETTERS:      # an empty cell, padded like any other
            pieces.append("".ljust(w) if justify is not None else "")
            continue
        i = index.setdefault(letter, len(index))
        pieces.append((i, w if justify is not None else 0, justify is str.rjust))
    pieces.append(end)
    columns = [squeue_column(jobs, letter, now) for letter in index]
    return head + _render_columns(pieces, columns, len(jobs))


# squeue -O / --Format: field name -> (header, % letter or value function)
SQUEUE_O_FIELDS: dict[str, tuple[str, str | Callable[[api_pb2.JobInfo], str]]] = {
    # JobID is the job's own id (unique per array task, golden squeue_O_fields
    # prints the array 12 as "12"); JobArrayID is %i's "12_[1-3]" / "12_1".
    "jobid": ("JOBID", "A"), "jobarrayid": ("JOBID", "i"), "name": ("NAME", "j"),
    "username": ("USER", "u"), "userid": ("UID", "U"), "groupname": ("GROUP", "g"),
    "groupid": ("GID", "G"), "state": ("STATE", "T"), "statecompact": ("ST", "t"),
    "timeused": ("TIME", "M"), "numnodes": ("NODES", "D"),
    "reasonlist": ("NODELIST(REASON)", "R"), "reason": ("REASON", "r"),
    "nodelist": ("NODELIST", "N"), "partition": ("PARTITION", "P"),
    "timelimit": ("TIME_LIMIT", "l"), "timeleft": ("TIME_LEFT", "L"),
    "starttime": ("START_TIME", "S"), "submittime": ("SUBMIT_TIME", "V"),
    "endtime": ("END_TIME", "e"), "numcpus": ("CPUS", "C"), "mincpus": ("MIN_CPUS", "c"),
    "minmemory": ("MIN_MEMORY", "m"), "tres-per-node": ("TRES_PER_NODE", "b"),
    "account": ("ACCOUNT", "a"), "qos": ("QOS", "q"), "priority": ("PRIORITY", "p"),
    "prioritylong": ("PRIORITY", "Q"), "nice": ("NICE", "y"), "workdir": ("WORK_DIR", "Z"),
    "comment": ("COMMENT", "k"), "command": ("COMMAND", "o"),
    "oversubscribe": ("OVER_SUBSCRIBE", "h"), "batchhost": ("EXEC_HOST", "B"),
    "dependency": ("DEPENDENCY", "E"), "feature": ("FEATURES", "f"),
    "arrayjobid": ("ARRAY_JOB_ID", "F"), "arraytaskid": ("ARRAY_TASK_ID", "K"),
    "contiguous": ("CONTIGUOUS", "O"), "exit_code": ("EXIT_CODE",
                                                     lambda j: slurm.format_exit_code(j.exit_code, j.exit_signal)),
    "numtasks": ("TASKS", lambda j: str(j.num_tasks or 1)),
    "cpus-per-task": ("CPUS_PER_TASK", lambda j: str(j.cpus_per_task or 1)),
    "stdout": ("STDOUT", lambda j: j.stdout_path), "stderr": ("STDERR", lambda j: j.stderr_path),
    "stdin": ("STDIN", lambda j: j.stdin_path or "/dev/null"),
    "requeue": ("REQUEUE", lambda j: str(int(j.requeue))),
    "restartcnt": ("RESTARTCNT", lambda j: str(j.restarts)),
    "eligibletime": ("ELIGIBLE_TIME", lambda j: timestamp_or_na(j.eligible_time)),
    "submithost": ("ALLOC_NODE", lambda j: j.submit_host),  # header per squeue.1 "AllocNodes"
    "schednodes": ("SCHEDNODES", "Y"), "reservation": ("RESERVATION", "v"),
    "wckey": ("WCKEY", "w"),
    # the rest of squeue(1)'s -O list; "not set" reads as Slurm prints it
    "accruetime": ("ACCRUE_TIME", lambda j: timestamp_or_na(j.eligible_time)),
    "admin_comment": ("ADMIN_COMMENT", lambda j: "(null)"),
    "allocnodes": ("ALLOC_NODES", lambda j: j.submit_host or "(null)"),
    "allocsid": ("ALLOC_SID", lambda j: "0"),
    "associd": ("ASSOC_ID", lambda j: "0"),
    "batchflag": ("BATCH_FLAG", lambda j: str(int(j.batch))),
    "boardspernode": ("BOARDS_PER_NODE", lambda j: "N/A"),
    "burstbuffer": ("BURST_BUFFER", lambda j: "(null)"),
    "burstbufferstate": ("BURST_BUFFER_STATE", lambda j: "(null)"),
    "cluster": ("CLUSTER", lambda j: "(null)"),
    "clusterfeature": ("CLUSTER_FEATURES", lambda j: "(null)"),
    "container": ("CONTAINER", lambda j: "(null)"),
    "cores": ("CORES", "I"), "corespec": ("CORE_SPEC", "X"),
    "cpufreq": ("CPU_FREQ", lambda j: "Unknown"),
    "cpus-per-tres": ("CPUS_PER_TRES", lambda j: "(null)"),
    "deadline": ("DEADLINE", lambda j: "N/A"),
    "delayboot": ("DELAY_BOOT", lambda j: "00:00:00"),
    "derivedec": ("DERIVED_EC", lambda j: slurm.format_exit_code(j.derived_exit_code,
                                                                 j.derived_exit_signal)),
    "excnodes": ("EXC_NODES", "x"),
    "hetjobid": ("HET_JOB_ID", lambda j: "N/A"),
    "hetjobidset": ("HET_JOB_ID_SET", lambda j: "N/A"),
    "hetjoboffset": ("HET_JOB_OFFSET", lambda j: "N/A"),
    "lastschedeval": ("LAST_SCHED_EVAL",
                      lambda j: timestamp_or_na(j.start_time or j.eligible_time or j.submit_time)),
    "licenses": ("LICENSES", "W"),
    "maxcpus": ("MAX_CPUS", lambda j: "0"),
    "maxnodes": ("MAX_NODES", lambda j: str(j.max_nodes or 0)),
    "mcslabel": ("MCSLABEL", lambda j: "N/A"),
    "mem-per-tres": ("MEM_PER_TRES", lambda j: "(null)"),
    "mintime": ("MIN_TIME", lambda j: "0:00"),
    "mintmpdisk": ("MIN_TMP_DISK", "d"),
    "network": ("NETWORK", lambda j: "(null)"),
    "nodes": ("NODES", "D"),
    "ntperboard": ("NTASKS_PER_BOARD", lambda j: "0"),
    "ntpercore": ("NTASKS_PER_CORE", lambda j: "0"),
    "ntpernode": ("NTASKS_PER_NODE", lambda j: str(j.ntasks_per_node or 0)),
    "ntpersocket": ("NTASKS_PER_SOCKET", lambda j: "0"),
    "origin": ("ORIGIN", lambda j: "N/A"), "originraw": ("ORIGIN_RAW", lambda j: "N/A"),
    "pendingtime": ("PENDING_TIME", lambda j: str(
        max(0, (j.start_time or j.now) - (j.eligible_time or j.submit_time))
        if j.eligible_time or j.submit_time else 0)),
    "preempttime": ("PREEMPT_TIME", lambda j: "N/A"),
    "prefer": ("PREFER", lambda j: "(null)"),
    "profile": ("PROFILE", lambda j: "NotSet"),
    "reboot": ("REBOOT", lambda j: "0"),
    "reqnodes": ("REQ_NODES", "n"),
    "reqswitch": ("REQ_SWITCH", lambda j: "0"),
    "resizetime": ("RESIZE_TIME", lambda j: "0"),
    "resvport": ("RESV_PORT", lambda j: "N/A"),
    "sct": ("S:C:T", "z"), "selectjobinfo": ("SELECT_JOBINFO", "s"),
    "siblingsactive": ("ACTIVE_SIBLINGS", lambda j: "(null)"),
    "siblingsactiveraw": ("ACTIVE_SIBLINGS_RAW", lambda j: "(null)"),
    "siblingsviable": ("VIABLE_SIBLINGS", lambda j: "(null)"),
    "siblingsviableraw": ("VIABLE_SIBLINGS_RAW", lambda j: "(null)"),
    "sockets": ("SOCKETS", "H"), "sperboard": ("SOCKETS_PER_BOARD", lambda j: "0"),
    "stepid": ("STEPID", "i"), "stepname": ("STEPNAME", "j"), "stepstate": ("STEPSTATE", "T"),
    "system_comment": ("SYSTEM_COMMENT", lambda j: "(null)"),
    "threads": ("THREADS", "J"),
    "tres-alloc": ("TRES_ALLOC", lambda j: _alloc_tres(j.num_cpus, j.mem_per_node_mb,
                                                        j.num_nodes) if j.nodes else "(null)"),
    "tres-bind": ("TRES_BIND", lambda j: "(null)"),
    "tres-freq": ("TRES_FREQ", lambda j: "(null)"),
    "tres-per-job": ("TRES_PER_JOB", lambda j: f"gres:gpu:{j.gpus}"
                     if j.gpus and not j.gpus_per_node else "N/A"),
    "tres-per-socket": ("TRES_PER_SOCKET", lambda j: "N/A"),
    "tres-per-step": ("TRES_PER_STEP", lambda j: "N/A"),
    "tres-per-task": ("TRES_PER_TASK", lambda j: "N/A"),
    "wait4switch": ("WAIT4SWITCH", lambda j: "0"),
}

# What the -O fields that are not a % letter read of a JobInfo (the others
# read what their letter does); those not named read nothing.
SQUEUE_O_READS: dict[str, tuple[str, ...]] = {
    "exit_code": ("exit_code", "exit_signal"), "numtasks": ("num_tasks",),
    "cpus-per-task": ("cpus_per_task",), "stdout": ("stdout_path",),
    "stderr": ("stderr_path",), "stdin": ("stdin_path",), "requeue": ("requeue",),
    "restartcnt": ("restarts",), "eligibletime": ("eligible_time",),
    "submithost": ("submit_host",), "accruetime": ("eligible_time",),
    "allocnodes": ("submit_host",), "batchflag": ("batch",),
    "derivedec": ("derived_exit_code", "derived_exit_signal"),
    "lastschedeval": ("start_time", "eligible_time", "submit_time"),
    "maxnodes": ("max_nodes",), "ntpernode": ("ntasks_per_node",),
    "pendingtime": ("start_time", "now", "eligible_time", "submit_time"),
    "tres-alloc": ("num_cpus", "mem_per_node_mb", "num_nodes", "nodes"),
    "tres-per-job": ("gpus", "gpus_per_node"),
}


def parse_squeue_O(spec: str, strict: bool = True) -> list[tuple]:
    """"JobID:8,State:12" -> [(header, width, right, letter-or-fn, suffix)].

    An unknown name raises FormatError, or with ``strict=False`` becomes an
    empty column of no width that prints only its suffix (Slurm's
    _print_com_invalid)."""
    out = []
    for token in (t for t in spec.split(",") if t):
        name, width, right, suffix = split_O_token(token)
        key = name.lower()
        if key not in SQUEUE_O_FIELDS:
            if strict:
                raise FormatError(f"Invalid job format specification: {name}")
            out.append(("", 0, False, lambda j: "", suffix))
            continue
        header, src = SQUEUE_O_FIELDS[key]
        out.append((header, width, right, src, suffix))
    return out


def squeue_O_table(jobs: Sequence[api_pb2.JobInfo], spec: str, header: bool = True,
                   now: int | None = None, sort: bool = True) -> str:
    cols = parse_squeue_O(spec, strict=False)
    head = ""
    if header:
        head = "".join(pad(h, w, r) + sfx for h, w, r, _, sfx in cols) + "\n"
    jobs = sort_jobs(jobs) if sort else list(jobs)
    pieces: list = []
    columns: list[list[str]] = []
    index: dict = {}
    for _, w, r, src, sfx in cols:
        key = src if isinstance(src, str) else id(src)
        i = index.get(key)
        if i is None:
            i = index[key] = len(columns)
            columns.append(squeue_column(jobs, src, now) if isinstance(src, str)
                           else [src(j) for j in jobs])
        pieces += [(i, w, r), sfx]
    pieces.append("\n")
    return head + _render_columns(pieces, columns, len(jobs))


def squeue_O_fields(spec: str) -> set[str]:
    """The JobInfo fields a -O spec's columns read."""
    out: set[str] = set()
    for token in (t for t in spec.split(",") if t):
        key = split_O_token(token)[0].lower()
        src = SQUEUE_O_FIELDS.get(key, ("", ""))[1]
        if isinstance(src, str):
            out.update(SQUEUE_LETTER_FIELDS.get(src, ()))
        else:
            out.update(SQUEUE_O_READS.get(key, ()))
    return out


def squeue_format_fields(fmt: str) -> set[str]:
    """The JobInfo fields a %-format's letters read."""
    fields, _ = parse_format(fmt)
    return {name for f in fields for name in SQUEUE_LETTER_FIELDS.get(f.letter, ())}


def _alloc_tres(cpus: int, mem_mb: int, nodes: int) -> str:
    """squeue's TRES_ALLOC (cpu, mem, node)."""
    parts = [f"cpu={cpus}"]
    if mem_mb > 0:
        parts.append(f"mem={mem_mb * max(1, nodes)}M")
    parts.append(f"node={max(1, nodes)}")
    return ",".join(parts)
