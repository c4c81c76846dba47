"""Job arrays as squeue, scontrol and sacct show them, against real Slurm 22.05.

The capture's arrays: 12 (array.sh, --array=1-3, name "arr") and 13
(--array=1-3, name "arrp"), both pending behind a job that holds the whole
cluster. Later 13_2 was cancelled while pending, and at the end everything
was cancelled; 12's tasks had started by then (12_1 as job 16, 12_2 as 17,
12_3 keeping the array's id 12 as its last task).
"""
from __future__ import annotations

import pytest

from cli.formats import squeue as squeue_format, show_job, sacct as sacct_format
from cli.common import parse_array_selectors, select_array_tasks
from tests.cli.golden_files import load
from tests.cli.test_formats import PRIO, array_jobs, at, busy_jobs, job, sc_job, step, utc  # noqa: F401


def squeue(jobs, fmt=squeue_format.SQUEUE_DEFAULT_FORMAT, header=True, selectors=(), unfold=False):
    return squeue_format.squeue_table(select_array_tasks(jobs, list(selectors), unfold=unfold), fmt,
                                header=header)


def after_cancel_13_2() -> list:
    """Array 13 once 13_2 was cancelled while pending: split off as job 19, CANCELLED."""
    meta = job(13, "arrp", reason="Priority", submit="10:04:04", array_job_id=13,
               array_task_id=-1, array_task_str="1,3")
    task2 = job(19, "arrp", "CANCELLED", submit="10:04:04", array_job_id=13, array_task_id=2,
                start="10:04:10", end="10:04:10", cancelled_by="0")
    return [meta, task2]


SQUEUE_CASES = [
    ("squeue_r_array", lambda: squeue(busy_jobs(), unfold=True)),
    ("squeue_j_array_task", lambda: squeue(busy_jobs(), "%i %T %r", header=False,
                                           selectors=parse_array_selectors("squeue", "12_2"))),
    ("squeue_after_array_task_cancel", lambda: squeue(
        [j for j in after_cancel_13_2() if j.state == "PENDING"], "%i %T", header=False,
        selectors=parse_array_selectors("squeue", "13"), unfold=True)),
]


@pytest.mark.parametrize("name, render", SQUEUE_CASES, ids=[
    "-r shows every pending task of an array on a line of its own",
    "-j A_T picks one pending task out of the array",
    "a task cancelled while pending is gone from the array's pending tasks",
])
def test_squeue_arrays_match_golden(name, render):
    want = load(name).stdout
    got = render()
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


@pytest.mark.parametrize("info, fmt, want", [
    (dict(array_job_id=12, array_task_id=-1, array_task_str="4-9%2"), "%i|%A|%F|%K",
     "12_[4-9%2]|12|12|4-9%2"),
    (dict(job_id=17, array_job_id=12, array_task_id=2), "%i|%A|%F|%K", "12_2|17|12|2"),
    (dict(job_id=7), "%i|%A|%F|%K", "7|7|7|N/A"),
], ids=["a throttled remainder shows its tasks and %N inside brackets",
        "a running task shows A_T, its own id and the array's",
        "a plain job has no array index"])
def test_squeue_array_letters(info, fmt, want):
    j = job(info.pop("job_id", 12), **info)
    assert squeue_format.squeue_table([j], fmt, header=False) == want + "\n"


def test_squeue_O_array_fields():
    j = job(17, array_job_id=12, array_task_id=2, state="RUNNING", nodes="node1")
    got = squeue_format.squeue_O_table([j], "JobID:6,JobArrayID:8,ArrayJobID:6,ArrayTaskID:4",
                                 header=False)
    assert got == "17    12_2    12    2   \n"


def test_scontrol_show_job_array_matches_golden():
    g = load("scontrol_show_job_array")
    meta = array_jobs()[0]
    got = sc_job(meta, default_mem_mb=2000)
    want = g.stdout.replace("Scheduler=Backfill", "Scheduler=Main")
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


def test_scontrol_shows_the_throttle():
    meta = job(12, "arr", array_job_id=12, array_task_id=-1, array_task_str="4-9%2",
               array_max_running=2)
    first = show_job.scontrol_show_job([meta]).splitlines()[0]
    assert first == "JobId=12 ArrayJobId=12 ArrayTaskId=4-9%2 ArrayTaskThrottle=2 JobName=arr"


def sacct_12() -> list:
    end = "10:06:00"

    def task(job_id, t, node):
        return job(job_id, "arr", "CANCELLED", nodes=node, start="10:04:30", end=end,
                   cancelled_by="0", array_job_id=12, array_task_id=t,
                   steps=[step("batch", "batch", "CANCELLED", node, 0, 15)])
    return [task(12, 3, "node4"), task(16, 1, "node2"), task(17, 2, "node4")]


def sacct_13() -> list:
    meta, task2 = after_cancel_13_2()
    meta.state, meta.cancelled_by = "CANCELLED", "0"
    meta.start_time = meta.end_time = at("10:04:11")
    return [meta, task2]


FIVE = "JobID,JobName,State,ExitCode,NodeList"


@pytest.mark.parametrize("name, jobs", [
    ("sacct_array", sacct_12),
    ("sacct_array_cancelled_task", sacct_13),
], ids=["started tasks show as A_T and A_T.batch in task order",
        "tasks that never started fold into one A_[1-3] row, None assigned"])
def test_sacct_arrays_match_golden(name, jobs):
    want = load(name).stdout
    got = sacct_format.sacct_table(jobs(), FIVE, parsable="parsable2")
    assert got == want, f"\nwant:\n{want}\ngot:\n{got}"


@pytest.mark.parametrize("text, want", [
    ("12", [(12, None)]),
    ("12_3", [(12, {3})]),
    ("12_[1-3,7],14", [(12, {1, 2, 3, 7}), (14, None)]),
], ids=["an array id", "one task", "a bracketed list with commas inside, then another id"])
def test_job_selectors(text, want):
    got = [(a, set(t) if t is not None else None) for a, t in parse_array_selectors("squeue", text)]
    assert got == want


def test_after_completion_the_arrays_show_as_slurm_lists_them():
    """squeue -t all once 13 was cancelled whole and 12's tasks all ran: "13 CANCELLED"
    and 12_1..12_3 in task order (12_3 kept the id 12). 13_2, split off when it was
    cancelled alone, is left out here: Slurm keeps no row of its own for it."""
    want = [line for line in load("squeue_default_after_completion").stdout.splitlines()
            if line.split()[0].split("_")[0] in ("12", "13")]
    meta13 = after_cancel_13_2()[0]
    meta13.state = "CANCELLED"
    running = [job(12, "arr", "RUNNING", nodes="node4", array_job_id=12, array_task_id=3),
               job(16, "arr", "RUNNING", nodes="node2", array_job_id=12, array_task_id=1,
                   priority=PRIO - 12),
               job(17, "arr", "RUNNING", nodes="node4", array_job_id=12, array_task_id=2,
                   priority=PRIO - 12)]
    got = squeue_format.squeue_table([meta13] + running, "%i %T", header=False).splitlines()
    assert got == want
