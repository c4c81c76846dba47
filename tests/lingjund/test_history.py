"""The job history sacct reads: filters answered in SQL on indexes, pages over
a real gRPC stream, sacct's window as Slurm's, and the purge rule."""
from __future__ import annotations

import asyncio
import io
import pwd
import random

import grpc
import pytest

from cli import sacct
from lingjun import config
from lingjun.v1 import api_pb2
from lingjund.service import accounting, faulttol, jobs
from lingjund.service.context import Controller
from lingjund.store import history
from lingjund.store.store import Attempt, StepRecord, Store
from tests.lingjund.inproc import serve

DAY = 86400.0
NOW = 1_000 * DAY
# accounts this machine has, so that sacct -u resolves them
USERS = sorted(p.pw_name for p in pwd.getpwall())[:4]
ENDED = ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"]


def make_history(store: Store, n: int, seed: int = 7) -> list[dict]:
    """``n`` jobs over the last 30 days (a few still pending or running), one
    array of 5 tasks; returns each job's columns as inserted."""
    rng = random.Random(seed)
    rows = []
    with store.transaction() as st:
        for i in range(n):
            submit = NOW - 30 * DAY + rng.uniform(0, 30 * DAY)
            start = submit + rng.uniform(0, 3600)
            end = start + rng.uniform(60, 2 * DAY)
            state = rng.choice(ENDED)
            if i % 97 == 0:
                state, start, end = "PENDING", 0.0, 0.0
            elif i % 89 == 0:
                state, end = "RUNNING", 0.0
            elif end > NOW:
                state, end = "RUNNING", 0.0
            elif state == "CANCELLED" and i % 3 == 0:     # cancelled while pending
                start = 0.0
            eligible = 0.0 if i % 101 == 0 else submit    # held: never eligible
            user = USERS[i % len(USERS)]
            row = dict(name=f"job{i % 7}", user=user, uid=1000 + USERS.index(user),
                       partition="debug" if i % 2 else "gpu", state=state, priority=1,
                       submit_time=submit, eligible_time=eligible, start_time=start,
                       end_time=end, time_limit_min=60,
                       spec=api_pb2.JobSpec(account="physics" if i % 5 == 0 else ""))
            row["job_id"] = st.insert_job(**row)
            rows.append(row)
            if start and i % 4 == 0:
                st.put_step(StepRecord(job_id=row["job_id"], step_id="batch", name="batch",
                                       state=state, start_time=start, end_time=end))
        meta = rows[10]["job_id"]
        for t in range(5):
            row = dict(rows[20 + t])
            job_id = row.pop("job_id")
            st.update_job(job_id, array_job_id=meta, array_task_id=t)
            rows[20 + t]["array_job_id"] = meta
    return rows


def reference(rows: list[dict], q: history.HistoryQuery) -> list[int]:
    """What the query should select, written out in Python from sacct's man page."""
    out = []
    for r in rows:
        if q.job_ids and r["job_id"] not in q.job_ids and r.get("array_job_id", 0) not in q.job_ids:
            continue
        if q.users and r["user"] not in q.users:
            continue
        if q.names and r["name"] not in q.names:
            continue
        if q.partitions and r["partition"] not in q.partitions:
            continue
        if q.window is None:
            if q.states and r["state"] not in q.states:
                continue
        else:
            s, e = q.window
            el, st, en = r["eligible_time"], r["start_time"], r["end_time"]
            if not q.states:
                began = (el and el <= e) or (st and st <= e)
                if not (began and (en == 0 or en >= s)):
                    continue
            else:
                def during(state):
                    if state == "PENDING":
                        left = st or en or float("inf")
                        return bool(el) and el <= e and left >= s
                    if state == "RUNNING":
                        return bool(st) and st <= e and (en == 0 or en >= s)
                    return r["state"] == state and en and s <= en <= e
                if not any(during(x) for x in q.states):
                    continue
        out.append(r["job_id"])
    return sorted(out)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    store = Store(str(tmp_path_factory.mktemp("history") / "db.sqlite"))
    rows = make_history(store, 3000)
    yield store, rows
    store.close()


WEEK_AGO, TWO_WEEKS_AGO = NOW - 7 * DAY, NOW - 14 * DAY
QUERIES = [
    (history.HistoryQuery(window=(WEEK_AGO, NOW)), "jobs_end"),
    (history.HistoryQuery(users=(USERS[1],), window=(TWO_WEEKS_AGO, WEEK_AGO)), "jobs_user_end"),
    (history.HistoryQuery(names=("job3",), window=(0, NOW)), "jobs_name"),
    (history.HistoryQuery(states=("FAILED", "TIMEOUT"), window=(TWO_WEEKS_AGO, WEEK_AGO)),
     "jobs_state_end"),
    (history.HistoryQuery(job_ids=(5, 11, 2999)), "PRIMARY KEY"),
    (history.HistoryQuery(states=("RUNNING", "PENDING"), window=(WEEK_AGO, WEEK_AGO + DAY)), None),
    (history.HistoryQuery(users=(USERS[0], USERS[2]), partitions=("gpu",), states=("COMPLETED",)),
     "jobs_user_end"),
    (history.HistoryQuery(job_ids=(11,), states=("CANCELLED",), window=(0, NOW)), None),
]
IDS = ["-S a week ago: eligible or running in the window", "-u U -S/-E", "--name job3",
       "-s F,TO during a week", "-j 5,11,2999 (11 heads an array)", "-s R,PD during one day",
       "-u U,V -r gpu -s CD, no window (-j form)", "-j 11 -s CA -S 0"]


@pytest.mark.parametrize("q,index", QUERIES, ids=IDS)
def test_each_filter_selects_exactly_what_sacct_s_rules_say_and_uses_its_index(big, q, index):
    store, rows = big
    reader = history.HistoryReader(store.path)
    try:
        got = [j.job_id for page in reader.pages(q, rows=100) for j in page]
        plan = " / ".join(reader.plan(q))
    finally:
        reader.close()
    want = reference(rows, q)
    assert want, "the case selects nothing: it would prove nothing"
    assert len(want) < len(rows) or q.window == (0, NOW)
    assert got == want, f"{len(got)} rows, want {len(want)}; first differences: " \
                        f"{sorted(set(got) ^ set(want))[:10]}"
    if index:
        assert index in plan, f"want the query to use {index}, plan: {plan}"
        assert "SCAN jobs" not in plan.replace("SCAN jobs USING", ""), plan


def test_a_held_job_never_eligible_is_not_in_a_window_but_is_found_by_id(big):
    store, rows = big
    held = next(r for r in rows if r["eligible_time"] == 0 and r["start_time"] == 0)
    reader = history.HistoryReader(store.path)
    try:
        windowed = {j.job_id for p in reader.pages(history.HistoryQuery(window=(0, NOW))) for j in p}
        by_id = [j.job_id for p in reader.pages(history.HistoryQuery(job_ids=(held["job_id"],)))
                 for j in p]
    finally:
        reader.close()
    assert held["job_id"] not in windowed
    assert by_id == [held["job_id"]]


def test_the_reader_cannot_write(big):
    store, _ = big
    reader = history.HistoryReader(store.path)
    try:
        with pytest.raises(Exception, match="readonly"):
            reader.conn.execute("DELETE FROM jobs")
    finally:
        reader.close()
    assert store.job(1) is not None


# -- over gRPC, through sacct -----------------------------------------------------------

CONF = '[[nodes]]\nnames = "node[1-2]"\ncpus = 4\n[[partitions]]\nname = "debug"\nnodes = "ALL"\n' \
       '[[partitions]]\nname = "gpu"\nnodes = "ALL"\n'


class StubApi:
    """sacct's view of the controller, over the test's signed channel."""

    def __init__(self, stub):
        self.stub = stub

    def call(self, method, request, timeout=None, **kw):
        return getattr(self.stub, method)(request, timeout=timeout)


def run_sacct(stub, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = sacct.main(argv, api=StubApi(stub), out=out, err=err, now=NOW)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("sacct"), CONF) as s:
        s.ctl.clock = lambda: NOW
        rows = make_history(s.store, 5000, seed=11)
        yield s, rows


def ids_of(out: str) -> list[int]:
    """The JobIDRaw column of -n -P -X output."""
    return [int(line.split("|")[0]) for line in out.splitlines()]


def test_sacct_a_over_more_than_one_page_prints_every_job_once_in_order(served):
    s, rows = served
    rc, out, err = run_sacct(s.stub, ["-a", "-X", "-n", "-P", "-S", "1970-01-02", "-o", "JobIDRaw"])
    assert (rc, err) == (0, "")
    want = reference(rows, history.HistoryQuery(window=(0, NOW)))
    assert len(want) > history.PAGE_ROWS, "the answer must take more than one page"
    assert sorted(ids_of(out)) == want     # an array's tasks print after its first record


def test_sacct_filters_against_the_controller_match_the_rules(served):
    """-S/-E, -s, --name, -r and -u through sacct, answered by the controller."""
    s, rows = served
    fmt = ["-n", "-P", "-X", "-o", "JobIDRaw"]
    day = lambda t: __import__("datetime").datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")
    cases = [
        (["-a", "-S", day(NOW - 3 * DAY), "-E", day(NOW - 2 * DAY)],
         history.HistoryQuery(window=(int(NOW - 3 * DAY), int(NOW - 2 * DAY)))),
        (["-a", "-s", "F", "-S", day(NOW - 10 * DAY)],
         history.HistoryQuery(states=("FAILED",), window=(int(NOW - 10 * DAY), NOW))),
        (["-a", "--name", "job2", "-S", day(NOW - 5 * DAY)],
         history.HistoryQuery(names=("job2",), window=(int(NOW - 5 * DAY), NOW))),
        (["-a", "-r", "gpu", "-S", day(NOW - 1 * DAY)],
         history.HistoryQuery(partitions=("gpu",), window=(int(NOW - DAY), NOW))),
        (["-u", USERS[2], "-S", day(NOW - 4 * DAY), "-E", day(NOW - 1 * DAY)],
         history.HistoryQuery(users=(USERS[2],), window=(int(NOW - 4 * DAY), int(NOW - DAY)))),
        (["-u", USERS[1], "-s", "CA,TO", "-S", day(NOW - 20 * DAY), "-E", day(NOW - 3 * DAY)],
         history.HistoryQuery(users=(USERS[1],), states=("CANCELLED", "TIMEOUT"),
                              window=(int(NOW - 20 * DAY), int(NOW - 3 * DAY)))),
    ]
    for argv, q in cases:
        rc, out, err = run_sacct(s.stub, [*argv, *fmt])
        want = reference(rows, q)
        assert (rc, err) == (0, ""), argv
        assert want and len(want) < len(rows), argv
        assert sorted(ids_of(out)) == want, f"sacct {' '.join(argv)}"


def test_sacct_j_of_an_array_and_X_and_A(served):
    s, rows = served
    meta = rows[10]["job_id"]
    rc, out, _ = run_sacct(s.stub, ["-j", str(meta), "-n", "-P", "-X", "-o", "JobID"])
    assert rc == 0 and len(out.split()) == 6, out          # the meta record and its 5 tasks
    rc, out, _ = run_sacct(s.stub, ["-j", f"{meta}_3", "-n", "-P", "-X", "-o", "JobID"])
    assert out.split() == [f"{meta}_3"]
    rc, out, _ = run_sacct(s.stub, ["-a", "-A", "physics", "-S", "1970-01-02", "-n", "-P", "-X",
                                    "-o", "JobIDRaw,Account"])
    accounts = {line.split("|")[1] for line in out.splitlines()}
    assert rc == 0 and accounts == {"physics"}, accounts
    want = reference([r for r in rows if r["spec"].account == "physics"],
                     history.HistoryQuery(window=(0, NOW)))
    assert sorted(ids_of(out)) == want


def test_sacct_X_reads_no_steps_yet_keeps_the_derived_exit_code(served):
    s, rows = served
    job = rows[40]["job_id"]
    with s.store.transaction() as st:
        st.put_step(StepRecord(job_id=job, step_id="0", name="a", state="FAILED", exit_code=3))
        st.put_step(StepRecord(job_id=job, step_id="1", name="b", state="FAILED", exit_code=7,
                               exit_signal=0))
        st.put_step(StepRecord(job_id=job, step_id="batch", name="batch", state="FAILED",
                               exit_code=9))
    with_steps = run_sacct(s.stub, ["-j", str(job), "-n", "-P", "-o", "JobID,DerivedExitCode"])[1]
    without = run_sacct(s.stub, ["-j", str(job), "-n", "-P", "-X", "-o", "JobID,DerivedExitCode"])[1]
    assert without.splitlines() == with_steps.splitlines()[:1] == [f"{job}|7:0"]
    assert len(with_steps.splitlines()) == 4
    reply = list(s.stub.GetAccounting(api_pb2.GetJobsRequest(job_ids=[job], with_steps=False)))
    assert [len(j.steps) for r in reply for j in r.jobs] == [0], "-X must not send steps"


def test_unknown_job_ids_are_not_found_and_sacct_prints_the_header(served):
    s, _ = served
    with pytest.raises(grpc.RpcError) as e:
        list(s.stub.GetAccounting(api_pb2.GetJobsRequest(job_ids=[999_999])))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    rc, out, err = run_sacct(s.stub, ["-j", "999999", "-P", "-o", "JobID,State"])
    assert (rc, out, err) == (0, "JobID|State\n", "")


# -- the purge rule --------------------------------------------------------------------------

def test_purge_deletes_only_finished_jobs_older_than_the_rule_in_batches(tmp_path):
    store = Store(str(tmp_path / "db.sqlite"))
    cfg = config.parse('[accounting]\npurge_job_after = "30days"\npurge_batch_jobs = 3\n')
    ctl = Controller(config=cfg, store=store, clock=lambda: NOW)
    old, recent = NOW - 40 * DAY, NOW - 10 * DAY
    spec = api_pb2.JobSpec()
    base = dict(name="j", user="alice", uid=1000, partition="debug", priority=1,
                submit_time=old - 100, time_limit_min=10, spec=spec)
    with store.transaction() as st:
        purged = [st.insert_job(**base, state=s, start_time=old - 50, end_time=old)
                  for s in ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                            "COMPLETED", "OUT_OF_MEMORY"]]
        kept = {
            "recent": st.insert_job(**base, state="COMPLETED", start_time=recent - 5, end_time=recent),
            "pending": st.insert_job(**base, state="PENDING"),
            "running": st.insert_job(**base, state="RUNNING", start_time=old - 50),
            "completing": st.insert_job(**base, state="COMPLETED", start_time=old - 50,
                                        end_time=old, completing=("node1",)),
            "array remainder": st.insert_job(**base, state="PENDING", array_task_str="4-9"),
        }
        for j in purged + list(kept.values()):
            st.put_step(StepRecord(job_id=j, step_id="batch", name="batch", state="COMPLETED"))
            st.put_attempt(Attempt(job_id=j, attempt=1, state="NODE_FAIL"))
            st.add_job_event(j, old, "requeued", "node lost")

    assert asyncio.run(accounting.purge(ctl)) == len(purged)
    left = {j.job_id for j in store.jobs()}
    assert left == set(kept.values()), f"kept {sorted(left)}, want {kept}"
    assert set(store.steps(purged + list(kept.values()))) == set(kept.values())
    assert set(store.attempts(purged + list(kept.values()))) == set(kept.values())
    assert all(store.job_events(j) == [] for j in purged)
    assert all(store.job_events(j) for j in kept.values())
    assert asyncio.run(accounting.purge(ctl)) == 0
    store.close()


def test_without_the_rule_nothing_is_ever_purged(tmp_path):
    store = Store(str(tmp_path / "db.sqlite"))
    ctl = Controller(config=config.Config(), store=store, clock=lambda: NOW)
    with store.transaction() as st:
        st.insert_job(name="j", user="a", uid=1, partition="debug", priority=1, submit_time=1.0,
                      time_limit_min=1, spec=api_pb2.JobSpec(), state="COMPLETED", end_time=2.0)
    assert asyncio.run(accounting.purge(ctl)) == 0
    assert len(store.jobs()) == 1
    store.close()


# -- the reader process's answer is the controller's own --------------------------------------

class LiveAnswer:
    """GetAccounting answered in this process from the controller's own store
    and job_info: the answer as the controller itself builds a job's record
    (squeue's, scontrol's), for ``ids`` in id order."""

    def __init__(self, ctl, ids: list[int]):
        self.ctl, self.ids = ctl, ids

    def call(self, method, request, timeout=None, **kw):
        store = self.ctl.store
        steps = store.steps(self.ids) if request.with_steps else {}
        runs = store.attempts(self.ids)
        reply = api_pb2.GetJobsResponse(now=int(NOW))
        for i in self.ids:
            info = jobs.job_info(self.ctl, store.job(i), steps.get(i), NOW)
            info.attempts.extend(faulttol.attempt_msgs(runs.get(i, [])))
            reply.jobs.append(info)
        return [reply]


def test_sacct_prints_through_the_reader_process_exactly_what_the_controller_s_records_give(served):
    s, rows = served
    # a restarted job with its earlier run (-D), and steps with usage
    job = rows[60]["job_id"]
    with s.store.transaction() as st:
        st.update_job(job, restarts=1)
        st.put_attempt(Attempt(job_id=job, attempt=1, state="NODE_FAIL", start_time=NOW - 9 * DAY,
                               end_time=NOW - 9 * DAY + 60, nodes=("node1",)))
        st.put_step(StepRecord(job_id=job, step_id="0", name="work", state="COMPLETED",
                               exit_code=0, nodes=("node1", "node2"), num_tasks=8, num_cpus=8,
                               max_rss_kb=123456, ave_rss_kb=100000, max_rss_node="node2",
                               user_cpu_ms=98765, system_cpu_ms=4321,
                               start_time=NOW - 8 * DAY, end_time=NOW - 8 * DAY + 30))
    ids = reference(rows, history.HistoryQuery(window=(0, NOW)))
    argv = ["-a", "-D", "-S", "1970-01-02", "-P", "-o",
            "JobID,JobIDRaw,JobName,User,UID,Group,Account,Partition,State,ExitCode,"
            "DerivedExitCode,Submit,Eligible,Start,End,Elapsed,Timelimit,NNodes,NCPUS,NTasks,"
            "NodeList,MaxRSS,AveRSS,MaxRSSNode,TotalCPU,UserCPU,SystemCPU,Reason,QOS,WorkDir"]
    rc, through_reader, err = run_sacct(s.stub, argv)
    assert (rc, err) == (0, "")
    out = io.StringIO()
    assert sacct.main(argv, api=LiveAnswer(s.ctl, ids), out=out, err=io.StringIO(), now=NOW) == 0
    assert through_reader.count("\n") > 2 * history.PAGE_ROWS, "more than one page"
    assert f"{job}|{job}|" in through_reader and "NODE_FAIL" in through_reader
    assert through_reader == out.getvalue()
