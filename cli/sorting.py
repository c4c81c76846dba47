"""squeue -S and sinfo -S: Slurm's sort lists.

A sort list names format letters, left to right from the most significant,
each ascending or, after "-", descending ("+" is ascending too); commas are
optional. Slurm applies one stable sort per letter from the last to the
first, which is a sort by all of them at once with the first one leading:

    >>> [k.letter + ("-" if k.descending else "") for k in parse_squeue_sort("P,t,-p")]
    ['P', 't', 'p-']

squeue refuses a letter it does not know ("Invalid sort specification: X",
exit 1) and says so for "b" but goes on, as Slurm does; "c", "f", "h", "n",
"O" and "cluster" change nothing here either (one cluster, no such columns).
sinfo ignores a letter it does not know, and "#P" is the partitions in the
order configured.
"""
from __future__ import annotations

from collections import namedtuple

from cli.formats.jobs import job_used_seconds
from lingjun import slurm
TYPE_CHECKING = False     # typing's own flag: typing and protobuf stay out of the start-up
if TYPE_CHECKING:
    from typing import Callable, Sequence
    from lingjun.v1 import api_pb2

# squeue's default order (squeue.1), and sinfo's by partition and by node
SQUEUE_DEFAULT_SORT = "P,t,-p"
SINFO_DEFAULT_SORT = "#P,-t"
SINFO_NODE_DEFAULT_SORT = "N"

_BIG = float("inf")


# config_order: sinfo's "#P". A named tuple: dataclasses costs squeue 6 ms to start.
SortKey = namedtuple("SortKey", "letter descending config_order", defaults=(False, False))


class SortError(ValueError):
    """A sort list naming a letter the command does not know."""


def _letters(spec: str, specials: str = "") -> list[SortKey]:
    """Letters with their "-" (and "#"), the word "cluster" taken whole."""
    keys: list[SortKey] = []
    i = 0
    while i < len(spec):
        c = spec[i]
        if c in ",+-" + specials:
            i += 1
            continue
        before = spec[i - 1] if i else ""
        desc = before == "-"
        if spec[i:i + 7].lower() == "cluster":
            keys.append(SortKey("cluster", desc))
            i += 7
            continue
        keys.append(SortKey(c, desc, before == "#"))
        i += 1
    return keys


# --- squeue --------------------------------------------------------------------------


def _start_key(job: api_pb2.JobInfo, now: int) -> int:
    """squeue -S S: no start time yet sorts just after now; a pending job whose
    expected start is past, at now."""
    if not job.start_time:
        return now + 100
    if job.state == slurm.PENDING and job.start_time < now:
        return now
    return job.start_time


def _time_left(job: api_pb2.JobInfo, now: int) -> float:
    if job.time_limit_min < 0:
        return _BIG
    return job.time_limit_min * 60 - job_used_seconds(job, now)


def _first_host(nodes: str) -> tuple:
    names = slurm.expand_hostlist(nodes) if nodes else []
    return slurm.natural_key(min(names, key=slurm.natural_key)) if names else ()


def _job_id(job: api_pb2.JobInfo) -> tuple[int, int]:
    if job.array_job_id and job.array_task_id >= 0:
        return job.array_job_id, job.array_task_id
    return job.job_id, -1


_NO_KEY = None      # letters Slurm accepts and does not sort by
SQUEUE_KEYS: dict[str, Callable[[api_pb2.JobInfo, int], object] | None] = {
    "B": lambda j, now: j.batch_host,
    "C": lambda j, now: j.num_cpus,
    "c": _NO_KEY, "f": _NO_KEY, "h": _NO_KEY, "n": _NO_KEY, "O": _NO_KEY, "cluster": _NO_KEY,
    "d": lambda j, now: 0,                              # no temporary disk requests
    "D": lambda j, now: j.num_nodes,
    "e": lambda j, now: j.end_time,
    "g": lambda j, now: j.group,
    "G": lambda j, now: j.gid,
    "H": lambda j, now: 0, "I": lambda j, now: 0, "J": lambda j, now: 0, "z": lambda j, now: 0,
    "i": lambda j, now: _job_id(j),
    "j": lambda j, now: j.name,
    "l": lambda j, now: _BIG if j.time_limit_min < 0 else j.time_limit_min,
    "L": _time_left,
    "m": lambda j, now: j.mem_per_node_mb,
    "M": lambda j, now: job_used_seconds(j, now),
    "N": lambda j, now: _first_host(j.nodes),
    "p": lambda j, now: j.priority, "Q": lambda j, now: j.priority,
    "P": lambda j, now: j.partition,
    "S": _start_key,
    "t": lambda j, now: slurm.job_state_code(j.state),
    "T": lambda j, now: j.state,
    "u": lambda j, now: j.user,
    "U": lambda j, now: j.uid,
    "v": lambda j, now: "",                             # no reservations
    "V": lambda j, now: j.submit_time,
}
# What each sort letter reads of a job, for a command that asks for some fields only.
SQUEUE_KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "B": ("batch_host",), "C": ("num_cpus",), "D": ("num_nodes",), "e": ("end_time",),
    "g": ("group",), "G": ("gid",), "i": ("job_id", "array_job_id", "array_task_id"),
    "j": ("name",), "l": ("time_limit_min",),
    "L": ("time_limit_min", "state", "start_time", "end_time"), "m": ("mem_per_node_mb",),
    "M": ("state", "start_time", "end_time"), "N": ("nodes",), "p": ("priority",),
    "Q": ("priority",), "P": ("partition",), "S": ("start_time", "state"), "t": ("state",),
    "T": ("state",), "u": ("user",), "U": ("uid",), "V": ("submit_time",),
}


def parse_squeue_sort(spec: str) -> list[SortKey]:
    """squeue's sort list; SortError naming the first unknown letter from the
    right (Slurm reads the list from its end)."""
    keys = _letters(spec)
    for k in reversed(keys):
        if k.letter not in SQUEUE_KEYS and k.letter != "b":
            raise SortError(f"Invalid sort specification: {k.letter}")
    return keys


def squeue_sort_fields(keys: Sequence[SortKey]) -> set[str]:
    return {f for k in keys for f in SQUEUE_KEY_FIELDS.get(k.letter, ())}


def sort_squeue(jobs: Sequence[api_pb2.JobInfo], keys: Sequence[SortKey], now: int
                ) -> list[api_pb2.JobInfo]:
    """The jobs in job id order, then sorted by each key from the last."""
    out = sorted(jobs, key=_job_id)
    for k in reversed(keys):
        fn = SQUEUE_KEYS.get(k.letter)
        if fn is not None:
            out.sort(key=lambda j: fn(j, now), reverse=k.descending)
    return out


# --- sinfo ---------------------------------------------------------------------------


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return _BIG if text.lower() in ("infinite", "unlimited") else 0.0


def _time_minutes(text: str) -> float:
    if text in ("infinite", "n/a", ""):
        return _BIG
    try:
        return slurm.parse_time_seconds(text) / 60
    except ValueError:
        return _BIG


def _host_key(text: str) -> tuple:
    try:
        return _first_host(text)
    except ValueError:
        return (text,)


# Each key reads a row of sinfo_table (its % letters' text, and the hidden
# "_part_index", "_state", "_reason_time" of the row).
SINFO_KEYS: dict[str, Callable[[dict], object]] = {
    "a": lambda r: r.get("a", "") == "up",
    "A": lambda r: _number(r.get("A", "0").split("/")[0]),
    "F": lambda r: _number(r.get("F", "0").split("/")[0]),
    "b": lambda r: r.get("b", ""), "f": lambda r: r.get("f", ""),
    "c": lambda r: _number(r.get("c", "0")), "d": lambda r: _number(r.get("d", "0")),
    "D": lambda r: _number(r.get("D", "0")), "E": lambda r: r.get("E", ""),
    "e": lambda r: _number(r.get("e", "0")), "g": lambda r: r.get("g", ""),
    "h": lambda r: r.get("h", ""), "H": lambda r: r.get("_reason_time", 0),
    "l": lambda r: _time_minutes(r.get("l", "")), "m": lambda r: _number(r.get("m", "0")),
    "M": lambda r: r.get("M", ""), "n": lambda r: _host_key(r.get("n", "")),
    "N": lambda r: _host_key(r.get("N", "")), "o": lambda r: _host_key(r.get("o", "")),
    "O": lambda r: _number(r.get("O", "0")), "p": lambda r: _number(r.get("p", "0")),
    "P": lambda r: r.get("R", ""), "R": lambda r: r.get("R", ""),
    "r": lambda r: r.get("r", ""), "s": lambda r: r.get("s", ""),
    "S": lambda r: r.get("S", ""),
    "t": lambda r: r.get("_state", 0), "T": lambda r: r.get("_state", 0),
    "u": lambda r: r.get("u", ""), "U": lambda r: r.get("U", ""),
    "V": lambda r: r.get("V", ""), "w": lambda r: _number(r.get("w", "0")),
    "X": lambda r: _number(r.get("X", "0")), "Y": lambda r: _number(r.get("Y", "0")),
    "Z": lambda r: _number(r.get("Z", "0")),
    "z": lambda r: tuple(_number(x) for x in r.get("z", "0:0:0").split(":")),
}


def parse_sinfo_sort(spec: str) -> list[SortKey]:
    return _letters(spec, specials="#")


def sort_sinfo_rows(rows: list[dict], keys: Sequence[SortKey]) -> list[dict]:
    out = list(rows)
    for k in reversed(keys):
        if k.letter in ("P", "R") and k.config_order:
            fn: Callable[[dict], object] | None = lambda r: r.get("_part_index", 0)
        else:
            fn = SINFO_KEYS.get(k.letter)
        if fn is not None:
            out.sort(key=fn, reverse=k.descending)
    return out
