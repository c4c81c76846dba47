"""Output formatting for the Slurm commands: pure functions from api_pb2
messages to the text Slurm 22.05 prints.

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
import os
import operator
import re
import time
from collections import namedtuple
from functools import lru_cache
TYPE_CHECKING = False     # typing's own flag, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Callable, Iterable, Iterator, Sequence

from lingjun import slurm
if TYPE_CHECKING:     # hints only: the commands read our messages or protobuf's alike
    from lingjun.v1 import api_pb2

SLURM_VERSION = "22.05.8"

# --- generic %-format machinery (squeue -o, sinfo -o) -----------------------


class Field(namedtuple("Field", ("letter", "width", "right", "prefix", "computed", "suffix"),
                       defaults=(0, False, "", False, ""))):
    """One %-field of a format string: letter, width (0 = natural), justification
    (right), the literal text before it (prefix) and after it (suffix, -O
    "Field:size<suffix>"), and computed: a '#' width, from the data (sinfo).
    A named tuple: dataclasses would cost every squeue its import of inspect."""
    __slots__ = ()


def _field_at(fmt: str, i: int) -> tuple[bool, str, str, int] | None:
    """The field that the "%" at ``i`` starts, as ``%(\\.)?(#|\\d+)?([A-Za-z%])``
    matches it there: (dot, width text, letter, its end); None where that
    pattern matches nothing (the "%" is literal text then). By hand: ``re``
    costs every squeue and sinfo 3-4 ms to import."""
    n = len(fmt)
    j = i + 1
    dot = j < n and fmt[j] == "."
    if dot:
        j += 1
    k = j
    if k < n and fmt[k] == "#":
        k += 1
    else:
        while k < n and fmt[k].isdecimal():      # \d in a str pattern
            k += 1
    if k < n and (fmt[k] == "%" or (fmt[k].isascii() and fmt[k].isalpha())):
        return dot, fmt[j:k], fmt[k], k + 1
    return None


def parse_format(fmt: str) -> tuple[list[Field], str]:
    """"%.18i %.9P" -> fields (each with the literal text before it) and the trailing text."""
    fields: list[Field] = []
    pos = 0
    i = fmt.find("%")
    while i >= 0:
        found = _field_at(fmt, i)
        if found is None:
            i = fmt.find("%", i + 1)
            continue
        dot, width, letter, end = found
        prefix = fmt[pos:i]
        if letter == "%":
            fields.append(Field("%", 0, False, prefix))
        else:
            fields.append(Field(letter, 0 if width in ("", "#") else int(width),
                                dot, prefix, width == "#"))
        pos = end
        i = fmt.find("%", pos)
    return fields, fmt[pos:]


def bad_format_letters(fmt: str) -> list[str]:
    """The type characters of a %-format that name no field ("%-10j" -> "-"):
    squeue reports each and prints that piece of the format as it was typed,
    which parse_format already does by leaving it as literal text."""
    bad = []
    for token in (t for t in fmt.split("%")[1:] if t):
        letter = _type_char(token)
        if letter is not None and not letter.isalpha():
            bad.append(letter)
    return bad


def _type_char(token: str) -> str | None:
    r"""What ``re.match(r"\.?\d*(.)", token, re.S)`` takes as group 1: the
    character after an optional dot and the digits, backing off one character
    where the token ends there (".12" -> "2", "." -> ".")."""
    n = len(token)
    j = 1 if token[:1] == "." else 0
    k = j
    while k < n and token[k].isdecimal():
        k += 1
    if k < n:
        return token[k]
    if k > j:
        return token[k - 1]         # the last digit
    return token[0] if j else None  # "." alone


def pad(value: str, width: int, right: bool) -> str:
    """Slurm's _print_str with cut_output: truncate to width, then justify."""
    if width <= 0:
        return value
    value = value[:width]
    return value.rjust(width) if right else value.ljust(width)


def render_rows(fields: list[Field], trailer: str, rows: Iterable[dict[str, str]],
                headers: dict[str, str] | None, widths: dict[str, int] | None = None) -> str:
    """Lay out rows (letter -> text) under an optional header row."""
    plan, end = _row_plan(fields, trailer, widths or {})
    lines = [_render_row(plan, end, headers.get)] if headers is not None else []
    lines.extend(_render_row(plan, end, r.get) for r in rows)
    return "".join(lines)


def _row_plan(fields: list[Field], trailer: str, widths: dict[str, int]):
    """Each field as (literal before, letter or None, width, justify or None), settled
    once for all rows; and the text that ends each row."""
    plan = []
    for f in fields:
        if f.letter == "%":
            plan.append((f.prefix + "%", None, 0, None))
            continue
        w = widths.get(f.letter, f.width) if f.computed else f.width
        plan.append((f.prefix, f.letter, w,
                     None if w <= 0 else (str.rjust if f.right else str.ljust)))
        if f.suffix:
            plan.append((f.suffix, None, 0, None))
    return plan, trailer + "\n"


def _render_row(plan, end: str, value: Callable[[str], str | None]) -> str:
    """One row: ``value(letter)`` is the field's text (None: empty); pad() inlined."""
    out = []
    for prefix, letter, w, justify in plan:
        out.append(prefix)
        if letter is None:
            continue
        v = value(letter) or ""
        out.append(v if justify is None else justify(v[:w], w))
    out.append(end)
    return "".join(out)


# --- jobs: squeue -------------------------------------------------------------

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


def job_used_seconds(job: api_pb2.JobInfo, now: int | None = None) -> int:
    """Seconds a job has run: now - start while running, end - start once ended."""
    if not job.start_time or job.state == slurm.PENDING:
        return 0
    if job.end_time and job.state not in (slurm.RUNNING,):
        return max(0, job.end_time - job.start_time)
    now = now if now is not None else job.now
    return max(0, (now or job.start_time) - job.start_time)


def _gres_gpu(count: int, gpu_type: str = "") -> str:
    """Slurm's TRES-per-x text: "gres:gpu:2", "gres:gpu:a100:2"."""
    return f"gres:gpu:{gpu_type}:{count}" if gpu_type else f"gres:gpu:{count}"


def _gres_shared(job: api_pb2.JobInfo) -> tuple[str, int]:
    """A shard or MPS job's gres and count per node: ("shard", 2); ("", 0) for others."""
    if job.shards_per_node:
        return "shard", job.shards_per_node
    if job.mps_per_node:
        return "mps", job.mps_per_node
    return "", 0


def tres_per_node(job: api_pb2.JobInfo) -> str:
    """squeue %b, scontrol TresPerNode: "gres:gpu:2", "gres:shard:2", "gres:mps:50"; N/A."""
    if job.gpus_per_node:
        return _gres_gpu(job.gpus_per_node, job.gpu_type)
    kind, n = _gres_shared(job)
    return f"gres:{kind}:{n}" if n else "N/A"


def _min_cpus(job: api_pb2.JobInfo) -> int:
    return max(1, job.cpus_per_task or 1) * max(1, job.ntasks_per_node or 1)


def _start_time(r: _JobRow) -> str:
    """%S: when it started; for a pending job when it is expected to (backfill), or N/A."""
    if r.state == slurm.PENDING:
        return _opt_time(r.job.sched_start_time)
    return _opt_time(r.job.start_time)


def _opt_time(ts: int) -> str:
    # Cached: a queue's jobs share few distinct seconds, and strftime is slow.
    # The zone and SLURM_TIME_FORMAT are part of the key (time.tzset may change it).
    return _local_time(ts, time.timezone, time.altzone, time.daylight, time.tzname,
                       os.environ.get("SLURM_TIME_FORMAT", ""))


@lru_cache(maxsize=65536)
def _local_time(ts: int, *zone) -> str:
    return slurm.format_timestamp(ts, unknown="N/A")


def array_job_text(job: api_pb2.JobInfo) -> str:
    """squeue's %i: "12" for a plain job, "12_3" for one array task, "12_[4-9%2]"
    for an array's pending remainder (its tasks and %N throttle)."""
    if not job.array_job_id:
        return str(job.job_id)
    if job.array_task_str:
        # a remainder cancelled as a whole has no tasks left to list: Slurm
        # prints the bare id (golden squeue_default_after_completion: "13 CANCELLED")
        if job.state and job.state != slurm.PENDING:
            return str(job.job_id)
        return f"{job.array_job_id}_[{job.array_task_str}]"
    return f"{job.array_job_id}_{job.array_task_id}"


def _array_task_field(job: api_pb2.JobInfo) -> str:
    """squeue's %K: the task index, the remainder's task list, or N/A."""
    if not job.array_job_id:
        return "N/A"
    return job.array_task_str or str(job.array_task_id)


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
    "S": lambda r: _start_time(r), "V": lambda r: _opt_time(r.job.submit_time),
    "e": lambda r: _opt_time(r.job.end_time), "C": lambda r: str(r.job.num_cpus),
    "c": lambda r: str(_min_cpus(r.job)),
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
    "K": lambda r: _array_task_field(r.job), "O": lambda r: "0",
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


@lru_cache(maxsize=4096)
def _time_limit(minutes: int) -> str:
    return slurm.format_time_limit(minutes)


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
    "l": lambda jobs, now: list(map(_time_limit, _attr(jobs, "time_limit_min"))),
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
    plan, end = _row_plan(fields, trailer, {})
    head = _render_row(plan, end, SQUEUE_HEADERS.get) if header else ""
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


def squeue_long_header(now: int) -> str:
    """The date line squeue -l and sinfo -l print first."""
    return slurm.format_date_line(now) + "\n"


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
    "eligibletime": ("ELIGIBLE_TIME", lambda j: _opt_time(j.eligible_time)),
    "submithost": ("ALLOC_NODE", lambda j: j.submit_host),  # header per squeue.1 "AllocNodes"
    "schednodes": ("SCHEDNODES", "Y"), "reservation": ("RESERVATION", "v"),
    "wckey": ("WCKEY", "w"),
    # the rest of squeue(1)'s -O list; "not set" reads as Slurm prints it
    "accruetime": ("ACCRUE_TIME", lambda j: _opt_time(j.eligible_time)),
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
                      lambda j: _opt_time(j.start_time or j.eligible_time or j.submit_time)),
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


class FormatError(ValueError):
    """A -o/-O/--format specification that the command cannot print."""


_O_SIZE = r"(?s)(\.)?(\d*)(.*)"


def split_O_token(token: str) -> tuple[str, int, bool, str]:
    """One -O field, "type[:[.][size][suffix]]" -> (name, width, right, suffix).

    No size means 20 columns; ":0" means the value's own width; the suffix is
    printed after the field ("JobID:8|" ends each cell with a bar).
    """
    name, colon, rest = token.partition(":")
    if not colon:
        return name.strip(), 20, False, ""
    dot, size, suffix = re.fullmatch(_O_SIZE, rest).groups()
    return name.strip(), int(size) if size else 20, bool(dot), suffix


def bad_O_fields(spec: str, known: dict) -> list[str]:
    """The field names of a -O spec that the command does not know. squeue and
    sinfo report each ("Invalid job format specification: <name>", both of
    them) and print the rest, the unknown column left empty, with rc 0."""
    names = (split_O_token(t)[0] for t in spec.split(",") if t)
    return [n for n in names if n.lower() not in known]


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


# --- jobs: scontrol show job ----------------------------------------------------


def _null(s: str) -> str:
    return s if s else "(null)"


def _array_tokens(job: api_pb2.JobInfo) -> list[str]:
    """ArrayJobId=12 ArrayTaskId=1-3 [ArrayTaskThrottle=2] (golden scontrol_show_job_array)."""
    if not job.array_job_id:
        return []
    out = [f"ArrayJobId={job.array_job_id}", f"ArrayTaskId={_array_task_field(job)}"]
    if job.array_max_running and job.array_task_str:
        out.append(f"ArrayTaskThrottle={job.array_max_running}")
    return out


def scontrol_job_tokens(job: api_pb2.JobInfo, default_mem_mb: int = 0,
                        now: int | None = None) -> list[list[str]]:
    """scontrol show job as lines of Name=value tokens (the one-liner joins them all).

    ``default_mem_mb`` is the memory a pending job without --mem would get on
    each node (Slurm counts it in TRES while the job waits).
    """
    state = job.state or slurm.PENDING
    pending = state == slurm.PENDING
    now = now if now is not None else job.now
    used = job_used_seconds(job, now)
    ts = slurm.format_timestamp
    end = job.end_time
    if not end and state == slurm.RUNNING and job.start_time and job.time_limit_min > 0:
        end = job.start_time + job.time_limit_min * 60
    started = job.start_time if not pending else 0
    start = job.start_time
    if pending and job.sched_start_time:      # backfill's expected start, as Slurm shows it
        start = job.sched_start_time
        end = start + job.time_limit_min * 60 if job.time_limit_min > 0 else 0
    nodes_txt = str(job.num_nodes)
    if pending and job.max_nodes:
        nodes_txt = f"{job.num_nodes}-{job.max_nodes}"
    never_ran = state == slurm.CANCELLED and not job.nodes
    ntasks = "N/A" if never_ran else str(job.num_tasks or 1)
    cpus = job.num_cpus or 1
    mem_node = job.mem_per_node_mb if job.mem_per_node_mb > 0 else 0
    tres = [f"cpu={cpus}"]
    tres_mem = mem_node or (default_mem_mb if pending or never_ran else 0)
    if job.mem_per_cpu_mb:
        tres.append(f"mem={job.mem_per_cpu_mb * cpus}M")
    elif tres_mem:
        tres.append(f"mem={tres_mem * max(1, job.num_nodes)}M")
    tres.append(f"node={max(1, job.num_nodes)}")
    tres.append(f"billing={cpus}")
    if job.gpus_per_node or job.gpus:
        tres.append(f"gres/gpu={job.gpus or job.gpus_per_node * max(1, job.num_nodes)}")
    shared_kind, shared_n = _gres_shared(job)
    if shared_n:
        tres.append(f"gres/{shared_kind}={shared_n * max(1, job.num_nodes)}")
    sched_eval = job.start_time or job.eligible_time or job.submit_time
    sid = getattr(job, "alloc_sid", 0)
    lines = [
        [f"JobId={job.job_id}", *_array_tokens(job), f"JobName={job.name}"],
        [f"UserId={job.user}({job.uid})", f"GroupId={job.group}({job.gid})", "MCS_label=N/A"],
        [f"Priority={job.priority}", f"Nice={job.nice}", f"Account={_null(job.account)}",
         f"QOS={_null(job.qos)}"],
        # Slurm writes white space in a reason as "_" so the line stays Name=value tokens.
        [f"JobState={state}", f"Reason={(job.reason or slurm.REASON_NONE).replace(' ', '_')}",
         f"Dependency={job.dependency or '(null)'}"],
        [f"Requeue={int(job.requeue)}", f"Restarts={job.restarts}", f"BatchFlag={int(job.batch)}",
         "Reboot=0", f"ExitCode={slurm.format_exit_code(job.exit_code, job.exit_signal)}"],
        [f"RunTime={slurm.format_duration(used)}",
         f"TimeLimit={slurm.format_time_limit(job.time_limit_min, 'scontrol')}", "TimeMin=N/A"],
        [f"SubmitTime={ts(job.submit_time)}", f"EligibleTime={ts(job.eligible_time)}"],
        [f"AccrueTime={ts(job.eligible_time)}"],
        [f"StartTime={ts(start)}", f"EndTime={ts(end)}",
         f"Deadline={ts(job.deadline) if job.deadline else 'N/A'}"],
        # Slurm prints this line only for a job that may be preempted (preemptable_time
        # set); we print it too for one that was, so its PreemptTime stays visible.
        *([[f"PreemptEligibleTime={ts(job.preempt_eligible_time)}",
            f"PreemptTime={ts(job.preempt_time) if job.preempt_time else 'None'}"]]
          if job.preempt_eligible_time or job.preempt_time else []),
        ["SuspendTime=None", "SecsPreSuspend=0", f"LastSchedEval={ts(sched_eval)}",
         "Scheduler=Main"],
        [f"Partition={job.partition}", f"AllocNode:Sid={job.submit_host or 'localhost'}:{sid}"],
        [f"ReqNodeList={_null(job.req_nodes)}", f"ExcNodeList={_null(job.exc_nodes)}"],
        [f"NodeList={job.nodes}",
         *([f"SchedNodeList={job.sched_nodes}"] if pending and job.sched_nodes else [])],
    ]
    if job.batch_host and started:
        lines.append([f"BatchHost={job.batch_host}"])
    lines += [
        [f"NumNodes={nodes_txt}", f"NumCPUs={cpus}", f"NumTasks={ntasks}",
         f"CPUs/Task={job.cpus_per_task or 1}", "ReqB:S:C:T=0:0:*:*"],
        [f"TRES={','.join(tres)}"],
        ["Socks/Node=*", f"NtasksPerN:B:S:C={job.ntasks_per_node}:0:*:*", "CoreSpec=*"],
        [f"MinCPUsNode={_min_cpus(job)}",
         f"MinMemoryCPU={slurm.format_size_mb(job.mem_per_cpu_mb)}" if job.mem_per_cpu_mb else
         f"MinMemoryNode={slurm.format_size_mb(mem_node) if mem_node else 0}",
         "MinTmpDiskNode=0"],
        [f"Features={_null(job.features)}", "DelayBoot=00:00:00"],
        [f"OverSubscribe={'NO' if job.exclusive else 'OK'}", "Contiguous=0",
         "Licenses=(null)", "Network=(null)"],
        [f"Command={_null(job.command)}"],
        [f"WorkDir={job.work_dir}"],
    ]
    if job.comment:
        lines.append([f"Comment={job.comment}"])
    lines += [
        [f"StdErr={job.stderr_path or job.stdout_path}"],
        [f"StdIn={job.stdin_path or '/dev/null'}"],
        [f"StdOut={job.stdout_path}"],
        ["Power="],
    ]
    if job.gpus_per_node or shared_n:
        lines.insert(-1, [f"TresPerNode={tres_per_node(job)}"])
    elif job.gpus:
        lines.insert(-1, [f"TresPerJob={_gres_gpu(job.gpus, job.gpu_type)}"])
    if job.mail_type and job.mail_user:
        lines.insert(-1, [f"MailUser={job.mail_user}", f"MailType={job.mail_type}"])
    return lines


def _gres_idx(gpu_ids, gpu_type: str, shared: tuple[str, int] = ("", 0)) -> str:
    """Slurm's per-node GRES detail: "gpu:2(IDX:0-1)", "gpu:a100:1(IDX:3)"; for a
    shard or MPS job its count on the GPU it shares, "shard:2(IDX:0)"; "" for none."""
    if not gpu_ids:
        return ""
    if shared[1]:
        return f"{shared[0]}:{shared[1]}(IDX:{slurm.fold_indices(gpu_ids)})"
    kind = f"gpu:{gpu_type}" if gpu_type else "gpu"
    return f"{kind}:{len(gpu_ids)}(IDX:{slurm.fold_indices(gpu_ids)})"


def job_alloc_lines(job: api_pb2.JobInfo) -> list[list[str]]:
    """scontrol -d's allocation detail: JOB_GRES=, then one "  Nodes=... CPU_IDs=...
    Mem=... GRES=..." line per run of nodes with the same allocation (Slurm groups
    them). CPU_IDs=N/A: CPUs are counted, not yet bound to ids."""
    total: dict[str, int] = {}
    shared = _gres_shared(job)
    for a in job.node_allocs:
        if a.gpu_ids and shared[1]:
            total[shared[0]] = total.get(shared[0], 0) + shared[1]
        elif a.gpu_ids:
            kind = f"gpu:{a.gpu_type}" if a.gpu_type else "gpu"
            total[kind] = total.get(kind, 0) + len(a.gpu_ids)
    lines = [[f"JOB_GRES={','.join(f'{k}:{n}' for k, n in total.items()) or '(null)'}"]]
    groups: list[tuple[tuple, list[str]]] = []
    for a in job.node_allocs:
        key = (a.mem_mb, _gres_idx(a.gpu_ids, a.gpu_type, shared))
        if groups and groups[-1][0] == key:
            groups[-1][1].append(a.node)
        else:
            groups.append((key, [a.node]))
    for (mem, gres), nodes in groups:
        lines.append([f"  Nodes={slurm.compress_hostlist(nodes)}", "CPU_IDs=N/A",
                      f"Mem={mem}", f"GRES={gres}"])
    return lines


def scontrol_show_job(jobs: Sequence[api_pb2.JobInfo], oneliner: bool = False,
                      default_mem_mb: int = 0, details: bool = False) -> str:
    out = []
    for job in jobs:
        lines = scontrol_job_tokens(job, default_mem_mb)
        if details and job.node_allocs:
            at = next(i for i, line in enumerate(lines) if line[0].startswith("Socks/Node="))
            lines[at + 1:at + 1] = job_alloc_lines(job)
        if oneliner:
            out.append(" ".join(t for line in lines for t in line) + " \n")
        else:
            out.append("\n".join("   " * (i > 0) + " ".join(line) for i, line in enumerate(lines))
                       + "\n   \n\n")
    return "".join(out)


# --- nodes: scontrol show node --------------------------------------------------


def node_port(node: api_pb2.NodeInfo) -> tuple[str, str]:
    addr = node.address or node.name
    host, sep, port = addr.rpartition(":")
    if sep and port.isdigit() and "]" not in port:
        return host, port
    return addr, getattr(node, "port", 0) or "0"


def node_tres(n: api_pb2.NodeInfo) -> tuple[str, str]:
    """A node's configured and allocated TRES ("cpu=2,mem=2000M,billing=2", "cpu=1"),
    as scontrol's CfgTRES/AllocTRES and sinfo --json's tres/tres_used write them."""
    cfg = [f"cpu={n.cpus}", f"mem={n.real_memory_mb}M", f"billing={n.cpus}"]
    if n.gpus:
        cfg.append(f"gres/gpu={n.gpus}")
    cfg += [f"gres/{k}={v}" for k, v in (("mps", n.mps), ("shard", n.shards)) if v]
    alloc = [f"{name}={value}" for name, value in (
        ("cpu", n.cpus_alloc), ("mem", f"{n.alloc_memory_mb}M" if n.alloc_memory_mb else 0),
        ("gres/gpu", n.gpus_alloc), ("gres/mps", n.mps_alloc),
        ("gres/shard", n.shards_alloc)) if value]
    return ",".join(cfg), ",".join(alloc)


def _node_gres(n: api_pb2.NodeInfo) -> str:
    """Gres= / sinfo %G: "gpu:2", "gpu:a100:2", "gpu:1,shard:4", "(null)"."""
    if not n.gpus:
        return "(null)"
    gpus = f"gpu:{n.gpu_type}:{n.gpus}" if n.gpu_type else f"gpu:{n.gpus}"
    return ",".join([gpus] + [f"{k}:{v}" for k, v in (("mps", n.mps), ("shard", n.shards)) if v])


def _node_gres_sockets(n: api_pb2.NodeInfo) -> str:
    """scontrol's Gres=: with the sockets (NUMA nodes) its GPUs sit on where
    known, as Slurm prints an autodetected GPU's core affinity: "gpu:a100:4(S:0-1)"."""
    gres = _node_gres(n)
    numa = sorted({d.numa_node for d in n.gpu_devices if d.numa_node >= 0})
    return f"{gres}(S:{slurm.fold_indices(numa)})" if n.gpus and numa else gres


def _node_gres_used(n: api_pb2.NodeInfo) -> str:
    """scontrol -d's GresUsed=: "gpu:a100:2(IDX:0-1)", "gpu:a100:0(IDX:N/A)"."""
    kind = f"gpu:{n.gpu_type}" if n.gpu_type else "gpu"
    if n.gpu_ids_alloc:
        return f"{kind}:{len(n.gpu_ids_alloc)}(IDX:{slurm.fold_indices(n.gpu_ids_alloc)})"
    return f"{kind}:{n.gpus_alloc}(IDX:N/A)"


def scontrol_show_node(nodes: Sequence[api_pb2.NodeInfo], oneliner: bool = False,
                       details: bool = False) -> str:
    """``details`` (-d): the GPUs in use (GresDrain=, GresUsed=) after Gres=, on a node with GPUs."""
    ts = slurm.format_timestamp
    out = []
    for n in nodes:
        addr, port = node_port(n)
        threads = n.threads_per_core or 1
        sockets = n.sockets or 1
        cores = n.cores_per_socket or max(1, n.cpus // (sockets * threads))
        cfg, alloc = node_tres(n)
        state = slurm.node_state_long(n.state, n.drain, n.not_responding, n.completing)
        lines = [
            f"NodeName={n.name} Arch={n.arch or 'x86_64'} CoresPerSocket={cores} ",
            f"CPUAlloc={n.cpus_alloc} CPUEfctv={n.cpus} CPUTot={n.cpus} CPULoad={n.cpu_load:.2f}",
            f"AvailableFeatures={','.join(n.features) or '(null)'}",
            f"ActiveFeatures={','.join(n.features) or '(null)'}",
            f"Gres={_node_gres_sockets(n)}",
            *(("GresDrain=N/A", f"GresUsed={_node_gres_used(n)}") if details and n.gpus else ()),
            f"NodeAddr={addr} NodeHostName={n.hostname or n.name} Port={port} "
            f"Version={n.version or SLURM_VERSION}",
            f"OS={n.os} ",
            f"RealMemory={n.real_memory_mb} AllocMem={n.alloc_memory_mb} "
            f"FreeMem={n.free_memory_mb} Sockets={sockets} Boards=1",
            f"State={state} ThreadsPerCore={threads} TmpDisk={n.tmp_disk_mb} "
            f"Weight={n.weight or 1} Owner=N/A MCS_label=N/A",
            f"Partitions={','.join(n.partitions)} ",
            f"BootTime={ts(n.boot_time, 'None')} SlurmdStartTime={ts(n.agent_start_time, 'None')}",
            f"LastBusyTime={ts(n.last_busy_time, 'None')}",
            f"CfgTRES={cfg}",
            f"AllocTRES={alloc}",
            "CapWatts=n/a",
            "CurrentWatts=0 AveWatts=0",
            "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
        ]
        net = net_status_line(n)
        if net:
            lines.append(net)
        health = health_line(n)
        if health:
            lines.append(health)
        if n.reason:
            lines.append(f"Reason={n.reason} [{n.reason_user or 'root'}@{ts(n.reason_time)}]")
        if oneliner:
            out.append(" ".join(l.strip() for l in lines) + "\n")
        else:
            out.append(lines[0] + "\n" + "".join(f"   {l}\n" for l in lines[1:]) + "\n")
    return "".join(out)


def health_line(n: api_pb2.NodeInfo) -> str:
    """`scontrol show node`'s probe line, only when a probe fails (a
    healthy node prints exactly as Slurm's): ``HealthCheck=disk:FAIL(drain),processes:FAIL(warn)``."""
    bad = [r for r in n.sanity_results if not r.ok]
    if not bad:
        return ""
    return "HealthCheck=" + ",".join(f"{r.name}:FAIL({r.severity})" for r in bad)


def health_show(nodes: Sequence[api_pb2.SanityNode]) -> str:
    """lingjun health: every probe's last result per node, then recent events."""
    ts = slurm.format_timestamp
    rows = [("NODE", "PROBE", "SEVERITY", "RESULT", "DURATION", "TIME", "PHASE", "REASON")]
    events = []
    for n in nodes:
        if not n.results:
            rows.append((n.name, "-", "-", "none", "-", "-", "-", "no probe results yet"))
        for r in n.results:
            rows.append((n.name, r.name, r.severity, "ok" if r.ok else "FAIL",
                         f"{r.duration_s:.3f}s", ts(int(r.time)), r.phase, r.reason))
        for e in n.events:
            events.append(f"{ts(int(e.time))} {e.node} {e.event}" + (f" by {e.by}" if e.by else "")
                          + (f" job {e.job_id}" if e.job_id else "") + (f": {e.reason}" if e.reason else ""))
    w = [max(len(r[k]) for r in rows) for k in range(7)]
    out = [("  ".join(f"{r[k]:<{w[k]}}" for k in range(7)) + "  " + r[7]).rstrip() + "\n"
           for r in rows]
    if events:
        out.append("\nEVENTS\n" + "".join(e + "\n" for e in events))
    return "".join(out)


def net_status_line(n: api_pb2.NodeInfo) -> str:
    """scontrol show node's one network line ("" for a node with neither a
    profile nor RDMA devices, so such nodes print exactly as Slurm's do):
    ``Network=converged Profile=rails Interfaces=2/2 Uplinks=storage:primary RDMA=mlx5_0/1:ACTIVE``."""
    if not n.HasField("net_status"):
        return ""
    s = n.net_status
    if not s.profile and not s.rdma and s.state in ("", "none"):
        return ""
    words = [f"Network={s.state or 'unknown'}"]
    if s.profile:
        words.append(f"Profile={s.profile}")
    if s.interfaces:
        words.append(f"Interfaces={sum(i.ok for i in s.interfaces)}/{len(s.interfaces)}")
    if s.uplinks:
        words.append("Uplinks=" + ",".join(f"{u.name}:{u.active}" for u in s.uplinks))
    if s.rdma:
        words.append("RDMA=" + ",".join(f"{p.device}/{p.port}:{p.state or '?'}" for p in s.rdma))
    if s.message:
        words.append(f"NetReason={s.message.replace(' ', '_')}")
    return " ".join(words)


def net_show(nodes: Sequence[api_pb2.NodeInfo]) -> str:
    """lingjun net show: per node its profile's state, then desired vs live per interface."""
    out = []
    for n in nodes:
        s = n.net_status if n.HasField("net_status") else None
        if s is None:
            out.append(f"{n.name}: no network report\n")
            continue
        head = f"{n.name}: profile {s.profile or '(none)'} {s.state}"
        out.append(head + (f": {s.message}" if s.message else "") + "\n")
        if s.interfaces:
            rows = [("INTERFACE", "DESIRED", "LIVE", "OK")] + [
                (i.name, i.desired, i.live, "yes" if i.ok else "NO") for i in s.interfaces]
            w = [max(len(r[k]) for r in rows) for k in range(3)]
            out.extend(f"  {r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]}\n" for r in rows)
        for u in s.uplinks:
            out.append(f"  uplink {u.name}: on its {u.active}\n")
        for p in s.rdma:
            out.append(f"  rdma {p.device} port {p.port}: {p.state} {p.phys_state} {p.link_layer} "
                       f"{p.rate} netdev {p.netdev or '-'}\n")
    return "".join(out)


# --- partitions: scontrol show partition -----------------------------------------


def _limit(v: int, none: str = "UNLIMITED") -> str:
    return none if v < 0 else str(v)


def scontrol_show_partition(parts: Sequence[api_pb2.PartitionInfo], oneliner: bool = False) -> str:
    out = []
    for p in parts:
        max_time = slurm.format_time_limit(p.max_time_min, "scontrol")
        def_time = "NONE" if p.default_time_min < 0 else slurm.format_time_limit(p.default_time_min, "scontrol")
        tres = [f"cpu={p.total_cpus}"]
        if p.total_memory_mb:
            tres.append(f"mem={p.total_memory_mb}M")
        tres += [f"node={p.total_nodes}", f"billing={p.total_cpus}"]
        lines = [
            f"PartitionName={p.name}",
            "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL",
            f"AllocNodes=ALL Default={'YES' if p.default else 'NO'} QoS=N/A",
            f"DefaultTime={def_time} DisableRootJobs=NO ExclusiveUser=NO "
            f"GraceTime={p.grace_time_s} Hidden=NO",
            f"MaxNodes={_limit(p.max_nodes)} MaxTime={max_time} MinNodes={p.min_nodes} "
            "LLN=NO MaxCPUsPerNode=UNLIMITED",
            f"Nodes={slurm.compress_hostlist(p.node_names) or '(null)'}",
            f"PriorityJobFactor={_job_factor(p)} PriorityTier={p.priority_tier or 1} RootOnly=NO ReqResv=NO "
            "OverSubscribe=NO",
            f"OverTimeLimit=NONE PreemptMode={p.preempt_mode or 'OFF'}",
            f"State={p.state or 'UP'} TotalCPUs={p.total_cpus} TotalNodes={p.total_nodes} "
            "SelectTypeParameters=NONE",
            "JobDefaults=(null)",
            "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
            f"TRES={','.join(tres)}",
        ]
        if oneliner:
            out.append(" ".join(lines) + "\n")
        else:
            out.append(lines[0] + "\n" + "".join(f"   {l}\n" for l in lines[1:]) + "\n")
    return "".join(out)


# The order scontrol show config prints its keys in (Slurm 22.05); others follow sorted.
SLURM_CONFIG_ORDER = (
    "AccountingStorageBackupHost", "AccountingStorageEnforce", "AccountingStorageHost",
    "AccountingStorageExternalHost", "AccountingStorageParameters", "AccountingStoragePort",
    "AccountingStorageTRES", "AccountingStorageType", "AccountingStorageUser",
    "AccountingStoreFlags", "AcctGatherEnergyType", "AcctGatherFilesystemType",
    "AcctGatherInterconnectType", "AcctGatherNodeFreq", "AcctGatherProfileType",
    "AllowSpecResourcesUsage", "AuthAltTypes", "AuthAltParameters", "AuthInfo", "AuthType",
    "BatchStartTimeout", "BcastExclude", "BcastParameters", "BOOT_TIME", "BurstBufferType",
    "CliFilterPlugins", "ClusterName", "CommunicationParameters", "CompleteWait",
    "CoreSpecPlugin", "CpuFreqDef", "CpuFreqGovernors", "CredType", "DebugFlags",
    "DefMemPerNode", "DependencyParameters", "DisableRootJobs", "EioTimeout",
    "EnforcePartLimits", "Epilog", "EpilogMsgTime", "EpilogSlurmctld", "ExtSensorsType",
    "ExtSensorsFreq", "FederationParameters", "FirstJobId", "GetEnvTimeout", "GresTypes",
    "GpuFreqDef", "GroupUpdateForce", "GroupUpdateTime", "HASH_VAL", "HealthCheckInterval",
    "HealthCheckNodeState", "HealthCheckProgram", "InactiveLimit", "InteractiveStepOptions",
    "JobAcctGatherFrequency", "JobAcctGatherType", "JobAcctGatherParams", "JobCompHost",
    "JobCompLoc", "JobCompPort", "JobCompType", "JobCompUser", "JobContainerType",
    "JobCredentialPrivateKey", "JobCredentialPublicCertificate", "JobDefaults",
    "JobFileAppend", "JobRequeue", "JobSubmitPlugins", "KillOnBadExit", "KillWait",
    "LaunchParameters", "LaunchType", "Licenses", "LogTimeFormat", "MailDomain", "MailProg",
    "MaxArraySize", "MaxDBDMsgs", "MaxJobCount", "MaxJobId", "MaxMemPerNode", "MaxNodeCount",
    "MaxStepCount", "MaxTasksPerNode", "MCSPlugin", "MCSParameters", "MessageTimeout",
    "MinJobAge", "MpiDefault", "MpiParams", "MULTIPLE_SLURMD", "NEXT_JOB_ID",
    "NodeFeaturesPlugins", "OverTimeLimit", "PluginDir", "PlugStackConfig", "PowerParameters",
    "PowerPlugin", "PreemptMode", "PreemptType", "PreemptExemptTime", "PrEpParameters",
    "PrEpPlugins", "PriorityParameters", "PrioritySiteFactorParameters",
    "PrioritySiteFactorPlugin", "PriorityDecayHalfLife", "PriorityCalcPeriod",
    "PriorityFavorSmall", "PriorityFlags", "PriorityMaxAge", "PriorityUsageResetPeriod",
    "PriorityType", "PriorityWeightAge", "PriorityWeightAssoc", "PriorityWeightFairShare",
    "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityWeightQOS",
    "PriorityWeightTRES", "PrivateData", "ProctrackType", "Prolog",
    "PrologEpilogTimeout", "PrologSlurmctld", "PrologFlags", "PropagatePrioProcess",
    "PropagateResourceLimits", "PropagateResourceLimitsExcept", "RebootProgram",
    "ReconfigFlags", "RequeueExit", "RequeueExitHold", "ResumeFailProgram", "ResumeProgram",
    "ResumeRate", "ResumeTimeout", "ResvEpilog", "ResvOverRun", "ResvProlog",
    "ReturnToService", "RoutePlugin", "SchedulerParameters", "SchedulerTimeSlice",
    "SchedulerType", "ScronParameters", "SelectType", "SelectTypeParameters", "SlurmUser",
    "SlurmctldAddr", "SlurmctldDebug", "SlurmctldHost[0]", "SlurmctldLogFile", "SlurmctldPort",
    "SlurmctldSyslogDebug", "SlurmctldPrimaryOffProg", "SlurmctldPrimaryOnProg",
    "SlurmctldTimeout", "SlurmctldParameters", "SlurmdDebug", "SlurmdLogFile",
    "SlurmdParameters", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir", "SlurmdSyslogDebug",
    "SlurmdTimeout", "SlurmdUser", "SlurmSchedLogFile", "SlurmSchedLogLevel",
    "SlurmctldPidFile", "SlurmctldPlugstack", "SLURM_CONF", "SLURM_VERSION", "SrunEpilog",
    "SrunPortRange", "SrunProlog", "StateSaveLocation", "SuspendExcNodes", "SuspendExcParts",
    "SuspendProgram", "SuspendRate", "SuspendTime", "SuspendTimeout", "SwitchParameters",
    "SwitchType", "TaskEpilog", "TaskPlugin", "TaskPluginParam", "TaskProlog", "TCPTimeout",
    "TmpFS", "TopologyParam", "TopologyPlugin", "TrackWCKey", "TreeWidth", "UsePam",
    "UnkillableStepProgram", "UnkillableStepTimeout", "VSizeFactor", "WaitTime",
    "X11Parameters",
)


def scontrol_show_topology(switches) -> str:
    """scontrol show topology: one line per switch (Slurm 22.05's info_topo.c)."""
    out = []
    for s in switches:
        line = f"SwitchName={s.name} Level={s.level} LinkSpeed={s.link_speed}"
        if s.nodes:
            line += f" Nodes={s.nodes}"
        if s.switches:
            line += f" Switches={s.switches}"
        out.append(line + "\n")
    return "".join(out)
def _job_factor(part) -> int:
    """A partition's PriorityJobFactor (1 when the controller did not say)."""
    return part.priority_job_factor if part.HasField("priority_job_factor") else 1


def scontrol_show_config(settings: dict[str, str], as_of: int) -> str:
    lines = [f"Configuration data as of {slurm.format_timestamp(as_of)}"]
    rank = {k: i for i, k in enumerate(SLURM_CONFIG_ORDER)}
    for key in sorted(settings, key=lambda k: (rank.get(k, len(rank)), k.lower())):
        lines.append(f"{key:<23} = {settings[key]}")
    return "\n".join(lines) + "\n"


# --- nodes: sinfo -------------------------------------------------------------------

SINFO_DEFAULT_FORMAT = "%#P %.5a %.10l %.6D %.6t %N"
SINFO_LONG_FORMAT = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
SINFO_NODE_FORMAT = "%#N %.6D %#P %6t"
# Slurm 22.05 prints -N -l with the partition right-justified and CPUS left-justified.
SINFO_NODE_LONG_FORMAT = "%#N %.6D %.#P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
SINFO_SUMMARIZE_FORMAT = "%#P %.5a %.10l %.16F %N"
SINFO_REASON_FORMAT = "%20E %9u %19H %N"

SINFO_HEADERS = {
    "N": "NODELIST", "n": "HOSTNAMES", "o": "NODE_ADDR", "t": "STATE", "T": "STATE",
    "c": "CPUS", "m": "MEMORY", "O": "CPU_LOAD", "e": "FREE_MEM", "C": "CPUS(A/I/O/T)",
    "F": "NODES(A/I/O/T)", "P": "PARTITION", "R": "PARTITION", "a": "AVAIL",
    "l": "TIMELIMIT", "L": "DEFAULTTIME", "D": "NODES", "E": "REASON", "H": "TIMESTAMP",
    "u": "USER", "U": "USER", "f": "AVAIL_FEATURES", "b": "ACTIVE_FEATURES", "G": "GRES",
    "s": "JOB_SIZE", "h": "OVERSUBSCRIBE", "g": "GROUPS", "r": "ROOT", "z": "S:C:T",
    "d": "TMP_DISK", "w": "WEIGHT", "X": "SOCKETS", "Y": "CORES", "Z": "THREADS",
    "B": "MAX_CPUS_PER_NODE", "S": "ALLOCNODES", "V": "CLUSTER", "x": "EXTRA",
    "p": "PRIO_TIER", "k": "OVERSUBSCRIBE", "A": "NODES(A/I)", "I": "PRIO_JOB_FACTOR",
    "M": "PREEMPT_MODE", "v": "VERSION",
    # -O fields without a % letter
    "allocmem": "ALLOCMEM", "port": "PORT", "comment": "COMMENT", "gresused": "GRES_USED",
    "statecomplete": "STATECOMPLETE",
}

# sinfo -O / --Format: field name -> the key of sinfo_node_values (a % letter
# where sinfo has one). Default width 20, as squeue's -O.
SINFO_O_FIELDS = {
    "allocmem": "allocmem", "allocnodes": "S", "available": "a", "cluster": "V",
    "comment": "comment", "cores": "Y", "cpus": "c", "cpusload": "O", "cpusstate": "C",
    "defaulttime": "L", "disk": "d", "extra": "x", "features": "f", "features_act": "b",
    "freemem": "e", "gres": "G", "gresused": "gresused", "groups": "g",
    "maxcpuspernode": "B", "memory": "m", "nodeaddr": "o", "nodeai": "A", "nodeaiot": "F",
    "nodehost": "n", "nodelist": "N", "nodes": "D", "oversubscribe": "h", "partition": "P",
    "partitionname": "R", "port": "port", "preemptmode": "M", "priorityjobfactor": "I",
    "prioritytier": "p", "reason": "E", "root": "r", "size": "s", "socketcorethread": "z",
    "sockets": "X", "statecompact": "t", "statelong": "T", "statecomplete": "statecomplete",
    "threads": "Z", "time": "l", "timestamp": "H", "user": "u", "userlong": "U",
    "version": "v", "weight": "w",
}


def parse_sinfo_O(spec: str, strict: bool = True) -> list[Field]:
    """"NodeList:10,StateLong:.12" -> Fields keyed as sinfo_node_values is.

    An unknown name raises FormatError (sinfo's words are squeue's), or with
    ``strict=False`` becomes a column that prints only its suffix."""
    out = []
    for token in (t for t in spec.split(",") if t):
        name, width, right, suffix = split_O_token(token)
        key = SINFO_O_FIELDS.get(name.lower())
        if key is None:
            if strict:
                raise FormatError(f"Invalid job format specification: {name}")
            out.append(Field("(invalid)", 0, False, suffix=suffix))
            continue
        out.append(Field(key, width, right, suffix=suffix))
    return out
# Letters summed over the nodes of a row rather than part of what groups them.
_SINFO_AGGREGATE = frozenset("NnoDCFA")
# sinfo's default order puts busier states first (node state enum, descending).
_STATE_RANK = {"MIXED": 0, "ALLOCATED": 1, "COMPLETING": 2, "IDLE": 3, "DOWN": 4, "UNKNOWN": 5}
# Slurm's node state numbers, which sinfo -S t compares.
_NODE_STATE_NUMBER = {"UNKNOWN": 0, "DOWN": 1, "IDLE": 2, "ALLOCATED": 3, "MIXED": 5, "FUTURE": 6}
MIN_FIELD_SIZE = 9


def _node_other(n: api_pb2.NodeInfo) -> bool:
    return n.drain or n.state == slurm.NODE_DOWN or n.not_responding


def _sinfo_time(minutes: int) -> str:
    return "infinite" if minutes < 0 else slurm.format_time_limit(minutes)


def sinfo_node_values(n: api_pb2.NodeInfo, part: api_pb2.PartitionInfo | None) -> dict[str, str]:
    ts = slurm.format_timestamp
    threads = n.threads_per_core or 1
    sockets = n.sockets or 1
    cores = n.cores_per_socket or max(1, n.cpus // (sockets * threads))
    has_reason = bool(n.reason)
    pname = part.name if part else (n.partitions[0] if n.partitions else "")
    return {
        "t": slurm.node_state_short(n.state, n.drain, n.not_responding, n.completing),
        "T": slurm.node_state_sinfo_long(n.state, n.drain, n.not_responding, n.completing),
        "c": str(n.cpus), "m": str(n.real_memory_mb), "O": f"{n.cpu_load:.2f}",
        "e": str(n.free_memory_mb),
        "P": pname + ("*" if part and part.default else ""), "R": pname,
        "a": (part.state or "UP").lower()[:5].replace("inact", "inact") if part else "up",
        "l": _sinfo_time(part.max_time_min) if part else "infinite",
        "L": "n/a" if not part or part.default_time_min < 0 else _sinfo_time(part.default_time_min),
        "E": n.reason if has_reason else "none",
        "H": ts(n.reason_time) if has_reason else "Unknown",
        "u": (n.reason_user or "root") if has_reason else "Unknown",
        "U": (n.reason_user or "root") if has_reason else "Unknown",
        "f": ",".join(n.features) or "(null)", "b": ",".join(n.features) or "(null)",
        "G": _node_gres(n),
        "s": _job_size(part), "h": "NO", "k": "NO", "g": "all", "r": "no",
        "z": f"{sockets}:{cores}:{threads}", "d": str(n.tmp_disk_mb), "w": str(n.weight or 1),
        "X": str(sockets), "Y": str(cores), "Z": str(threads), "B": "UNLIMITED", "S": "all",
        "V": "N/A", "x": "", "p": str(part.priority_tier if part else 1),
        "I": str(_job_factor(part)) if part else "1", "M": (part.preempt_mode or "OFF") if part else "OFF", "v": n.version or SLURM_VERSION,
        "allocmem": str(n.alloc_memory_mb), "port": node_port(n)[1], "comment": "(null)",
        "gresused": f"gpu:{n.gpus_alloc}" if n.gpus else "gpu:0",
        "statecomplete": slurm.node_state_long(n.state, n.drain, n.not_responding,
                                               n.completing).lower(),
    }


def _job_size(part: api_pb2.PartitionInfo | None) -> str:
    if not part:
        return "1-infinite"
    lo = max(1, part.min_nodes)
    hi = "infinite" if part.max_nodes < 0 else str(part.max_nodes)
    return f"{lo}-{hi}"


def _aggregate(nodes: list[api_pb2.NodeInfo], hosts: bool = True) -> dict[str, str]:
    """The letters of a group of nodes; ``hosts``: with the hostnames and addresses
    (%n, %o: ranged by python-hostlist, 5 ms of sinfo's start where nothing prints them)."""
    a = sum(n.cpus_alloc for n in nodes)
    t = sum(n.cpus for n in nodes)
    o = sum(n.cpus - n.cpus_alloc for n in nodes if _node_other(n))
    na = sum(1 for n in nodes if not _node_other(n) and (n.cpus_alloc or n.state in ("ALLOCATED", "MIXED")))
    no = sum(1 for n in nodes if _node_other(n))
    names = sorted((n.name for n in nodes), key=slurm.natural_key)
    values = {
        "N": slurm.compress_hostlist(names), "D": str(len(nodes)),
        "C": f"{a}/{t - a - o}/{o}/{t}",
        "F": f"{na}/{len(nodes) - na - no}/{no}/{len(nodes)}",
        "A": f"{na}/{len(nodes) - na - no}",
    }
    if hosts:
        values["n"] = slurm.compress_hostlist([n.hostname or n.name for n in nodes])
        values["o"] = slurm.compress_hostlist([(node_port(n)[0]) for n in nodes])
    return values


def sinfo_table(nodes: Sequence[api_pb2.NodeInfo], parts: Sequence[api_pb2.PartitionInfo],
                fmt: str = SINFO_DEFAULT_FORMAT, header: bool = True, node_oriented: bool = False,
                reasons_only: bool = False, partitions: Sequence[str] = (),
                fields_O: list[Field] | None = None,
                order_rows: Callable[[list[dict]], list[dict]] | None = None) -> str:
    """sinfo: one row per group of nodes that print the same (or per node with -N).
    ``fields_O`` (from parse_sinfo_O) replaces ``fmt`` for -O; ``order_rows``
    (sinfo -S) reorders the rows, which carry "_part_index", "_state" and
    "_reason_time" besides their letters."""
    fields, trailer = (fields_O, "") if fields_O is not None else parse_format(fmt)
    letters = {f.letter for f in fields}
    # %n and %o only where printed or maybe sorted on (-S)
    hosts = bool(letters & {"n", "o"}) or order_rows is not None
    by_part = bool(letters & set("PRalLshgkpSBIM")) or node_oriented
    part_by_name = {p.name: p for p in parts}
    order = [p.name for p in parts]
    if partitions:
        order = [p for p in order if p in partitions]
    node_list = sorted(nodes, key=lambda n: slurm.natural_key(n.name))
    if reasons_only:
        node_list = [n for n in node_list if n.reason or _node_other(n)]

    members: list[tuple[api_pb2.NodeInfo, api_pb2.PartitionInfo | None]] = []
    if by_part:
        for pname in order:
            for n in node_list:
                if pname in n.partitions:
                    members.append((n, part_by_name[pname]))
    else:
        wanted = set(order)
        for n in node_list:
            if not partitions or wanted & set(n.partitions):
                members.append((n, None))

    rows: list[dict[str, str]] = []
    def hidden(n: api_pb2.NodeInfo, p: api_pb2.PartitionInfo | None) -> dict:
        return {"_part_index": order.index(p.name) if p else 0,
                "_state": _NODE_STATE_NUMBER.get(n.state, 4), "_reason_time": n.reason_time}

    if node_oriented:
        for n, p in members:
            v = sinfo_node_values(n, p)
            v.update(_aggregate([n], hosts))
            v.update(hidden(n, p))
            rows.append(v)
    else:
        groups: dict[tuple, list] = {}
        keys_in_order = []
        for n, p in members:
            v = sinfo_node_values(n, p)
            key = (p.name if p else "",) + tuple(v.get(l, "") for l in sorted(letters - _SINFO_AGGREGATE))
            if key not in groups:
                v.update(hidden(n, p))
                groups[key] = [v, [], order.index(p.name) if p else 0,
                               _STATE_RANK.get(n.state, 9) + (10 if _node_other(n) else 0)]
                keys_in_order.append(key)
            groups[key][1].append(n)
        ordered = sorted(keys_in_order, key=lambda k: (groups[k][2], groups[k][3]))
        for key in ordered:
            v, ns, _, _ = groups[key]
            v = dict(v)
            v.update(_aggregate(ns, hosts))
            rows.append(v)

    if order_rows is not None:
        rows = order_rows(rows)
    widths = {}
    for f in fields:
        if f.computed:
            longest = max((len(r.get(f.letter, "")) for r in rows), default=0)
            widths[f.letter] = max(MIN_FIELD_SIZE, longest)
    return render_rows(fields, trailer, rows, SINFO_HEADERS if header else None, widths)


# --- accounting: sacct ---------------------------------------------------------------

def _sacct_job_exit(job) -> str:
    """The allocation row's ExitCode: Slurm's accounting keeps the script's exit
    status but not the signal it sent itself when it cancelled or timed the job
    out (golden sacct_cancelled_running / sacct_timeout: job 0:0, batch 0:15),
    while scontrol still shows 0:15."""
    if job.state in ("CANCELLED", "TIMEOUT") and not job.exit_code:
        return slurm.format_exit_code(0, 0)
    return slurm.format_exit_code(job.exit_code, job.exit_signal)


SACCT_DEFAULT_FIELDS = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
SACCT_BRIEF_FIELDS = "JobID,State,ExitCode"

# name -> default width; negative = left-justified (sacct's fields[] table)
SACCT_WIDTHS = {
    "account": 10, "alloccpus": 10, "allocnodes": 10, "alloctres": -10, "cluster": 10,
    "comment": 14, "cputime": 10, "cputimeraw": 10, "derivedexitcode": 15, "elapsed": 10,
    "elapsedraw": 10, "eligible": 19, "end": 19, "exitcode": 8, "gid": 6, "group": 9,
    "jobid": -12, "jobidraw": -12, "jobname": 10, "maxrss": 10, "maxvmsize": 10,
    "ncpus": 10, "nnodes": 8, "nodelist": -15, "ntasks": 8, "partition": 10,
    "priority": 10, "qos": 10, "reason": 20, "reqcpus": 8, "reqmem": 10, "reqnodes": 8,
    "reqtres": -10, "restarts": 8, "start": 19, "state": 10, "submit": 19,
    "submitline": -20, "timelimit": 10, "timelimitraw": 10, "uid": 6, "user": 9,
    "workdir": -20, "stdout": -20, "stderr": -20, "stdin": -20, "batchhost": 10,
    "flags": 6, "suspended": 10, "totalcpu": 10, "usercpu": 10, "systemcpu": 10,
    "planned": 10, "reserved": 10, "averss": 10, "maxrssnode": 10, "maxrsstask": 10,
    "avecpu": 10, "mincpu": 10, "reqcpufreq": 13,
}
SACCT_NAMES = {
    "account": "Account", "alloccpus": "AllocCPUS", "allocnodes": "AllocNodes",
    "alloctres": "AllocTRES", "cluster": "Cluster", "comment": "Comment",
    "cputime": "CPUTime", "cputimeraw": "CPUTimeRAW", "derivedexitcode": "DerivedExitCode",
    "elapsed": "Elapsed", "elapsedraw": "ElapsedRaw", "eligible": "Eligible", "end": "End",
    "exitcode": "ExitCode", "gid": "GID", "group": "Group", "jobid": "JobID",
    "jobidraw": "JobIDRaw", "jobname": "JobName", "maxrss": "MaxRSS", "maxvmsize": "MaxVMSize",
    "ncpus": "NCPUS", "nnodes": "NNodes", "nodelist": "NodeList", "ntasks": "NTasks",
    "partition": "Partition", "priority": "Priority", "qos": "QOS", "reason": "Reason",
    "reqcpus": "ReqCPUS", "reqmem": "ReqMem", "reqnodes": "ReqNodes", "reqtres": "ReqTRES",
    "restarts": "Restarts", "start": "Start", "state": "State", "submit": "Submit",
    "submitline": "SubmitLine", "timelimit": "Timelimit", "timelimitraw": "TimelimitRaw",
    "uid": "UID", "user": "User", "workdir": "WorkDir", "stdout": "StdOut", "stderr": "StdErr",
    "stdin": "StdIn", "batchhost": "BatchHost", "flags": "Flags", "suspended": "Suspended",
    "totalcpu": "TotalCPU", "usercpu": "UserCPU", "systemcpu": "SystemCPU",
    "planned": "Planned", "reserved": "Reserved", "averss": "AveRSS",
    "maxrssnode": "MaxRSSNode", "maxrsstask": "MaxRSSTask", "avecpu": "AveCPU",
    "mincpu": "MinCPU", "reqcpufreq": "ReqCPUFreq",
}


# The step statistics sacct -l shows that no Lingjun agent gathers (virtual
# memory, pages, disk I/O, energy, CPU frequency): each reads as Slurm prints
# an unmeasured figure on a step that has statistics, blank on the allocation.
# name -> (header, default width, kind): kind "size" -> "0", "node" -> the
# step's first node, "task" -> "0", "freq" -> "Unknown", "num" -> "0".
_UNGATHERED = {
    "maxvmsize": ("MaxVMSize", 10, "size"), "maxvmsizenode": ("MaxVMSizeNode", 13, "node"),
    "maxvmsizetask": ("MaxVMSizeTask", 13, "task"), "avevmsize": ("AveVMSize", 10, "size"),
    "maxpages": ("MaxPages", 8, "size"), "maxpagesnode": ("MaxPagesNode", 12, "node"),
    "maxpagestask": ("MaxPagesTask", 12, "task"), "avepages": ("AvePages", 10, "size"),
    "mincpunode": ("MinCPUNode", 10, "node"), "mincputask": ("MinCPUTask", 10, "task"),
    "avecpufreq": ("AveCPUFreq", 12, "num"), "reqcpufreqmin": ("ReqCPUFreqMin", 13, "freq"),
    "reqcpufreqmax": ("ReqCPUFreqMax", 13, "freq"), "reqcpufreqgov": ("ReqCPUFreqGov", 13, "freq"),
    "consumedenergy": ("ConsumedEnergy", 14, "num"),
    "consumedenergyraw": ("ConsumedEnergyRaw", 17, "num"),
    "maxdiskread": ("MaxDiskRead", 13, "size"), "maxdiskreadnode": ("MaxDiskReadNode", 15, "node"),
    "maxdiskreadtask": ("MaxDiskReadTask", 15, "task"), "avediskread": ("AveDiskRead", 14, "size"),
    "maxdiskwrite": ("MaxDiskWrite", 14, "size"),
    "maxdiskwritenode": ("MaxDiskWriteNode", 16, "node"),
    "maxdiskwritetask": ("MaxDiskWriteTask", 16, "task"),
    "avediskwrite": ("AveDiskWrite", 15, "size"),
}
# TRES usage strings, built from what we do gather (CPU time, RSS).
_TRES_USAGE = {
    "tresusageinave": ("TRESUsageInAve", -14), "tresusageinmax": ("TRESUsageInMax", -14),
    "tresusageinmaxnode": ("TRESUsageInMaxNode", -18),
    "tresusageinmaxtask": ("TRESUsageInMaxTask", -18),
    "tresusageinmin": ("TRESUsageInMin", -14), "tresusageinminnode": ("TRESUsageInMinNode", -18),
    "tresusageinmintask": ("TRESUsageInMinTask", -18), "tresusageintot": ("TRESUsageInTot", -14),
    "tresusageoutave": ("TRESUsageOutAve", -15), "tresusageoutmax": ("TRESUsageOutMax", -15),
    "tresusageoutmaxnode": ("TRESUsageOutMaxNode", -19),
    "tresusageoutmaxtask": ("TRESUsageOutMaxTask", -19),
    "tresusageoutmin": ("TRESUsageOutMin", -15),
    "tresusageoutminnode": ("TRESUsageOutMinNode", -19),
    "tresusageoutmintask": ("TRESUsageOutMinTask", -19), "tresusageouttot": ("TRESUsageOutTot", -15),
}
for _k, (_name, _w, _kind) in _UNGATHERED.items():
    SACCT_WIDTHS[_k], SACCT_NAMES[_k] = _w, _name
for _k, (_name, _w) in _TRES_USAGE.items():
    SACCT_WIDTHS[_k], SACCT_NAMES[_k] = _w, _name

# sacct -l (LONG_FIELDS of Slurm 22.05's sacct.h), abbreviations resolved.
SACCT_LONG_FIELDS = (
    "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,"
    "MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,"
    "MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,AllocCPUS,Elapsed,State,ExitCode,"
    "AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ReqMem,ConsumedEnergy,"
    "MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,"
    "MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,ReqTRES,AllocTRES,TRESUsageInAve,"
    "TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,TRESUsageInMin,"
    "TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutMax,"
    "TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutAve,TRESUsageOutTot")


def _sacct_key(name: str) -> str | None:
    """A field name as sacct matches it: exactly, else as the start of a field
    name (sacct compares only as many letters as given: "jobn" is JobName),
    the first in alphabetical order winning, as in sacct's fields[] table."""
    key = name.lower()
    if key in SACCT_WIDTHS:
        return key
    for cand in sorted(SACCT_WIDTHS):
        if key and cand.startswith(key):
            return cand
    return None


def parse_sacct_fields(spec: str) -> list[tuple[str, int]]:
    """"JobID,JobName%30" -> [("jobid", -12), ("jobname", 30)]. FormatError when unknown."""
    out = []
    for token in (t.strip() for t in spec.split(",") if t.strip()):
        name, _, width = token.partition("%")
        key = _sacct_key(name)
        if key is None:
            raise FormatError(f'Invalid field requested: "{name}"')
        w = SACCT_WIDTHS[key]
        if width:
            try:
                n = int(width)
            except ValueError:
                raise FormatError(f'Invalid field requested: "{token}"') from None
            w = -n if w < 0 else n
        out.append((key, w))
    return out


def _sacct_state(state: str, cancelled_by: str) -> str:
    if state == slurm.CANCELLED and cancelled_by:
        return f"CANCELLED by {cancelled_by}"
    return state


def _sacct_start(job: api_pb2.JobInfo) -> str:
    """Start as sacct shows it: "Unknown" while the job may still start, "None"
    once it ended without ever starting (cancelled while pending: the controller
    records it started and ended then, as slurmctld does, but Slurm's
    accounting shows no start), else when it started."""
    if job.state in slurm.FINISHED_STATES and not job.nodes:
        return "None"
    return slurm.format_timestamp(job.start_time)


def _run_submit_time(job: api_pb2.JobInfo) -> int:
    """A requeued (or restarted) job's run is submitted again when the run
    before it ended, as in Slurm's accounting; the first run at submission."""
    return job.attempts[-1].end_time if job.attempts else job.submit_time


def _elapsed(start: int, end: int, state: str, now: int) -> int:
    if not start:
        return 0
    if end:
        return max(0, end - start)
    if state in (slurm.RUNNING, slurm.COMPLETING):
        return max(0, now - start)
    return 0


_UNITS = "KMGTP"


def format_rss(kb: int) -> str:
    """A memory figure as sacct prints it (convert_num_unit with sacct's
    CONVERT_NUM_UNIT_EXACT): scaled up only while it divides exactly by 1024,
    so 204800 KiB reads "200M" but 205464 KiB stays "205464K"; 0 is "0"."""
    if kb <= 0:
        return "0"
    unit = 0
    while kb % 1024 == 0 and unit < len(_UNITS) - 1:
        kb //= 1024
        unit += 1
    return f"{kb}{_UNITS[unit]}"


def format_cpu_time(ms: int) -> str:
    """sacct's TotalCPU/UserCPU/SystemCPU (_elapsed_time): [D-]HH:MM:SS once
    an hour is reached, else MM:SS.mmm, or 00:MM:SS without a fraction."""
    secs, msec = divmod(max(0, ms), 1000)
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    if hours:
        return f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if msec:
        return f"{minutes:02d}:{seconds:02d}.{msec:03d}"
    return f"00:{minutes:02d}:{seconds:02d}"


_STAT_KEYS = ("maxrss", "averss", "maxrssnode", "maxrsstask", "avecpu", "mincpu",
              *_UNGATHERED, *_TRES_USAGE)


def _step_usage(st: api_pb2.StepInfo, el: int) -> dict[str, str]:
    """The usage columns of a step row. A step that ran has statistics (0 is
    printed as "0"); one that never started has none (blank), as in Slurm."""
    if not st.start_time:
        return {k: "" for k in _STAT_KEYS}
    total = st.user_cpu_ms + st.system_cpu_ms
    per_task = total // max(1, st.num_tasks)
    first = slurm.expand_hostlist(st.nodes)[0] if st.nodes else ""
    node = st.max_rss_node or first
    cpu = slurm.format_duration(per_task // 1000)
    out = {
        "maxrss": format_rss(st.max_rss_kb), "averss": format_rss(st.ave_rss_kb),
        "maxrssnode": node, "maxrsstask": str(st.max_rss_task), "avecpu": cpu, "mincpu": cpu,
    }
    for key, (_, _, kind) in _UNGATHERED.items():
        out[key] = {"size": "0", "node": first, "task": "0", "freq": "Unknown",
                    "num": "0"}[kind]

    # GPU usage the agent sampled through NVML (Slurm 24's gres/gpumem and
    # gres/gpuutil TRES), on a step that held GPUs
    gpu = st.gpus > 0

    def tres_in(cpu_text: str, mem: str, gpumem_kb: int = 0, gpuutil: int = 0) -> str:
        g = f"gres/gpumem={format_rss(gpumem_kb)},gres/gpuutil={gpuutil}," if gpu else ""
        return f"cpu={cpu_text},energy=0,fs/disk=0,{g}mem={mem},pages=0,vmem=0"

    def same(text: str) -> str:
        names = ("cpu", "energy", "fs/disk", *(("gres/gpumem", "gres/gpuutil") if gpu else ()),
                 "mem", "pages", "vmem")
        return ",".join(f"{t}={text}" for t in names)
    out.update({
        "tresusageinave": tres_in(cpu, format_rss(st.ave_rss_kb), st.gpu_mem_ave_kb,
                                  st.gpu_util_ave),
        "tresusageinmax": tres_in(cpu, format_rss(st.max_rss_kb), st.gpu_mem_max_kb,
                                  st.gpu_util_max),
        "tresusageinmaxnode": same(node), "tresusageinmaxtask": same(str(st.max_rss_task)),
        "tresusageinmin": tres_in(cpu, format_rss(st.ave_rss_kb), st.gpu_mem_ave_kb,
                                  st.gpu_util_ave),
        "tresusageinminnode": same(first), "tresusageinmintask": same("0"),
        "tresusageintot": tres_in(slurm.format_duration(total // 1000),
                                  format_rss(st.ave_rss_kb * max(1, st.num_tasks)),
                                  st.gpu_mem_ave_kb, st.gpu_util_ave),
        "tresusageoutave": "energy=0,fs/disk=0", "tresusageoutmax": "energy=0,fs/disk=0",
        "tresusageoutmaxnode": f"energy={first},fs/disk={first}",
        "tresusageoutmaxtask": "energy=0,fs/disk=0", "tresusageoutmin": "energy=0,fs/disk=0",
        "tresusageoutminnode": f"energy={first},fs/disk={first}",
        "tresusageoutmintask": "energy=0,fs/disk=0", "tresusageouttot": "energy=0,fs/disk=0",
    })
    return out


def sacct_job_id(job: api_pb2.JobInfo) -> str:
    """sacct's JobID: "12" plain, "12_3" one array task, "12_[1-3]" the tasks that
    never started (sacct shows no %N throttle there, golden sacct_array_cancelled_task)."""
    if not job.array_job_id:
        return str(job.job_id)
    if job.array_task_str:
        return f"{job.array_job_id}_[{job.array_task_str.partition('%')[0]}]"
    return f"{job.array_job_id}_{job.array_task_id}"


def fold_unstarted_array_tasks(jobs: Sequence[api_pb2.JobInfo]) -> list[api_pb2.JobInfo]:
    """Tasks split off an array only to be cancelled before they started fold back
    into the array's never-started row, as in Slurm's accounting: after
    "scancel 13_2" and then "scancel 13", sacct shows one row 13_[1-3]."""
    metas = {j.job_id: j for j in jobs if j.array_job_id and j.array_task_str}
    folded: dict[int, set[int]] = {}
    out = []
    for j in jobs:
        if (j.array_job_id in metas and j.job_id != j.array_job_id and j.array_task_id >= 0
                and not j.nodes):
            folded.setdefault(j.array_job_id, set()).add(j.array_task_id)
            continue
        out.append(j)
    for array_id, tasks in folded.items():
        meta = metas[array_id]
        merged = type(meta)()
        merged.CopyFrom(meta)
        pending, _, throttle = meta.array_task_str.partition("%")
        merged.array_task_str = slurm.fold_indices(set(slurm.unfold_indices(pending)) | tasks)
        out[out.index(meta)] = merged
    return out


def sacct_rows(job: api_pb2.JobInfo, allocations_only: bool = False,
               now: int | None = None) -> list[dict[str, str]]:
    """The job's row and, unless -X, one row per step (ID.batch, ID.0, ...)."""
    now = now if now is not None else job.now
    ts = slurm.format_timestamp
    job_elapsed = _elapsed(job.start_time, job.end_time, job.state, now)
    req_mem = slurm.format_size_mb(job.mem_per_node_mb) if job.mem_per_node_mb > 0 else "0"
    base = {
        "account": job.account, "cluster": "", "comment": job.comment,
        "gid": str(job.gid), "group": job.group, "uid": str(job.uid), "user": job.user,
        "partition": job.partition, "priority": str(job.priority), "qos": job.qos,
        "reqcpus": str(job.num_cpus), "reqmem": req_mem, "reqnodes": str(job.num_nodes),
        "restarts": str(job.restarts), "submit": ts(_run_submit_time(job)),
        "eligible": ts(job.eligible_time),
        "timelimit": slurm.format_time_limit(job.time_limit_min, "scontrol"),
        "timelimitraw": "UNLIMITED" if job.time_limit_min < 0 else str(job.time_limit_min),
        "workdir": job.work_dir, "stdout": job.stdout_path,
        "stderr": job.stderr_path or job.stdout_path, "stdin": job.stdin_path or "/dev/null",
        "batchhost": job.batch_host, "reason": job.reason or slurm.REASON_NONE,
        "submitline": "", "flags": "", "suspended": "00:00:00", "planned": "",
        "reserved": "",
    }
    alloc_cpus = job.num_cpus if job.start_time or job.nodes else 0
    cpus = alloc_cpus or (job.num_cpus if job.state != slurm.PENDING else 0)
    row = dict(base)
    shown_id = sacct_job_id(job)
    row.update({
        "jobid": shown_id, "jobidraw": str(job.job_id), "jobname": job.name,
        "state": _sacct_state(job.state, job.cancelled_by),
        "exitcode": _sacct_job_exit(job),
        "derivedexitcode": slurm.format_exit_code(job.derived_exit_code, job.derived_exit_signal),
        "nodelist": job.nodes or "None assigned",
        "nnodes": str(job.num_nodes), "allocnodes": str(job.num_nodes if job.nodes else 0),
        "ntasks": "", "alloccpus": str(cpus), "ncpus": str(cpus),
        "alloctres": sacct_tres(cpus, _job_mem_mb(job, cpus), job.num_nodes, job_gpus(job),
                                job.gpu_type) if job.nodes else "",
        "reqtres": sacct_tres(job.num_cpus, _job_mem_mb(job, job.num_cpus), job.num_nodes,
                              job_gpus(job), job.gpu_type),
        "elapsed": slurm.format_duration(job_elapsed), "elapsedraw": str(job_elapsed),
        "cputime": slurm.format_duration(job_elapsed * cpus),
        "cputimeraw": str(job_elapsed * cpus),
        "start": _sacct_start(job), "end": ts(job.end_time),
        "maxrss": "", "maxvmsize": "",
        # the allocation's CPU time is what its steps used
        "totalcpu": format_cpu_time(sum(s.user_cpu_ms + s.system_cpu_ms for s in job.steps)),
        "usercpu": format_cpu_time(sum(s.user_cpu_ms for s in job.steps)),
        "systemcpu": format_cpu_time(sum(s.system_cpu_ms for s in job.steps)),
        "averss": "", "maxrssnode": "", "maxrsstask": "", "avecpu": "", "mincpu": "",
        "reqcpufreq": "Unknown",
    })
    rows = [row]
    if allocations_only:
        return rows
    for st in step_order(job.steps):
        el = _elapsed(st.start_time, st.end_time, st.state, now)
        r = dict(base)
        nn = len(slurm.expand_hostlist(st.nodes)) if st.nodes else 0
        r.update({
            "jobid": f"{shown_id}.{st.step_id}", "jobidraw": f"{job.job_id}.{st.step_id}",
            "jobname": st.name, "state": st.state,
            "exitcode": slurm.format_exit_code(st.exit_code, st.exit_signal),
            "derivedexitcode": "", "nodelist": st.nodes, "nnodes": str(nn),
            "allocnodes": str(nn), "ntasks": str(st.num_tasks), "alloccpus": str(st.num_cpus),
            "ncpus": str(st.num_cpus), "reqtres": "",
            "alloctres": sacct_tres(
                st.num_cpus, st.mem_mb or (max(job.mem_per_node_mb, 0) * nn), nn, st.gpus,
                job.gpu_type, billing=False) if nn else "",
            "elapsed": slurm.format_duration(el), "elapsedraw": str(el),
            "cputime": slurm.format_duration(el * st.num_cpus), "cputimeraw": str(el * st.num_cpus),
            "start": ts(st.start_time), "end": ts(st.end_time),
            "maxvmsize": "", "partition": "", "user": "", "uid": "", "group": "", "gid": "",
            # a step is submitted, eligible and started at once, as Slurm records it
            "submit": ts(st.start_time), "eligible": ts(st.start_time),
            "timelimit": "", "timelimitraw": "", "qos": "",
            "priority": "", "reqmem": req_mem, "reason": "", "restarts": "", "workdir": "",
            "stdout": "", "stderr": "", "stdin": "", "comment": "", "batchhost": "",
            "totalcpu": format_cpu_time(st.user_cpu_ms + st.system_cpu_ms),
            "usercpu": format_cpu_time(st.user_cpu_ms),
            "systemcpu": format_cpu_time(st.system_cpu_ms), "reqcpufreq": "Unknown",
        })
        r.update(_step_usage(st, el))
        rows.append(r)
    return rows


def step_order(steps: Iterable[api_pb2.StepInfo]) -> list[api_pb2.StepInfo]:
    """Steps as sacct lists them: ID.batch, ID.extern, then ID.0, ID.1, ...
    (the batch step is recorded last, when the job ends, but is listed first)."""
    def key(st: api_pb2.StepInfo) -> tuple[int, int, str]:
        special = {"batch": 0, "extern": 1, "interactive": 2}
        if st.step_id in special:
            return (special[st.step_id], 0, "")
        return (3, int(st.step_id), "") if st.step_id.isdigit() else (4, 0, st.step_id)
    return sorted(steps, key=key)


def _alloc_tres(cpus: int, mem_mb: int, nodes: int) -> str:
    """squeue's TRES_ALLOC (cpu, mem, node)."""
    parts = [f"cpu={cpus}"]
    if mem_mb > 0:
        parts.append(f"mem={mem_mb * max(1, nodes)}M")
    parts.append(f"node={max(1, nodes)}")
    return ",".join(parts)


def format_mem_mb(mb: int) -> str:
    """A TRES memory figure as sacct prints it: exact units, 2000M, 4G, 48G."""
    return format_rss(mb * 1024)


def sacct_tres(cpus: int, mem_mb: int, nodes: int, gpus: int = 0, gpu_type: str = "",
               billing: bool = True) -> str:
    """sacct's AllocTRES/ReqTRES: Slurm's TRES names in its order (by name),
    the typed GPU count before the plain one, as real sacct prints them:

    >>> sacct_tres(8, 49152, 1, gpus=1, gpu_type="a100")
    'billing=8,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=48G,node=1'
    >>> sacct_tres(1, 100, 1, billing=False)
    'cpu=1,mem=100M,node=1'

    ``mem_mb`` is the memory of all nodes together (0: none to show);
    steps carry no billing."""
    parts = [f"billing={cpus}"] if billing else []
    parts.append(f"cpu={cpus}")
    if gpus > 0:
        if gpu_type:
            parts.append(f"gres/gpu:{gpu_type}={gpus}")
        parts.append(f"gres/gpu={gpus}")
    if mem_mb > 0:
        parts.append(f"mem={format_mem_mb(mem_mb)}")
    parts.append(f"node={max(1, nodes)}")
    return ",".join(parts)


def job_gpus(job: api_pb2.JobInfo) -> int:
    """The GPUs a job holds (or asks for) on all its nodes together."""
    held = sum(len(a.gpu_ids) for a in job.node_allocs)
    return held or job.gpus or job.gpus_per_node * max(1, job.num_nodes)


def _job_mem_mb(job: api_pb2.JobInfo, cpus: int) -> int:
    if job.mem_per_cpu_mb:
        return job.mem_per_cpu_mb * cpus
    return job.mem_per_node_mb * max(1, job.num_nodes) if job.mem_per_node_mb > 0 else 0


def _sacct_cell(value: str, width: int) -> str:
    """print_fields_str: a value too wide is cut to width-1 and marked with '+'."""
    w = abs(width)
    if len(value) > w:
        value = value[:w - 1] + "+"
    return value.ljust(w) if width < 0 else value.rjust(w)


def sacct_table(jobs: Sequence[api_pb2.JobInfo], fields: str = SACCT_DEFAULT_FIELDS,
                header: bool = True, parsable: str = "", allocations_only: bool = False,
                now: int | None = None) -> str:
    """sacct. parsable: "" (columns), "parsable" (trailing '|'), "parsable2" (none)."""
    return "".join(sacct_lines(jobs, fields, header, parsable, allocations_only, now))


def sacct_lines(jobs: Sequence[api_pb2.JobInfo], fields: str = SACCT_DEFAULT_FIELDS,
                header: bool = True, parsable: str = "", allocations_only: bool = False,
                now: int | None = None) -> Iterator[str]:
    """sacct_table one line at a time (each ending in a newline), so that a
    million jobs are printed without holding every row's text at once."""
    cols = parse_sacct_fields(fields)
    end = "|" if parsable == "parsable" else ""
    if header:
        if parsable:
            yield "|".join(SACCT_NAMES[k] for k, _ in cols) + end + "\n"
        else:
            yield "".join(_sacct_cell(SACCT_NAMES[k], w) + " " for k, w in cols) + "\n"
            yield "".join("-" * abs(w) + " " for _, w in cols) + "\n"
    # an array's rows together, in task order (golden sacct_array: 12_1, 12_2, 12_3,
    # though 12_3 kept the array's id 12 and the others got later ids)
    for job in sorted(fold_unstarted_array_tasks(jobs),
                      key=lambda j: (j.array_job_id or j.job_id, j.array_task_id)):
        for r in sacct_rows(job, allocations_only, now):
            if parsable:
                yield "|".join(r.get(k, "") for k, _ in cols) + end + "\n"
            else:
                yield "".join(_sacct_cell(r.get(k, ""), w) + " " for k, w in cols) + "\n"
