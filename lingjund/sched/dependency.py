"""Job dependencies: whether a pending job may start as far as other jobs go.

``parse`` reads Slurm's ``--dependency`` syntax; ``DependencyWorld.evaluate``
decides, over a frozen view of the jobs a dependency names, whether it is
SATISFIED, WAITING ("not yet": the job shows ``Dependency``) or NEVER ("never":
``DependencyNeverSatisfied``), and what is left of it to show, as scontrol
does: satisfied terms drop out, the rest carry ``(unfulfilled)`` or
``(failed)``. A failure is sticky: it stays in the text the store keeps, so a
parent that is requeued and later succeeds does not revive it (sbatch.1).

Example, job 12 with ``afterok:7,afterany:8`` while 7 runs and 8 is done:

    evaluate -> WAITING, "afterok:7(unfulfilled)"   (afterany:8 dropped out)
    7 ends FAILED -> NEVER, "afterok:7(failed)"
    ``afterok:7?afterany:9`` with 9 done -> SATISFIED, "" (one of "?" is enough)

A job id nobody knows is treated as a finished job the controller has
forgotten: the term drops out (Slurm 22.05 accepts ``afterok:999999`` and
runs the job). Pure: no store, no clock (``now`` is an argument).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from lingjun.slurm import (MAX_JOB_ID, COMPLETED, FINISHED_STATES, PENDING, REASON_DEPENDENCY,
                           REASON_DEPENDENCY_NEVER)

SATISFIED = "satisfied"
WAITING = "waiting"
NEVER = "never"

KINDS = ("after", "afterany", "afterok", "afternotok", "aftercorr", "singleton")
_FAILED = "failed"
_ID_RE = re.compile(r"^([0-9]+)(?:_([0-9]+))?(?:\+([0-9]+))?$")
_STATUS_RE = re.compile(r"\((unfulfilled|failed)\)$")


@dataclass(frozen=True)
class Term:
    """One job (or the singleton rule) one dependency type waits on."""

    kind: str
    job_id: int = 0
    task_id: int = -1          # afterok:7_3 waits on task 3 of array 7 only
    delay_min: int = 0         # after:7+5: five minutes after 7 started
    failed: bool = False       # sticky: it failed in an earlier pass

    def text(self) -> str:
        if self.kind == "singleton":
            head = "singleton"
        else:
            head = f"{self.kind}:{self.job_id}"
            if self.task_id >= 0:
                head += f"_{self.task_id}"
            if self.delay_min:
                head += f"+{self.delay_min}"
        return head + ("(failed)" if self.failed else "(unfulfilled)")


@dataclass(frozen=True)
class Dependency:
    terms: tuple[Term, ...]
    any_of: bool = False       # "?"-separated: one satisfied term is enough

    def text(self) -> str:
        return ("?" if self.any_of else ",").join(t.text() for t in self.terms)


def parse(text: str) -> Dependency:
    """``afterok:7:8,after:9+5`` / ``afterany:3?afternotok:4`` / ``singleton``.

    Also reads back what ``Dependency.text`` wrote (with the status marks).
    ValueError on anything else, including mixed "," and "?" (Slurm allows
    only one kind of separator) and an empty string.
    """
    s = text.strip()
    if not s:
        raise ValueError("empty dependency")
    if "," in s and "?" in s:
        raise ValueError("both ',' and '?' in a dependency")
    any_of = "?" in s
    terms: list[Term] = []
    for part in s.split("?" if any_of else ","):
        part = part.strip()
        failed = False
        m = _STATUS_RE.search(part)
        if m:
            failed = m.group(1) == _FAILED
            part = part[:m.start()]
        if part.lower() == "singleton":
            terms.append(Term("singleton", failed=failed))
            continue
        kind, sep, ids = part.partition(":")
        kind = kind.lower()
        if not sep or kind not in KINDS or kind == "singleton" or not ids:
            raise ValueError(f"bad dependency {part!r}")
        for one in ids.split(":"):
            m = _ID_RE.match(one)
            if not m or not 0 < int(m.group(1)) <= MAX_JOB_ID:
                raise ValueError(f"bad job id {one!r} in dependency")
            if m.group(3) is not None and kind != "after":
                raise ValueError("+time is only for after")
            terms.append(Term(kind, job_id=int(m.group(1)),
                              task_id=int(m.group(2)) if m.group(2) is not None else -1,
                              delay_min=int(m.group(3) or 0), failed=failed))
    return Dependency(tuple(terms), any_of)


@dataclass(frozen=True)
class JobView:
    """What a dependency may ask of another job."""

    job_id: int
    state: str
    name: str = ""
    user: str = ""
    exit_code: int = 0
    start_time: float = 0.0
    completing: bool = False            # finished but still cleaning up its nodes
    array_job_id: int = 0
    array_task_id: int = -1
    array_task_str: str = ""            # meta record: tasks not yet split off
    singleton: bool = False             # itself waits on the singleton rule


@dataclass(frozen=True)
class Verdict:
    state: str                          # SATISFIED, WAITING or NEVER
    remaining: str                      # what scontrol shows; "" when satisfied

    @property
    def reason(self) -> str:
        """The pending reason this verdict gives ("" when it gives none)."""
        return {WAITING: REASON_DEPENDENCY, NEVER: REASON_DEPENDENCY_NEVER}.get(self.state, "")


def task_ids(spec: str) -> set[int]:
    """"1-5:2,8%3" -> {1, 3, 5, 8}: the task indexes an array expression names."""
    out: set[int] = set()
    for part in spec.split("%")[0].split(","):
        if not part:
            continue
        rng, _, step = part.partition(":")
        lo, _, hi = rng.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or (step and not step.isdigit()):
            continue
        out.update(range(int(lo), int(hi or lo) + 1, int(step or 1) or 1))
    return out


class DependencyWorld:
    """The jobs dependencies may name, indexed once for a whole pass."""

    def __init__(self, jobs: Iterable[JobView]):
        self.by_id: dict[int, JobView] = {}
        self.members: dict[int, list[JobView]] = {}
        self.by_name: dict[tuple[str, str], list[JobView]] = {}
        for j in jobs:
            self.by_id[j.job_id] = j
            if j.array_job_id:
                self.members.setdefault(j.array_job_id, []).append(j)
            self.by_name.setdefault((j.user, j.name), []).append(j)

    def _group(self, job_id: int) -> list[JobView]:
        """The job, or every record of the array it heads."""
        group = {j.job_id: j for j in self.members.get(job_id, ())}
        if job_id in self.by_id:
            group.setdefault(job_id, self.by_id[job_id])
        return list(group.values())

    def evaluate(self, dep: Dependency | str, me: JobView, now: float) -> Verdict:
        if isinstance(dep, str):
            dep = parse(dep)
        left: list[Term] = []
        for term in dep.terms:
            outcome = _FAILED if term.failed else self._term(term, me, now)
            if outcome == SATISFIED:
                if dep.any_of:
                    return Verdict(SATISFIED, "")
                continue
            left.append(Term(term.kind, term.job_id, term.task_id, term.delay_min,
                             failed=outcome == _FAILED))
        if not left:
            return Verdict(SATISFIED, "")
        text = Dependency(tuple(left), dep.any_of).text()
        failed = [t.failed for t in left]
        never = all(failed) if dep.any_of else any(failed)
        return Verdict(NEVER if never else WAITING, text)

    def _term(self, term: Term, me: JobView, now: float) -> str:
        if term.kind == "singleton":
            return self._singleton(me)
        if term.task_id >= 0:
            one = [j for j in self.members.get(term.job_id, ()) if j.array_task_id == term.task_id]
            return self._on(term, one or self._unsplit(term.job_id, term.task_id), now)
        if term.kind == "aftercorr" and me.array_task_id >= 0:
            mine = [j for j in self.members.get(term.job_id, ()) if j.array_task_id == me.array_task_id]
            return self._on(term, mine or self._unsplit(term.job_id, me.array_task_id), now)
        return self._on(term, self._group(term.job_id), now)

    def _unsplit(self, array_id: int, task: int) -> list[JobView]:
        """The array's meta record while it still holds ``task`` (so: pending)."""
        meta = self.by_id.get(array_id)
        if meta is not None and meta.state == PENDING and task in task_ids(meta.array_task_str):
            return [meta]
        return []

    def _on(self, term: Term, group: list[JobView], now: float) -> str:
        if not group:
            return SATISFIED          # forgotten (or never known): nothing to wait for
        if term.kind == "after":
            if any(j.state == PENDING for j in group):
                return WAITING
            started = max(j.start_time for j in group)
            return SATISFIED if now >= started + term.delay_min * 60 else WAITING
        if not all(j.state in FINISHED_STATES and not j.completing for j in group):
            return WAITING
        ok = all(j.state == COMPLETED and j.exit_code == 0 for j in group)
        if term.kind == "afterany":
            return SATISFIED
        if term.kind == "afternotok":
            return _FAILED if ok else SATISFIED
        return SATISFIED if ok else _FAILED      # afterok, aftercorr

    def _singleton(self, me: JobView) -> str:
        """Wait while another job of the same name and user runs, or waits
        ahead of this one on the same rule (so that two never start together)."""
        for j in self.by_name.get((me.user, me.name), ()):
            if j.job_id == me.job_id:
                continue
            if j.state not in FINISHED_STATES and j.state != PENDING:
                return WAITING
            if j.completing:
                return WAITING
            if j.state == PENDING and j.singleton and j.job_id < me.job_id:
                return WAITING
        return SATISFIED


def verdicts(world: DependencyWorld, waiting: Mapping[int, tuple[str, JobView]],
             now: float) -> dict[int, Verdict]:
    """Every job's verdict: job id -> (its dependency text, its own view)."""
    return {job_id: world.evaluate(text, me, now) for job_id, (text, me) in waiting.items()}
