"""Dependency evaluation over hand-built job views: "not yet" against "never".

Each case: the dependency text, the jobs it may name, ``now``; then the
verdict and what scontrol would show of what is left.
"""
from __future__ import annotations

import pytest

from lingjun.slurm import (CANCELLED, COMPLETED, FAILED, PENDING, REASON_DEPENDENCY,
                           REASON_DEPENDENCY_NEVER, RUNNING, TIMEOUT)
from lingjund.sched import dependency as dep
from lingjund.sched.dependency import NEVER, SATISFIED, WAITING, DependencyWorld, JobView
from lingjund.sched.plugins.eligibility import JobEligibility
from tests.sched.builders import job, partition

T0 = 1_000_000.0


def v(job_id: int, state: str = PENDING, **kw) -> JobView:
    """A job view; a finished job has exit 0 only if COMPLETED unless told."""
    if state in (FAILED, TIMEOUT) and "exit_code" not in kw:
        kw["exit_code"] = 1
    return JobView(job_id=job_id, state=state, **kw)


ME = v(100, name="me", user="alice")

CASES = [
    # (id, text, jobs, me, now, want state, want remaining)
    ("afterok waits while the parent runs", "afterok:7", [v(7, RUNNING)], ME, T0,
     WAITING, "afterok:7(unfulfilled)"),
    ("afterok is satisfied when the parent completed", "afterok:7", [v(7, COMPLETED)], ME, T0,
     SATISFIED, ""),
    ("afterok can never be satisfied once the parent failed", "afterok:7", [v(7, FAILED)], ME, T0,
     NEVER, "afterok:7(failed)"),
    ("afterok waits while a completed parent still cleans up its nodes", "afterok:7",
     [v(7, COMPLETED, completing=True)], ME, T0, WAITING, "afterok:7(unfulfilled)"),
    ("afternotok is satisfied by a parent that timed out", "afternotok:7", [v(7, TIMEOUT)], ME, T0,
     SATISFIED, ""),
    ("afternotok can never be satisfied once the parent completed", "afternotok:7",
     [v(7, COMPLETED)], ME, T0, NEVER, "afternotok:7(failed)"),
    ("afterany is satisfied by a cancelled parent", "afterany:7", [v(7, CANCELLED)], ME, T0,
     SATISFIED, ""),
    ("afterany waits for a pending parent", "afterany:7", [v(7)], ME, T0,
     WAITING, "afterany:7(unfulfilled)"),
    ("after is satisfied once the parent started", "after:7", [v(7, RUNNING, start_time=T0)], ME, T0,
     SATISFIED, ""),
    ("after+5 waits five minutes after the parent started", "after:7+5",
     [v(7, RUNNING, start_time=T0 - 240)], ME, T0, WAITING, "after:7+5(unfulfilled)"),
    ("after+5 is satisfied five minutes after the parent started", "after:7+5",
     [v(7, RUNNING, start_time=T0 - 300)], ME, T0, SATISFIED, ""),
    ("several ids per type: satisfied ones drop out", "afterok:7:8",
     [v(7, COMPLETED), v(8, RUNNING)], ME, T0, WAITING, "afterok:8(unfulfilled)"),
    ("',' needs all: one failure is never", "afterok:7,afterany:8",
     [v(7, FAILED), v(8, RUNNING)], ME, T0, NEVER, "afterok:7(failed),afterany:8(unfulfilled)"),
    ("'?' needs one: one satisfied term clears all", "afterok:7?afterany:8",
     [v(7, RUNNING), v(8, COMPLETED)], ME, T0, SATISFIED, ""),
    ("'?' with one failure still waits on the other", "afterok:7?afterany:8",
     [v(7, FAILED), v(8, RUNNING)], ME, T0, WAITING, "afterok:7(failed)?afterany:8(unfulfilled)"),
    ("'?' is never once every term failed", "afterok:7?afternotok:8",
     [v(7, FAILED), v(8, COMPLETED)], ME, T0, NEVER, "afterok:7(failed)?afternotok:8(failed)"),
    ("a failure stays even when the parent later succeeds (requeued)", "afterok:7(failed)",
     [v(7, COMPLETED)], ME, T0, NEVER, "afterok:7(failed)"),
    ("a job id nobody knows is a forgotten, finished job", "afterok:999999", [], ME, T0,
     SATISFIED, ""),
    ("singleton waits while a job of the same name and user runs", "singleton",
     [v(5, RUNNING, name="me", user="alice")], ME, T0, WAITING, "singleton(unfulfilled)"),
    ("singleton ignores another user's job of the same name", "singleton",
     [v(5, RUNNING, name="me", user="bob")], ME, T0, SATISFIED, ""),
    ("singleton ignores finished jobs of the same name", "singleton",
     [v(5, COMPLETED, name="me", user="alice")], ME, T0, SATISFIED, ""),
    ("singleton waits behind an earlier pending singleton job", "singleton",
     [v(5, name="me", user="alice", singleton=True)], ME, T0, WAITING, "singleton(unfulfilled)"),
    ("singleton goes before a later pending singleton job", "singleton",
     [v(500, name="me", user="alice", singleton=True)], ME, T0, SATISFIED, ""),
    # arrays: 20 is the meta record, 21..23 tasks 0..2 already split off
    ("afterok on an array waits for every task", "afterok:20",
     [v(20, COMPLETED, array_job_id=20, array_task_id=0), v(21, RUNNING, array_job_id=20,
                                                             array_task_id=1)],
     ME, T0, WAITING, "afterok:20(unfulfilled)"),
    ("afterok on an array fails when one task failed", "afterok:20",
     [v(20, COMPLETED, array_job_id=20, array_task_id=0), v(21, FAILED, array_job_id=20,
                                                            array_task_id=1)],
     ME, T0, NEVER, "afterok:20(failed)"),
    ("afterok on one task of an array looks at that task only", "afterok:20_1",
     [v(20, FAILED, array_job_id=20, array_task_id=0), v(21, COMPLETED, array_job_id=20,
                                                         array_task_id=1)],
     ME, T0, SATISFIED, ""),
    ("aftercorr: task 1 waits for task 1 of the other array", "aftercorr:20",
     [v(21, RUNNING, array_job_id=20, array_task_id=1), v(22, COMPLETED, array_job_id=20,
                                                          array_task_id=2)],
     v(31, array_job_id=30, array_task_id=1), T0, WAITING, "aftercorr:20(unfulfilled)"),
    ("aftercorr: task 2 runs once task 2 of the other array completed", "aftercorr:20",
     [v(21, RUNNING, array_job_id=20, array_task_id=1), v(22, COMPLETED, array_job_id=20,
                                                          array_task_id=2)],
     v(32, array_job_id=30, array_task_id=2), T0, SATISFIED, ""),
    ("aftercorr: a failed task fails its partner only", "aftercorr:20",
     [v(22, FAILED, array_job_id=20, array_task_id=2)],
     v(32, array_job_id=30, array_task_id=2), T0, NEVER, "aftercorr:20(failed)"),
    ("aftercorr: a task still in the other array's pending remainder waits", "aftercorr:20",
     [v(20, PENDING, array_job_id=20, array_task_id=-1, array_task_str="3-5")],
     v(34, array_job_id=30, array_task_id=4), T0, WAITING, "aftercorr:20(unfulfilled)"),
]


@pytest.mark.parametrize("text,jobs,me,now,want_state,want_left",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_evaluate(text, jobs, me, now, want_state, want_left):
    got = DependencyWorld(jobs + [me]).evaluate(text, me, now)
    assert (got.state, got.remaining) == (want_state, want_left), \
        f"want {want_state} {want_left!r}, got {got.state} {got.remaining!r}"


@pytest.mark.parametrize("text,want", [
    ("afterok:7", "afterok:7(unfulfilled)"),
    ("afterok:7:8", "afterok:7(unfulfilled),afterok:8(unfulfilled)"),
    ("AFTERANY:3?afternotok:4", "afterany:3(unfulfilled)?afternotok:4(unfulfilled)"),
    ("after:7+10,singleton", "after:7+10(unfulfilled),singleton(unfulfilled)"),
    ("afterok:5_2", "afterok:5_2(unfulfilled)"),
], ids=lambda x: x)
def test_parse_shows_as_scontrol_does(text, want):
    assert dep.parse(text).text() == want


@pytest.mark.parametrize("text", [
    "bogus", "", "afterok", "afterok:", "afterok:x", "afterok:7,afterany:8?afterok:9",
    "afterok:7+5", "singleton:3", "after:0", "afterok:7::8",
], ids=lambda x: repr(x))
def test_parse_refuses(text):
    with pytest.raises(ValueError):
        dep.parse(text)


@pytest.mark.parametrize("verdict_state,reason", [
    (WAITING, REASON_DEPENDENCY), (NEVER, REASON_DEPENDENCY_NEVER), (SATISFIED, ""),
], ids=["waiting reads Dependency", "never reads DependencyNeverSatisfied",
        "satisfied gives no reason"])
def test_verdict_reason(verdict_state, reason):
    assert dep.Verdict(verdict_state, "").reason == reason


@pytest.mark.parametrize("kw,want", [
    (dict(dependency=REASON_DEPENDENCY, begin_time=T0 + 60), REASON_DEPENDENCY),
    (dict(held=True, hold_admin=True, dependency=REASON_DEPENDENCY), "JobHeldAdmin"),
    (dict(held=True, dependency=REASON_DEPENDENCY_NEVER), "JobHeldUser"),
    (dict(begin_time=T0 + 60), "BeginTime"),
    (dict(begin_time=T0), None),
], ids=["a dependency shows before a begin time", "an admin hold shows before a dependency",
        "a user hold shows before a dependency", "a begin time in the future",
        "a begin time reached lets the job through"])
def test_eligibility_order(kw, want):
    got = JobEligibility().check(job(1, **kw), partition("debug", ("n1",)), T0)
    assert got == want, f"want {want}, got {got}"
