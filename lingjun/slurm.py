"""Slurm's vocabulary, in one place: job and node states, pending reasons,
time and size parsing, hostlist expressions.

Every command and the controller import their words from here, so that
``squeue``, ``scontrol`` and ``sacct`` always agree, as Slurm's do.
"""
from __future__ import annotations

import math
import os
import re
import sys
import time
from collections import namedtuple
from functools import lru_cache


# --- job states (squeue.1 JOB STATE CODES) --------------------------------
PENDING = "PENDING"
RUNNING = "RUNNING"
COMPLETING = "COMPLETING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
TIMEOUT = "TIMEOUT"
NODE_FAIL = "NODE_FAIL"
PREEMPTED = "PREEMPTED"
OUT_OF_MEMORY = "OUT_OF_MEMORY"
BOOT_FAIL = "BOOT_FAIL"
DEADLINE = "DEADLINE"

ACTIVE_STATES = frozenset({PENDING, RUNNING, COMPLETING})
FINISHED_STATES = frozenset({COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL,
                             PREEMPTED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE})

# --- pending / end reasons (job_reason_string()) ---------------------------
REASON_NONE = "None"
REASON_PRIORITY = "Priority"
REASON_RESOURCES = "Resources"
REASON_DEPENDENCY = "Dependency"
REASON_BEGIN_TIME = "BeginTime"
REASON_HELD_USER = "JobHeldUser"
REASON_HELD_ADMIN = "JobHeldAdmin"
REASON_PARTITION_NODE_LIMIT = "PartitionNodeLimit"
REASON_PARTITION_TIME_LIMIT = "PartitionTimeLimit"
REASON_PARTITION_DOWN = "PartitionDown"
REASON_PARTITION_INACTIVE = "PartitionInactive"
REASON_PARTITION_CONFIG = "PartitionConfig"
REASON_NODE_DOWN = "NodeDown"
REASON_TIME_LIMIT = "TimeLimit"
REASON_NON_ZERO_EXIT = "NonZeroExitCode"
REASON_JOB_LAUNCH_FAILURE = "JobLaunchFailure"
REASON_OUT_OF_MEMORY = "OutOfMemory"
REASON_BAD_CONSTRAINTS = "BadConstraints"
# A -w node is down, drained or not responding; Slurm appends the nodes:
# "ReqNodeNotAvail, UnavailableNodes:node3" (see req_node_not_avail()).
REASON_REQ_NODE_NOT_AVAIL = "ReqNodeNotAvail"


def req_node_not_avail(nodes) -> str:
    """The reason text Slurm shows for a job whose -w nodes cannot be used."""
    return f"{REASON_REQ_NODE_NOT_AVAIL}, UnavailableNodes:{compress_hostlist(sorted(nodes))}"
REASON_ARRAY_TASK_LIMIT = "JobArrayTaskLimit"
# QOS and association limits a running job counts against (job_reason_string()):
# the job waits for usage to drop and blocks no one.
REASON_QOS_GRP_CPU = "QOSGrpCpuLimit"
REASON_QOS_GRP_NODE = "QOSGrpNodeLimit"
REASON_QOS_GRP_GRES = "QOSGrpGRES"
REASON_QOS_MAX_CPU_PER_USER = "QOSMaxCpuPerUserLimit"
REASON_QOS_MAX_NODE_PER_USER = "QOSMaxNodePerUserLimit"
REASON_QOS_MAX_GRES_PER_USER = "QOSMaxGRESPerUser"
REASON_QOS_MAX_JOBS_PER_USER = "QOSMaxJobsPerUserLimit"
REASON_ASSOC_GRP_CPU = "AssocGrpCpuLimit"
REASON_ASSOC_GRP_NODE = "AssocGrpNodeLimit"
REASON_ASSOC_GRP_GRES = "AssocGrpGRES"
REASON_ASSOC_GRP_JOBS = "AssocGrpJobsLimit"
REASON_ASSOC_MAX_JOBS = "AssocMaxJobsLimit"
# Not Slurm's: the Reason of a RUNNING job that started on quota lent by other
# accounts ([scheduler] lend_idle_quota, lingjund/sched/lending.py). It may be
# preempted (requeued) whenever a job within its own limits needs what it holds.
REASON_BORROWED = "Borrowed"

# --- node states --------------------------------------------------------------
NODE_IDLE = "IDLE"
NODE_MIXED = "MIXED"
NODE_ALLOCATED = "ALLOCATED"
NODE_DOWN = "DOWN"
NODE_UNKNOWN = "UNKNOWN"

# --- more job states and their short codes (squeue %t) -----------------------
CONFIGURING = "CONFIGURING"
SUSPENDED = "SUSPENDED"
REQUEUED = "REQUEUED"
RESIZING = "RESIZING"
SIGNALING = "SIGNALING"
STAGE_OUT = "STAGE_OUT"
STOPPED = "STOPPED"

JOB_STATE_CODES: dict[str, str] = {
    PENDING: "PD", RUNNING: "R", COMPLETING: "CG", COMPLETED: "CD",
    FAILED: "F", CANCELLED: "CA", TIMEOUT: "TO", NODE_FAIL: "NF",
    PREEMPTED: "PR", OUT_OF_MEMORY: "OOM", BOOT_FAIL: "BF", DEADLINE: "DL",
    CONFIGURING: "CF", SUSPENDED: "S", REQUEUED: "RQ", RESIZING: "RS",
    SIGNALING: "SI", STAGE_OUT: "SO", STOPPED: "ST",
    "REQUEUE_HOLD": "RH", "REQUEUE_FED": "RF", "RESV_DEL_HOLD": "RD",
    "REVOKED": "RV", "SPECIAL_EXIT": "SE",
}
JOB_STATE_BY_CODE: dict[str, str] = {c: s for s, c in JOB_STATE_CODES.items()}
# The signal a step or script the OOM killer hit is recorded with (Slurm's
# SIG_OOM 253, which sacct shows as 0:125; srun exits 253).
OOM_SIGNAL = 125
# squeue without -t shows these (squeue.1: "pending, running, completing,
# configuring, suspended" and the signalling/stage-out flags).
DEFAULT_SQUEUE_STATES = frozenset({PENDING, RUNNING, COMPLETING, CONFIGURING,
                                   SUSPENDED, REQUEUED, RESIZING, SIGNALING,
                                   STAGE_OUT, STOPPED})


def job_state_code(state: str) -> str:
    """PENDING -> PD; an unknown state keeps its first two letters."""
    return JOB_STATE_CODES.get(state.upper(), state[:2].upper())


def squeue_order_key(job) -> tuple:
    """squeue's default order "P,t,-p" for a JobInfo: partition, state name,
    priority descending; ties by job id, an array task by its array's id and
    then its index. The command sorts by it, and the controller when asked."""
    return (job.partition, job.state, -job.priority, job.array_job_id or job.job_id,
            job.array_task_id)


def parse_job_state(word: str) -> str:
    """'pd', 'PENDING', 'pending' -> PENDING. ValueError when unknown."""
    w = word.strip().upper()
    if w in JOB_STATE_CODES:
        return w
    if w in JOB_STATE_BY_CODE:
        return JOB_STATE_BY_CODE[w]
    raise ValueError(f"Invalid job state specified: {word}")


# --- node state formatting ---------------------------------------------------
NODE_COMPLETING = "COMPLETING"
NODE_FUTURE = "FUTURE"

_NODE_SHORT = {
    NODE_IDLE: "idle", NODE_MIXED: "mix", NODE_ALLOCATED: "alloc",
    NODE_DOWN: "down", NODE_UNKNOWN: "unk", NODE_COMPLETING: "comp",
    NODE_FUTURE: "futr",
}


def node_state_long(state: str, drain: bool = False, not_responding: bool = False,
                    completing: bool = False) -> str:
    """scontrol's State= word (node_state_string_complete): IDLE, IDLE+DRAIN,
    ALLOCATED+COMPLETING, DOWN+DRAIN+NOT_RESPONDING.

    The base state comes first, then each flag in Slurm's (alphabetical) order.
    """
    out = (state or NODE_UNKNOWN).upper()
    if completing and out != NODE_COMPLETING:
        out += "+COMPLETING"
    if drain:
        out += "+DRAIN"
    if not_responding:
        out += "+NOT_RESPONDING"
    return out


# sinfo's two vocabularies for the same node states: %T / -l and %t.
_NODE_LONG = {
    NODE_IDLE: "idle", NODE_MIXED: "mixed", NODE_ALLOCATED: "allocated", NODE_DOWN: "down",
    NODE_UNKNOWN: "unknown", NODE_FUTURE: "future",
    "draining": "draining", "drained": "drained", "completing": "completing",
}
_NODE_SHORT_FLAGS = {"draining": "drng", "drained": "drain", "completing": "comp"}


def _node_word(words: dict[str, str], fallback, state: str, drain: bool,
               not_responding: bool, completing: bool) -> str:
    """DRAIN on a node still running jobs reads 'draining'; on an idle (or
    down) node 'drained', as node_state_string() in slurm_protocol_defs.c."""
    base = (state or NODE_UNKNOWN).upper()
    if drain:
        key = "draining" if base in (NODE_ALLOCATED, NODE_MIXED) or completing else "drained"
    elif completing:
        key = "completing"
    else:
        key = base
    return words.get(key, fallback(base)) + ("*" if not_responding else "")


def node_state_sinfo_long(state: str, drain: bool = False, not_responding: bool = False,
                          completing: bool = False) -> str:
    """sinfo %T / -l word: idle, allocated, mixed, down, draining, drained, completing."""
    return _node_word(_NODE_LONG, str.lower, state, drain, not_responding, completing)


def node_state_short(state: str, drain: bool = False, not_responding: bool = False,
                     completing: bool = False) -> str:
    """sinfo %t word: idle alloc mix down drain drng comp unk, '*' when not responding."""
    return _node_word({**_NODE_SHORT, **_NODE_SHORT_FLAGS}, lambda b: b.lower()[:5],
                      state, drain, not_responding, completing)


def node_state_drain_word(state: str, drain: bool, completing: bool = False) -> str:
    """DRAINING / DRAINED / the plain base state, as sinfo -R and scontrol flags say."""
    if not drain:
        return (state or NODE_UNKNOWN).upper()
    busy = (state or "").upper() in (NODE_ALLOCATED, NODE_MIXED) or completing
    return "DRAINING" if busy else "DRAINED"


# the QOS of a job that names none, and of a fresh cluster (slurmdbd's)
DEFAULT_QOS = "normal"


# --- time limits -------------------------------------------------------------
UNLIMITED = -1          # time limits in minutes; also "infinite"

_TIME_RE = r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$"


def parse_time_limit(s: str) -> int:
    """Slurm's time_str2mins: a time limit in whole minutes, -1 for UNLIMITED.

    min | min:sec | h:m:s | d-h | d-h:m | d-h:m:s; seconds round up to the
    next minute (1:30 -> 2). "0" is 0 (sbatch: no limit). ValueError on
    anything else, e.g. "abc", "1:2:3:4", "-5".

    >>> parse_time_limit("1-02:03:04")
    1564
    """
    secs = parse_time_seconds(s)
    if secs < 0:
        return UNLIMITED
    return (secs + 59) // 60


def parse_time_seconds(s: str) -> int:
    """Like parse_time_limit but in seconds (time_str2secs); -1 for UNLIMITED."""
    t = str(s).strip()
    if t.lower() in ("unlimited", "infinite", "-1"):
        return UNLIMITED
    m = re.match(_TIME_RE, t)
    if not m:
        raise ValueError(f"invalid time specification: {s!r}")
    days, a, b, c = m.groups()
    if days is not None:
        # d-h, d-h:m, d-h:m:s
        d, h = int(days), int(a)
        mi = int(b) if b is not None else 0
        se = int(c) if c is not None else 0
        return ((d * 24 + h) * 60 + mi) * 60 + se
    if c is not None:                       # h:m:s
        return (int(a) * 60 + int(b)) * 60 + int(c)
    if b is not None:                       # min:sec
        return int(a) * 60 + int(b)
    return int(a) * 60                      # min


def format_time_limit(minutes: int, style: str = "squeue") -> str:
    """A time limit in minutes as Slurm prints it.

    style "squeue" (squeue %l, sinfo TIMELIMIT; secs2time_str): 1 -> "1:00",
    60 -> "1:00:00", 1440 -> "1-00:00:00". style "scontrol" (scontrol, sacct
    Timelimit; mins2time_str): 1 -> "00:01:00". -1 -> "UNLIMITED" in both.
    """
    if minutes is None or minutes < 0:
        return "UNLIMITED"
    if style == "scontrol":
        return format_duration(minutes * 60)
    return format_elapsed(minutes * 60)


def format_elapsed(seconds: int, style: str = "squeue") -> str:
    """A duration as squeue TIME prints it: "0:00", "1:23", "1:02:03", "2-01:02:03".

    style "sacct" (also scontrol RunTime): "00:00:03", "2-01:02:03".
    """
    if style in ("sacct", "scontrol"):
        return format_duration(seconds)
    days, hours, mins, secs = _split_seconds(seconds)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{mins:02d}:{secs:02d}"
    return f"{mins}:{secs:02d}"


def _split_seconds(seconds: int) -> tuple[int, int, int, int]:
    """(days, hours, minutes, seconds) of a non-negative duration."""
    days, rem = divmod(max(0, int(seconds)), 86400)
    hours, rem = divmod(rem, 3600)
    return (days, hours, *divmod(rem, 60))


def format_duration(seconds: int) -> str:
    """sacct Elapsed / scontrol RunTime style: "00:00:03", "1-00:00:00"."""
    days, hours, mins, secs = _split_seconds(seconds)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    return f"{hours:02d}:{mins:02d}:{secs:02d}"


# --- timestamps ---------------------------------------------------------------
STANDARD_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


def format_timestamp(ts: int | float | None, unknown: str = "Unknown") -> str:
    """Unix seconds in local time as every command prints a date (Slurm's
    slurm_make_time_str); 0 -> ``unknown``.

    SLURM_TIME_FORMAT chooses the form, as in Slurm: unset, "" or "standard"
    is ISO ("2026-12-02T10:04:03"); "relative" is short and relative to today
    ("10:04:03" today, "Ystday 10:04", "Tomorr 10:04", "Wed 10:04" within the
    week to come, "9 Dec 10:04" within a year, "9 Dec 2027" beyond); any
    other text holding a "%" (and under 32 characters) is a strftime format.
    Anything else is refused once, on stderr, and the standard form is used.
    """
    if not ts or ts <= 0:
        return unknown
    when = time.localtime(ts)
    fmt = _time_format(os.environ.get("SLURM_TIME_FORMAT", ""))
    if fmt is None:
        fmt = _relative_format(when, time.localtime())
    return time.strftime(fmt, when)


@lru_cache(maxsize=8)
def _time_format(setting: str) -> str | None:
    """SLURM_TIME_FORMAT's strftime format; None for "relative"."""
    if setting in ("", "standard"):
        return STANDARD_TIME_FORMAT
    if setting == "relative":
        return None
    if "%" not in setting or len(setting) >= 32:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "slurm"
        print(f"{prog}: error: invalid SLURM_TIME_FORMAT = '{setting}'", file=sys.stderr)
        return STANDARD_TIME_FORMAT
    return setting


def _relative_format(when: time.struct_time, today: time.struct_time) -> str:
    """The strftime format of a date shown relative to today (Slurm's
    _relative_date_fmt): days counted as YYYYddd numbers, so that across a
    new year the distance jumps, as Slurm's does."""
    distance = (1000 * when.tm_year + when.tm_yday - 1) - (1000 * today.tm_year + today.tm_yday - 1)
    if distance == -1:
        return "Ystday %H:%M"
    if distance == 0:
        return "%H:%M:%S"
    if distance == 1:
        return "Tomorr %H:%M"
    if distance < -365 or distance > 365:
        return "%-d %b %Y"
    if distance < -1 or distance > 6:
        return "%-d %b %H:%M"
    return "%a %H:%M"


def format_date_line(ts: int | float) -> str:
    """The first line of squeue -l / sinfo -l: "Wed Dec 02 10:04:09 2026"."""
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(ts))


# --- sizes --------------------------------------------------------------------
_SIZE_RE = r"(?i)^(\d+(?:\.\d+)?)([KMGTP]?)B?$"
_SIZE_MULT = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}


def parse_size_mb(s: str) -> int:
    """sbatch --mem: "4G" -> 4096, "500" -> 500 (default unit MB), "2048K" -> 2.

    K rounds up to whole megabytes. ValueError on garbage.
    """
    m = re.match(_SIZE_RE, str(s).strip())
    if not m:
        raise ValueError(f"invalid size specification: {s!r}")
    val = float(m.group(1)) * _SIZE_MULT[m.group(2).upper()]
    if not math.isfinite(val):      # "9" * 309 is a float infinity
        raise ValueError(f"invalid size specification: {s!r}")
    return int(math.ceil(val))


def format_size_mb(mb: int) -> str:
    """ReqMem style: 4096 -> "4G", 500 -> "500M", 0 -> "0"."""
    if mb <= 0:
        return "0"
    for unit, mult in (("T", 1024 ** 2), ("G", 1024)):
        if mb % mult == 0:
            return f"{mb // mult}{unit}"
    return f"{mb}M"


# --- hostlists ----------------------------------------------------------------
def natural_key(name: str) -> tuple:
    """Sort key that puts node2 before node10 (numbers compare as numbers)."""
    parts = _digit_split(name)
    return tuple((0, int(p), p) if i % 2 else (1, 0, p) for i, p in enumerate(parts))


def _digit_split(name: str) -> list[str]:
    r"""``re.split(r"(\d+)", name)``: text and runs of decimal digits, taking turns,
    text first and last ("node10" -> ["node", "10", ""])."""
    parts = []
    start = i = 0
    n = len(name)
    while i < n:
        if name[i].isdecimal():         # what \d matches in a str pattern
            j = i + 1
            while j < n and name[j].isdecimal():
                j += 1
            parts += (name[start:i], name[i:j])
            start = i = j
        else:
            i += 1
    parts.append(name[start:])
    return parts


def expand_hostlist(expr: str) -> list[str]:
    """"node[1-3],gpu01" -> ["node1", "node2", "node3", "gpu01"]; ValueError on bad syntax."""
    if not expr or expr.strip() in ("", "(null)"):
        return []
    import hostlist     # here: 2 ms of start-up that most commands never need
    try:
        return hostlist.expand_hostlist(expr.strip())
    except hostlist.BadHostlist as e:
        raise ValueError(f"invalid hostlist {expr!r}: {e}") from None


def compress_hostlist(names) -> str:
    """["node1", "node2", "node4"] -> "node[1-2,4]" (Slurm's ranged form, sorted)."""
    names = [n for n in names if n]
    if not names:
        return ""
    if len(names) == 1 and not any(c in names[0] for c in "[],"):
        return names[0]         # the common case, and hostlist's answer: 30 µs saved a job in sacct
    ranged = _one_prefix_ranges(names)
    if ranged is not None:
        return ranged
    import hostlist
    return hostlist.collect_hostlist(list(names))


_PREFIX_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.")


def _one_prefix_ranges(names: list[str]) -> str | None:
    """collect_hostlist's answer where every name is one prefix (ASCII letters,
    "-", "_", ".") and a number without leading zeros ("node1", "node12": a
    cluster's usual names), else None (python-hostlist answers those).
    python-hostlist costs sinfo 2 ms of CPU to import (with re and json already
    loaded), more than ranging a few names takes."""
    prefix = None
    numbers = set()
    for name in names:
        i = len(name)
        while i and "0" <= name[i - 1] <= "9":
            i -= 1
        digits = name[i:]
        if not digits or (digits[0] == "0" and len(digits) > 1) or i == 0:
            return None
        head = name[:i]
        if prefix is None:
            if not all(c in _PREFIX_CHARS for c in head):
                return None
            prefix = head
        elif head != prefix:
            return None
        numbers.add(int(digits))
    ordered = sorted(numbers)
    if len(ordered) == 1:
        return f"{prefix}{ordered[0]}"
    runs = []
    start = prev = ordered[0]
    for n in ordered[1:]:
        if n != prev + 1:
            runs.append(f"{start}-{prev}" if prev != start else str(start))
            start = n
        prev = n
    runs.append(f"{start}-{prev}" if prev != start else str(start))
    return f"{prefix}[{','.join(runs)}]"


def compress_counts(counts) -> str:
    """[2, 2, 1] -> "2(x2),1": SLURM_TASKS_PER_NODE / SLURM_JOB_CPUS_PER_NODE syntax."""
    out: list[str] = []
    prev, run = None, 0
    for c in counts:
        if c == prev:
            run += 1
            continue
        if prev is not None:
            out.append(f"{prev}(x{run})" if run > 1 else str(prev))
        prev, run = c, 1
    if prev is not None:
        out.append(f"{prev}(x{run})" if run > 1 else str(prev))
    return ",".join(out)


_COUNT_RE = r"(\d+)(?:\(x(\d+)\))?"


def expand_counts(s: str) -> list[int]:
    """The inverse of compress_counts: "2(x2),1" -> [2, 2, 1]."""
    out: list[int] = []
    for part in (p for p in s.split(",") if p):
        m = re.fullmatch(_COUNT_RE, part.strip())
        if not m:
            raise ValueError(f"invalid count list {s!r}")
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return out


# --- job arrays -----------------------------------------------------------------
DEFAULT_MAX_ARRAY_SIZE = 1001     # Slurm's MaxArraySize: indices 0 .. 1000
_ARRAY_ITEM_RE = r"(\d+)(?:-(\d+)(?::(\d+))?)?"


class ArraySpec(namedtuple("ArraySpec", ("indices", "max_running"), defaults=(0,))):
    """An --array value: the task indices (ascending, distinct) and the %N throttle
    (max_running, 0 = none). A named tuple: every command imports this module,
    and dataclasses would cost each one its import of inspect."""
    __slots__ = ()

    @property
    def step(self) -> int:
        """SLURM_ARRAY_TASK_STEP: the common gap of evenly spaced indices, else 1."""
        gaps = {b - a for a, b in zip(self.indices, self.indices[1:])}
        return gaps.pop() if len(gaps) == 1 else 1


def parse_array_spec(text: str, max_array_size: int = DEFAULT_MAX_ARRAY_SIZE) -> ArraySpec:
    """sbatch --array: "0-15:4%2", "1,3,5", "1-3,7" -> ArraySpec; ValueError when invalid.

    Indices run from 0 to ``max_array_size`` - 1 (MaxArraySize=1001 allows
    1000, as Slurm); a step must be at least 1, a range must not run backwards.
    """
    spec, pct, throttle = text.strip().partition("%")
    max_running = 0
    if pct:
        if not throttle.isdigit():
            raise ValueError(f"invalid array throttle in {text!r}")
        max_running = int(throttle)
    indices: set[int] = set()
    for item in spec.split(","):
        m = re.fullmatch(_ARRAY_ITEM_RE, item.strip())
        if not m:
            raise ValueError(f"invalid array index {item!r}")
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) is not None else low
        step = int(m.group(3)) if m.group(3) is not None else 1
        if high < low or step < 1 or high >= max_array_size:
            raise ValueError(f"invalid array range {item!r}")
        indices.update(range(low, high + 1, step))
    return ArraySpec(indices=tuple(sorted(indices)), max_running=max_running)


def fold_indices(indices) -> str:
    """[1, 2, 3, 5] -> "1-3,5": Slurm's bit_fmt ranges (no steps: 0-15:4 is "0,4,8,12")."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(indices)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def unfold_indices(text: str) -> list[int]:
    """The inverse of fold_indices ("1-3,5" -> [1, 2, 3, 5]); a "%N" suffix is ignored."""
    text = text.partition("%")[0].strip()
    if not text:
        return []
    return list(parse_array_spec(text, max_array_size=2 ** 31).indices)


def count_indices(text: str) -> int:
    """How many indices "1-3,5" names (4), without unfolding them: an array's
    pending remainder of 100,000 tasks is counted in a few steps."""
    text = text.partition("%")[0].strip()
    n = 0
    for item in filter(None, text.split(",")):
        m = re.fullmatch(_ARRAY_ITEM_RE, item.strip())
        if not m:
            raise ValueError(f"invalid array index {item!r}")
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) is not None else low
        step = int(m.group(3)) if m.group(3) is not None else 1
        n += len(range(low, high + 1, step))
    return n


def array_task_text(task_str: str, max_running: int = 0) -> str:
    """The pending remainder as squeue shows it inside A_[...]: "4-9" or "4-9%2"."""
    return f"{task_str}%{max_running}" if max_running else task_str


# --- exit codes ---------------------------------------------------------------
# --- job ids ------------------------------------------------------------------------
# The API carries job ids as int64 and the store as SQLite INTEGER: an id past
# this cannot name a job, and is refused as garbage is, in each command's
# own words, before anything is sent (Slurm's ids are 32-bit; any id that
# fits but names no job gets the controller's "Invalid job id specified").
MAX_JOB_ID = 2 ** 63 - 1
def is_job_id(text: str) -> bool:
    """True for decimal digits naming 0..MAX_JOB_ID (no sign, no spaces; 0 names
    no job, and the controller says so)."""
    return text.isascii() and text.isdigit() and int(text) <= MAX_JOB_ID


def parse_job_id(text: str) -> int:
    """The job id ``text`` names; ValueError for a sign, garbage or an id past MAX_JOB_ID."""
    if not is_job_id(text):
        raise ValueError(f"Invalid job id: {text}")
    return int(text)


def format_exit_code(code: int, signal: int = 0) -> str:
    """ExitCode=3:0 (exit status:signal)."""
    return f"{int(code)}:{int(signal)}"


# --- signals ------------------------------------------------------------------
def parse_signal(s: str) -> int:
    """scancel -s: "USR1", "SIGUSR1", "10", "kill" -> signal number. ValueError when unknown."""
    import signal as _signal
    t = str(s).strip()
    if t.isdigit():
        n = int(t)
        if 0 < n < 65:
            return n
        raise ValueError(f"Invalid job signal: {s}")
    name = t.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(getattr(_signal.Signals, name))
    except AttributeError:
        raise ValueError(f"Invalid job signal: {s}") from None


# --- --signal ---------------------------------------------------------------------
DEFAULT_WARN_TIME_S = 60


def parse_warn_signal(s: str) -> tuple[int, int, str]:
    """sbatch --signal "[{R|B}:]<sig_num>[@sig_time]" -> (signal, seconds, flag).

    flag is "B" (batch shell only), "R" (reservation; treated as plain) or "".
    The time defaults to 60 s and may be 0..65535 (get_signal_opts()).

    >>> parse_warn_signal("B:USR1@50")
    (10, 50, 'B')
    """
    text = str(s).strip()
    flag = ""
    if text[:2].upper() in ("B:", "R:"):
        flag, text = text[0].upper(), text[2:]
    sig, at, when = text.partition("@")
    number = parse_signal(sig)        # ValueError when unknown
    if not at:
        return number, DEFAULT_WARN_TIME_S, flag
    if not when.isdigit() or int(when) > 0xFFFF:
        raise ValueError(f"Invalid --signal specification: {s}")
    return number, int(when), flag


# --- --mail-type --------------------------------------------------------------------
# Bits in the order print_mail_type() writes them; ALL is Slurm 22.05's set.
_MAIL_TYPES = ("ARRAY_TASKS", "BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT",
               "TIME_LIMIT_50", "TIME_LIMIT_80", "TIME_LIMIT_90", "TIME_LIMIT")
_MAIL_ALL = ("BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT")


def parse_mail_type(s: str) -> str:
    """--mail-type "end,fail" -> "END,FAIL" as scontrol prints it; "" for NONE.

    ValueError when a word is not one of Slurm's."""
    chosen: set[str] = set()
    none = False
    for word in (w.strip().upper() for w in str(s).split(",") if w.strip()):
        if word == "NONE":
            none = True
        elif word == "ALL":
            chosen.update(_MAIL_ALL)
        elif word in _MAIL_TYPES:
            chosen.add(word)
        else:
            raise ValueError(f"--mail-type={s} invalid")
    if not chosen and not none:
        raise ValueError(f"--mail-type={s} invalid")
    return ",".join(t for t in _MAIL_TYPES if t in chosen)


# --- -C/--constraint ------------------------------------------------------------------
# Slurm's node-feature expressions: names joined by & (AND; "," is the old
# spelling of the same), | (OR), grouped by (...) or [...]. Slurm evaluates
# left to right without precedence (each operator applies to the result so
# far and the next term), and so do we. Counts ("a*2") and matching OR across
# the nodes of a job ("[a|b]" meaning all nodes alike) are not modelled:
# brackets group like parentheses.
_FEATURE_TOKEN = r"\s*([A-Za-z0-9_.:+=/@-]+|[&|,()\[\]*])"


def _constraint_tokens(expr: str) -> list[str]:
    pos, out = 0, []
    text = expr.strip()
    while pos < len(text):
        m = re.compile(_FEATURE_TOKEN).match(text, pos)   # re caches it
        if not m:
            raise ValueError(f"Invalid feature specification: {expr}")
        out.append(m.group(1))
        pos = m.end()
    return out


def constraint_features(expr: str) -> list[str]:
    """The feature names an expression mentions; ValueError on bad syntax."""
    parse_constraint(expr)
    return [t for t in _constraint_tokens(expr) if t not in "&|,()[]*"]


def parse_constraint(expr: str) -> tuple:
    """Parse into a nested tuple: ("f", name) | (op, left, right), op "&" or "|".

    ValueError (Slurm: "Invalid feature specification") on bad syntax.
    """
    tokens = _constraint_tokens(expr)
    if not tokens:
        raise ValueError("Invalid feature specification")
    pos = 0

    def term():
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("Invalid feature specification")
        tok = tokens[pos]
        pos += 1
        if tok in "([":
            closing = ")" if tok == "(" else "]"
            node = sequence()
            if pos >= len(tokens) or tokens[pos] != closing:
                raise ValueError("Invalid feature specification")
            pos += 1
            return node
        if tok in "&|,)]*":
            raise ValueError("Invalid feature specification")
        if pos < len(tokens) and tokens[pos] == "*":
            raise ValueError("Invalid feature specification (feature counts are not supported)")
        return ("f", tok)

    def sequence():
        nonlocal pos
        node = term()
        while pos < len(tokens) and tokens[pos] in "&|,":
            op = "|" if tokens[pos] == "|" else "&"
            pos += 1
            node = (op, node, term())
        return node

    tree = sequence()
    if pos != len(tokens):
        raise ValueError("Invalid feature specification")
    return tree


def constraint_matches(expr: str | tuple, features) -> bool:
    """Whether a node with ``features`` satisfies the -C expression ("" = any node)."""
    if not expr:
        return True
    tree = parse_constraint(expr) if isinstance(expr, str) else expr
    have = set(features)

    def ev(node) -> bool:
        if node[0] == "f":
            return node[1] in have
        left, right = ev(node[1]), ev(node[2])
        return (left and right) if node[0] == "&" else (left or right)
    return ev(tree)


# --- dependencies, holds, begin and deadline times ------------------
REASON_DEPENDENCY_NEVER = "DependencyNeverSatisfied"
REASON_DEADLINE = "DeadLine"

# Words that name a time of day (hour), and units a "now+N" count may carry.
# Slurm 22.05 knows no "elevenses" (its man page names it; its parser refuses it).
_NAMED_HOURS = (("midnight", 0), ("noon", 12), ("fika", 15), ("teatime", 16))
_DELTA_UNITS = (("seconds", 1), ("second", 1), ("minutes", 60), ("minute", 60),
                ("hours", 3600), ("hour", 3600), ("days", 86400), ("day", 86400),
                ("weeks", 604800), ("week", 604800))


class TimeSpecError(ValueError):
    """A date Slurm's parse_time refuses; the message is Slurm's own line,
    "Invalid time specification (pos=N): TEXT", N where reading stopped."""

    def __init__(self, text: str, pos: int):
        super().__init__(f"Invalid time specification (pos={pos}): {text}")
        self.text, self.pos = text, pos


_UTS_RE = r"\s*[+-]?\d+"


def parse_time(text: str, now: float, past: bool = False) -> int:
    """A date as every Slurm command reads one (sbatch --begin/--deadline,
    scontrol update StartTime=, sacct -S/-E): Unix seconds, local time.

    Words, in any order, each filling in part of the date: today, tomorrow,
    midnight, noon, fika (15:00), teatime (16:00),
    now[{+|-}N[seconds|minutes|hours|days|weeks]], HH:MM[:SS][AM|PM],
    MMDD[YY], MM/DD[/YY], MM.DD[.YY], YYYY-MM-DD; blanks, "-" and "T"
    between them ("2026-12-03T10:00", "12/03-10:00", "tomorrow noon").
    "uts<N>" is N itself. A date without a time is its midnight; a time
    without a date is the next one to come, or today's with ``past``; a
    date without a year is the next one to come, or with ``past`` (sacct)
    the last one gone: on December 4th, "1203" is this December 3rd for
    sacct and next year's for --begin. Out-of-range days roll over as
    mktime rolls them (2026-02-30 is March 2nd). Nothing at all ("") is 0.
    TimeSpecError (a ValueError) on anything else.

    >>> t0 = int(time.mktime((2026, 12, 4, 2, 0, 0, 0, 0, -1)))
    >>> parse_time("now+2hours", t0) - t0
    7200
    >>> time.strftime("%F %T", time.localtime(parse_time("1203", t0, past=True)))
    '2026-12-03 00:00:00'
    >>> time.strftime("%F %T", time.localtime(parse_time("1203", t0)))
    '2027-12-03 00:00:00'
    """
    s = str(text)
    n = len(s)

    def ch(i: int) -> str:
        return s[i] if i < n else ""

    def digit(i: int) -> int | None:
        c = ch(i)
        return ord(c) - 48 if "0" <= c <= "9" else None

    if s[:3].lower() == "uts":
        m = re.fullmatch(_UTS_RE, s[3:])
        if not m or int(s[3:]) < 1000000:
            raise TimeSpecError(s, 0)
        return int(s[3:])

    t_now = time.localtime(now)
    year = month = mday = hour = -1
    minute = second = 0
    pos = 0

    def set_date(t: time.struct_time) -> None:
        nonlocal year, month, mday
        year, month, mday = t.tm_year, t.tm_mon, t.tm_mday

    while pos < n and s[pos] != "\n":
        c = s[pos]
        rest = s[pos:].lower()
        if c in " \t-T":
            pos += 1
            continue
        if rest.startswith("today"):
            set_date(t_now)
            pos += 5
            continue
        if rest.startswith("tomorrow"):
            set_date(time.localtime(now + 86400))
            pos += 8
            continue
        named = next(((w, h) for w, h in _NAMED_HOURS if rest.startswith(w)), None)
        if named:
            hour, minute, second = named[1], 0, 0
            pos += len(named[0])
            continue
        if rest.startswith("now"):
            pos, delta = _now_delta(s, pos + 3)
            t = time.localtime(now + delta)
            set_date(t)
            hour, minute, second = t.tm_hour, t.tm_min, t.tm_sec
            continue
        if digit(pos) is None:
            raise TimeSpecError(s, pos)
        if ch(pos + 1) == ":" or ch(pos + 2) == ":":
            pos, (hour, minute, second) = _clock(s, pos)
        else:
            pos, date = _calendar_date(s, pos)
            month, mday = date[1], date[2]
            if date[0] != -1:
                year = date[0]

    if hour == -1 and month == -1:
        return 0
    if hour == -1:
        hour, minute = 0, 0
    elif month == -1:
        soon = (hour, minute) > (t_now.tm_hour, t_now.tm_min)
        set_date(t_now if past or soon else time.localtime(now + 86400))
    if year == -1:
        if past:
            year = t_now.tm_year - 1 if month > t_now.tm_mon else t_now.tm_year
        else:
            ahead = (month, mday, hour, minute) > (t_now.tm_mon, t_now.tm_mday,
                                                   t_now.tm_hour, t_now.tm_min)
            year = t_now.tm_year if ahead else t_now.tm_year + 1
    try:
        return int(time.mktime((year, month, mday, hour, minute, second, 0, 0, -1)))
    except (OverflowError, ValueError):
        raise TimeSpecError(s, pos) from None


def _now_delta(s: str, i: int) -> tuple[int, int]:
    """After "now": blanks, then nothing or {+|-}N[unit]. (index after, seconds)."""
    n = len(s)
    while i < n and s[i] in " \t":
        i += 1
    if i >= n or s[i] == "\n":
        return i, 0
    if s[i] not in "+-":
        raise TimeSpecError(s, i)
    sign, j, count, digits = (1 if s[i] == "+" else -1), i + 1, 0, 0
    while j < n and s[j] != "\n":
        if s[j].isspace():
            j += 1
            continue
        unit = next(((w, k) for w, k in _DELTA_UNITS if s[j:j + len(w)].lower() == w), None)
        if unit:
            j += len(unit[0])
            count *= unit[1]
            break
        if "0" <= s[j] <= "9":
            count, digits = count * 10 + ord(s[j]) - 48, digits + 1
            j += 1
            continue
        raise TimeSpecError(s, j - 1)
    if not digits:
        raise TimeSpecError(s, i)
    return j, sign * count


def _clock(s: str, i: int) -> tuple[int, tuple[int, int, int]]:
    """HH:MM[:SS] [AM|PM] at i (a digit): (index after, (hour, minute, second))."""
    def num(j: int, width: int) -> tuple[int, int]:
        """width digits at j, the first ones required: (value, index after)."""
        v = 0
        for k in range(j, j + width):
            if not ("0" <= _at(s, k) <= "9"):
                raise TimeSpecError(s, k)
            v = v * 10 + ord(s[k]) - 48
        return v, j + width

    hr, j = num(i, 1 if _at(s, i + 1) == ":" else 2)
    if hr > 23:
        raise TimeSpecError(s, j - 2)
    if _at(s, j) != ":":
        raise TimeSpecError(s, j)
    mi, j = num(j + 1, 2)
    if mi > 59:
        raise TimeSpecError(s, j - 2)
    sec = 0
    if _at(s, j) == ":":
        sec, j = num(j + 1, 2)
        if sec > 59:
            raise TimeSpecError(s, j - 2)
    while _at(s, j) in (" ", "\t", "\n", "\r", "\v", "\f") and j < len(s):
        j += 1
    mark = s[j:j + 2].lower()
    if mark == "pm":
        hr += 12
        if hr > 23:
            if hr != 24:
                raise TimeSpecError(s, j)
            hr = 12
        j += 2
    elif mark == "am":
        if hr > 11:
            if hr != 12:
                raise TimeSpecError(s, j)
            hr = 0
        j += 2
    return j, (hr, mi, sec)


def _at(s: str, i: int) -> str:
    return s[i] if 0 <= i < len(s) else ""


def _one_or_two(s: str, j: int) -> tuple[int, int]:
    """A number of one or two digits at j (the first one may be anything,
    as in Slurm, which then finds it out of range): (value, index after)."""
    c = _at(s, j)
    v = ord(c) - 48 if c else -48
    j += 1
    if "0" <= _at(s, j) <= "9":
        v, j = v * 10 + ord(s[j]) - 48, j + 1
    return v, j


def _calendar_date(s: str, i: int) -> tuple[int, tuple[int, int, int]]:
    """YYYY-MM-DD, or MMDD[YY] / MM/DD[/YY] / MM.DD[.YY] at i (a digit):
    (index after, (year or -1, month, day))."""
    year = -1
    iso = len(s) >= i + 7 and _at(s, i + 4) == "-" and _at(s, i + 7) == "-"
    j = i
    if iso:
        for k in range(i, i + 4):
            if not ("0" <= s[k] <= "9"):
                raise TimeSpecError(s, k)
        year, j = int(s[i:i + 4]), i + 5
    month, j = _one_or_two(s, j)
    if not 1 <= month <= 12:
        raise TimeSpecError(s, j - 2)
    if iso or _at(s, j) in (".", "/"):
        j += 1
    if not ("0" <= _at(s, j) <= "9"):
        raise TimeSpecError(s, j)
    day, j = _one_or_two(s, j)
    if not 1 <= day <= 31:
        raise TimeSpecError(s, j - 2)
    if iso:
        return j, (year, month, day)
    if _at(s, j) in (".", "/"):
        j += 1
    if "0" <= _at(s, j) <= "9":
        if not ("0" <= _at(s, j + 1) <= "9"):
            raise TimeSpecError(s, j + 1)
        yy = int(s[j:j + 2])
        j += 2
        if yy:                      # "00" reads as no year, as in Slurm
            year = 2000 + yy
    return j, (year, month, day)


def account_names(uid: int, gid: int) -> tuple[str, str]:
    """(user name, group name) of uid/gid, or the numbers as text where the
    system knows no such user or group (as Slurm prints them)."""
    import grp
    import pwd
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return user, group


def current_user() -> tuple[str, int, int, str]:
    """(user name, uid, gid, group name) of the caller: what a command puts in
    a request as its user (the controller trusts only the socket's peer)."""
    uid, gid = os.getuid(), os.getgid()
    user, group = account_names(uid, gid)
    return user, uid, gid, group
