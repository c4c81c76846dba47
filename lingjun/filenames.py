"""Slurm's filename patterns for ``--output``, ``--error`` and ``--input``.

The rules are slurmstepd's (``src/slurmd/common/fname.c``, 22.05), quirks
included, because users' scripts depend on the exact names:

    pattern              expands to (job 128, step 0, task 1, node "n1")
    slurm-%j.out         slurm-128.out
    job%4j.out           job0128.out        a number zero-pads numeric fields
    job%J.out            job128.0.out       (%J without a step: job128.out)
    job%j-%2t.out        job128-01.out
    %x-%N.log            <name>-n1.log      padding is ignored for text fields
    100%%.out            100%.out
    a%qb                 a%qb               an unknown letter stays as it is
    a%4qb                a4qb               ...but Slurm drops "%" and all
                                            digits except the last one
    a\\%j                a%j                any backslash turns substitution
                                            off for the whole name; each
                                            backslash is removed ("\\\\" -> "\\")

Padding is capped at 10 digits. ``%a`` outside an array prints Slurm's
NO_VAL (4294967294), as real Slurm does; ``%A`` outside an array is the job
id. ``%n`` and ``%t`` default to 0 (the batch script is task 0 on node 0).
When ``step_id`` is None (the batch script), ``%J`` is the job id alone and
``%s`` is ``batch``.
"""
from __future__ import annotations

import os

NO_VAL = 0xFFFFFFFE
MAX_WIDTH = 10
WILDCARDS = frozenset("aAjJnNstux")
DIGITS = "0123456789"

DEFAULT_STDOUT = "slurm-%j.out"
DEFAULT_ARRAY_STDOUT = "slurm-%A_%a.out"


def default_stdout(array: bool) -> str:
    """Slurm's output pattern when the user gave none (stderr goes with it)."""
    return DEFAULT_ARRAY_STDOUT if array else DEFAULT_STDOUT


def _strip_backslashes(pattern: str) -> str:
    """``remove_path_slashes``: ``\\\\`` becomes ``\\``, a lone ``\\`` vanishes."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 < len(pattern) and pattern[i + 1] == "\\":
                out.append("\\")
                i += 2
            else:
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def expand_pattern(
    pattern: str,
    *,
    job_id: int,
    job_name: str = "",
    user: str = "",
    node: str = "",
    array_job_id: int = 0,
    array_task_id: int | None = None,
    step_id: int | str | None = None,
    task_id: int | None = None,
    node_index: int | None = None,
) -> str:
    """Expand Slurm's ``%`` letters in one file name (see the module doc)."""
    if "\\" in pattern:
        return _strip_backslashes(pattern)

    def field(letter: str, width: int) -> str:
        def num(value: int | str) -> str:
            if isinstance(value, int):
                return f"{value:0{width}d}"
            return value

        if letter == "j":
            return num(job_id)
        if letter == "J":
            if step_id is None:
                return num(job_id)
            return f"{num(job_id)}.{step_id}"
        if letter == "A":
            if array_task_id is not None and array_job_id:
                return num(array_job_id)
            return num(job_id)
        if letter == "a":
            return num(NO_VAL if array_task_id is None else array_task_id)
        if letter == "s":
            return num("batch" if step_id is None else step_id)
        if letter == "t":
            return num(task_id or 0)
        if letter == "n":
            return num(node_index or 0)
        if letter == "N":
            return node
        if letter == "u":
            return user
        if letter == "x":
            return job_name
        raise AssertionError(letter)

    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 == n:  # a trailing "%" stays
            out.append("%")
            break
        if pattern[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        j = i + 1
        while j < n and pattern[j] in DIGITS:
            j += 1
        digits = pattern[i + 1:j]
        if digits:
            if j == n or pattern[j] not in WILDCARDS:
                # Slurm's quirk: "%" and every digit but the last disappear;
                # whatever follows is read afresh (it may start a new "%").
                out.append(digits[-1])
                i = j
                continue
            out.append(field(pattern[j], min(int(digits), MAX_WIDTH)))
            i = j + 1
            continue
        letter = pattern[i + 1]
        if letter in WILDCARDS:
            out.append(field(letter, 0))
        else:
            out.append("%" + letter)
        i += 2
    return "".join(out)


def resolve_path(expanded: str, work_dir: str) -> str:
    """An expanded name made absolute: relative names live in ``work_dir``."""
    if os.path.isabs(expanded):
        return expanded
    return os.path.join(work_dir, expanded)
