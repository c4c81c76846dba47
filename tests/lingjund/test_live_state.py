"""The live state in memory answers as the SQLite file does, and a pass reads no SQL per job.

The store keeps every unfinished job and every node in memory (lingjund/store/live.py);
what it answers from memory must be exactly what the file holds, after any mix of
writes, after a rolled-back transaction and after a restart.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund.service import jobs, scheduling
from lingjund.service.agents import Connection
from lingjund.service.views import Views
from lingjund.store.records import _job_from_row
from lingjund.store.store import Store

from tests.lingjund import handclock

SPEC = api_pb2.JobSpec(name="j", script="#!/bin/sh\ntrue\n", user="u", uid=1, batch=True)


def sql_jobs(store: Store, where: str, args=()) -> list:
    return [_job_from_row(r) for r in store.db.query(
        f"SELECT * FROM jobs WHERE {where} ORDER BY job_id", list(args))]


def assert_live_matches_file(store: Store, now: float) -> None:
    """Every read the live state answers, against the same question asked of SQL."""
    for states in ([slurm.PENDING], [slurm.RUNNING], [slurm.PENDING, slurm.RUNNING]):
        marks = ", ".join("?" for _ in states)
        assert store.jobs(states=states) == sql_jobs(store, f"state IN ({marks})", states)
    assert store.holding_jobs() == sql_jobs(store, "state = 'RUNNING' OR completing != '[]'")
    assert store.deadline_jobs() == sql_jobs(
        store, "state IN ('PENDING', 'RUNNING') AND deadline > 0")
    assert store.dependent_jobs() == sql_jobs(store, "state = 'PENDING' AND dependency != ''")
    begins = [j.eligible_time for j in sql_jobs(store, "state = 'PENDING' AND eligible_time > ?",
                                                [now])]
    assert store.next_eligible_time(now) == (min(begins) if begins else None)
    for uid in (1, 2):
        want = sum(len(slurm.unfold_indices(j.array_task_str)) if j.array_task_str else 1
                   for j in sql_jobs(store, "uid = ? AND state IN ('PENDING', 'RUNNING', 'COMPLETING')",
                                     [uid]))
        assert store.active_job_count(uid) == want
    for node in ("n1", "n2", "n3"):
        assert store.jobs_on_node(node) == [
            j for j in store.holding_jobs() if node in j.nodes]
    recent = now - 300
    assert store.jobs(ended_after=recent) == sql_jobs(
        store, "end_time = 0 OR end_time >= ? OR completing != '[]'", [recent])
    assert store.nodes() == {r.name: r for r in (store._node_sql(n["name"])
                                                 for n in store.db.query("SELECT name FROM nodes"))}


# One write of a random history: (what, job index, value)
WRITES = st.lists(st.tuples(
    st.sampled_from(["submit", "array", "start", "end", "complete", "requeue", "hold", "deadline",
                     "depend", "begin", "node", "fail"]),
    st.integers(0, 7), st.integers(0, 2)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=WRITES)
def test_live_state_answers_as_the_file_does(tmp_path_factory, writes):
    path = str(tmp_path_factory.mktemp("live") / "db.sqlite")
    now = 10_000.0
    store = Store(path, now=now)
    kept = Views()      # the scheduler's: follows the changes from pass to pass
    ids: list[int] = []
    nodes = ("n1", "n2", "n3")
    for what, i, v in writes:
        job = ids[i % len(ids)] if ids else None
        try:
            with store.transaction() as s:
                if what in ("submit", "array") or job is None:
                    jid = s.insert_job(name="j", user="u", uid=1 + v % 2, partition="p",
                                       state=slurm.PENDING, reason="None", priority=1,
                                       submit_time=now, time_limit_min=10, spec=SPEC)
                    if what == "array":
                        s.update_job(jid, array_job_id=jid, array_task_str=f"0-{v + 3}")
                    ids.append(jid)
                elif what == "start":
                    s.update_job(job, state=slurm.RUNNING, nodes=nodes[:v + 1],
                                 cpus_per_node=[1] * (v + 1), start_time=now, end_time=now + 600,
                                 gpus_per_node=[2] * (v + 1), gpu_ids=[[i, i + 1]] * (v + 1))
                elif what == "end":
                    s.update_job(job, state=slurm.COMPLETED, end_time=now - 400 * v,
                                 completing=list(nodes[:v]))
                elif what == "complete":
                    s.update_job(job, completing=[])
                elif what == "requeue":
                    s.update_job(job, state=slurm.PENDING, nodes=[], completing=[], end_time=0,
                                 gpu_ids=[])
                elif what == "hold":
                    s.update_job(job, held=bool(v), reason="JobHeldUser" if v else "None")
                elif what == "deadline":
                    s.update_job(job, deadline=float(now + v * 100))
                elif what == "depend":
                    s.update_job(job, dependency="afterok:1" if v else "")
                elif what == "begin":
                    s.update_job(job, eligible_time=now + (v - 1) * 50)
                elif what == "node":
                    s.put_node(nodes[v], registered=True, drain=bool(i % 2), reason=str(i))
                elif what == "fail":
                    s.update_job(job, state=slurm.CANCELLED, end_time=now)
                    raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        assert_live_matches_file(store, now)
        # the requests the next pass sees, kept up to date from the changes alone,
        # are those built afresh from every pending job
        waiting = {ids[0]: "Dependency"} if ids else {}
        assert (kept.pending_requests(store.live, {ids[-1]: 1} if ids else {}, waiting)
                == Views().pending_requests(store.live, {ids[-1]: 1} if ids else {}, waiting))
    store.close()
    reopened = Store(path, now=now)
    assert_live_matches_file(reopened, now)
    reopened.close()


def test_a_rolled_back_submission_leaves_nothing_in_memory(tmp_path):
    store = Store(str(tmp_path / "db.sqlite"))
    with pytest.raises(RuntimeError):
        with store.transaction() as s:
            jid = s.insert_job(name="j", user="u", uid=1, partition="p", state=slurm.PENDING,
                               reason="None", priority=1, submit_time=1.0, time_limit_min=1,
                               spec=SPEC)
            assert s.job(jid).state == slurm.PENDING      # seen inside its transaction
            raise RuntimeError("the disk said no")
    assert store.jobs(states=[slurm.PENDING]) == []
    assert store.active_job_count(1) == 0
    assert store.job(jid) is None


def test_finished_jobs_leave_memory_after_min_job_age_and_stay_in_accounting(tmp_path):
    store = Store(str(tmp_path / "db.sqlite"), keep_finished_s=300, now=1000.0)
    with store.transaction() as s:
        jid = s.insert_job(name="j", user="u", uid=1, partition="p", state=slurm.COMPLETED,
                           reason="None", priority=1, submit_time=900.0, time_limit_min=1,
                           end_time=1000.0, spec=SPEC)
    assert jid in store.live.jobs                       # squeue still shows it
    store.evict_finished(1400.0 - 300)
    assert jid not in store.live.jobs
    assert store.job(jid).state == slurm.COMPLETED      # sacct, scontrol show job: from SQL
    assert [j.job_id for j in store.jobs()] == [jid]


CONF = """
[[nodes]]
names = "node[1-8]"
cpus = 4
memory_mb = 4000
[[partitions]]
name = "debug"
nodes = "ALL"
"""


def statements_of_a_pass(tmp_path, pending: int) -> list[str]:
    tmp_path.mkdir()
    with handclock.controller(tmp_path, CONF, [f"node{i}" for i in range(1, 9)]) as ctl:
        for i in range(1, 9):
            ctl.agents.attach(Connection(node=f"node{i}"))
        held = api_pb2.JobSpec(name="held", script="#!/bin/sh\ntrue\n", user="u", uid=1,
                               batch=True, hold=True)
        busy = api_pb2.JobSpec(name="busy", script="#!/bin/sh\ntrue\n", user="u", uid=1,
                               batch=True, min_nodes=8, cpus_per_task=4, num_tasks=8)
        jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=busy))
        scheduling.run_pass(ctl)                        # takes every node
        for i in range(pending):                        # held, or waiting for resources
            jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=held if i % 2 else SPEC))
        scheduling.run_pass(ctl)                        # reasons settle
        seen: list[str] = []
        ctl.store.db.conn.set_trace_callback(seen.append)
        scheduling.run_pass(ctl)
        ctl.store.db.conn.set_trace_callback(None)
        return seen


def test_a_pass_reads_no_sql_that_grows_with_the_queue(tmp_path):
    few = statements_of_a_pass(tmp_path / "few", 5)
    many = statements_of_a_pass(tmp_path / "many", 200)
    assert not [s for s in many if s.lstrip().upper().startswith("SELECT")], many
    assert len(many) == len(few)
