"""Arrays in the service layer over a real SQLite store: one row per submission,
tasks split off as they start or are cancelled, as Slurm keeps them."""
from __future__ import annotations

import pytest

from lingjun import config, slurm
from lingjun.v1 import api_pb2
from lingjund.sched.snapshot import Plan, Start
from lingjund.service import errors, jobs, scheduling
from lingjund.service.context import Controller
from lingjund.store.store import Store

CONF = """
[controller]
max_array_size = 10001
[[nodes]]
names = "node[1-4]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "debug"
nodes = "ALL"
"""


@pytest.fixture
def ctl(tmp_path):
    store = Store(str(tmp_path / "db.sqlite"))
    yield Controller(config=config.parse(CONF), store=store, clock=lambda: 1000.0)
    store.close()


def submit(ctl, array: str, **kw) -> int:
    spec = api_pb2.JobSpec(name="arr", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u",
                           uid=1, batch=True, array=array, **kw)
    return jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id


def start(task: int, job_id: int, node: str = "node1") -> Start:
    return Start(job_id=job_id, nodes=(node,), cpus_per_node=(1,), mem_per_node_mb=(0,),
                 gpus_per_node=(0,), tasks_per_node=(1,), array_task_id=task)


def rows(ctl) -> list[tuple]:
    return [(j.job_id, j.array_job_id, j.array_task_id, j.array_task_str, j.state)
            for j in ctl.store.jobs()]


def test_ten_thousand_tasks_are_one_row(ctl):
    a = submit(ctl, "1-10000%50")
    meta = ctl.store.job(a)
    assert rows(ctl) == [(a, a, -1, "1-10000", "PENDING")]
    assert meta.array_max_running == 50
    assert meta.stdout_path == f"/w/slurm-{a}_4294967294.out"


@pytest.mark.parametrize("spec", ["1-10001", "x", "5-1", "1-4:0"],
                         ids=["an index at MaxArraySize", "not a number", "a range backwards",
                              "a zero step"])
def test_a_bad_array_is_refused_before_anything_is_written(ctl, spec):
    before = ctl.store.dump()
    with pytest.raises(errors.InvalidArraySpec, match="Invalid job array specification"):
        submit(ctl, spec)
    assert ctl.store.dump() == before


def test_a_lone_task_is_that_task_from_the_start(ctl):
    a = submit(ctl, "7")
    assert rows(ctl) == [(a, a, 7, "", "PENDING")]


def test_started_tasks_split_off_and_the_last_keeps_the_arrays_id(ctl):
    a = submit(ctl, "1-3", stdout_pattern="o-%A_%a.out")
    started = scheduling.apply_plan(ctl, Plan(starts=(start(1, a), start(2, a, "node2"))), 1000.0)
    t1, t2 = (j.job_id for j in started)
    assert rows(ctl) == [(a, a, -1, "3", "PENDING"), (t1, a, 1, "", "RUNNING"),
                         (t2, a, 2, "", "RUNNING")]
    assert [j.stdout_path for j in started] == [f"/w/o-{a}_1.out", f"/w/o-{a}_2.out"]
    assert started[1].nodes == ("node2",)
    last = scheduling.apply_plan(ctl, Plan(starts=(start(3, a),)), 1000.0)
    assert [j.job_id for j in last] == [a]
    assert rows(ctl)[0] == (a, a, 3, "", "RUNNING")
    assert ctl.store.job(a).stdout_path == f"/w/o-{a}_3.out"


def test_a_start_for_a_task_cancelled_since_the_snapshot_is_skipped(ctl):
    a = submit(ctl, "1-3")
    jobs.cancel(ctl, api_pb2.CancelJobsRequest(
        array_tasks=[api_pb2.ArrayTaskSelection(array_job_id=a, task_ids=[2])]))
    assert scheduling.apply_plan(ctl, Plan(starts=(start(2, a),)), 1000.0) == []


def test_cancelling_a_pending_task_splits_it_off_cancelled(ctl):
    a = submit(ctl, "1-3")
    reply = jobs.cancel(ctl, api_pb2.CancelJobsRequest(requester_uid=1, array_tasks=[
        api_pb2.ArrayTaskSelection(array_job_id=a, task_ids=[2, 9])]))
    t2 = next(r.job_id for r in reply.results if r.ok)
    assert sorted((r.array_id, r.ok, r.error) for r in reply.results) == [
        (f"{a}_2", True, ""), (f"{a}_9", False, "Invalid job id specified")]
    assert rows(ctl) == [(a, a, -1, "1,3", "PENDING"), (t2, a, 2, "", "CANCELLED")]
    assert ctl.store.job(t2).cancelled_by == "1"


def test_cancelling_every_pending_task_cancels_the_remainder_in_one_row(ctl):
    a = submit(ctl, "1-10000")
    reply = jobs.cancel(ctl, api_pb2.CancelJobsRequest(array_tasks=[
        api_pb2.ArrayTaskSelection(array_job_id=a, task_ids=list(range(1, 10001)))]))
    assert [(r.job_id, r.ok) for r in reply.results] == [(a, True)]
    assert rows(ctl) == [(a, a, -1, "1-10000", "CANCELLED")]


def test_the_array_id_cancels_pending_and_running_tasks(ctl):
    a = submit(ctl, "1-3")
    scheduling.apply_plan(ctl, Plan(starts=(start(1, a),)), 1000.0)
    reply = jobs.cancel(ctl, api_pb2.CancelJobsRequest(job_ids=[a]))
    assert sorted(r.ok for r in reply.results) == [True, True]
    got = {j.array_task_id: (j.state, j.kill_reason) for j in ctl.store.jobs()}
    assert got == {-1: (slurm.CANCELLED, ""), 1: (slurm.RUNNING, slurm.CANCELLED)}


def test_the_snapshot_asks_once_for_the_remainder_within_the_throttle(ctl):
    a = submit(ctl, "1-6%2")
    scheduling.apply_plan(ctl, Plan(starts=(start(1, a),)), 1000.0)
    pending = scheduling.build_snapshot(ctl, 1000.0).pending
    assert [(p.job_id, p.array_tasks, p.array_slots) for p in pending] == [(a, (2, 3, 4, 5, 6), 1)]
