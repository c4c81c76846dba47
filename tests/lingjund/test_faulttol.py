"""Fault tolerance in the service layer over a real SQLite store: node loss,
restart policy and backoff, hang detection, the history a job keeps."""
from __future__ import annotations

import pytest

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.sched.snapshot import Plan, Start
from lingjund.service import batch, errors, faulttol, jobs, nodes, restarts, scheduling, timers
from lingjund.service.agents import Connection
from tests.lingjund import handclock

CONF = """
[controller]
heartbeat_timeout_s = 3
[faulttol]
restart_backoff_s = 10
restart_backoff_max_s = 25
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
    with handclock.controller(tmp_path, CONF, [f"node{i}" for i in range(1, 5)], last_seen=1000.0) as c:
        yield c


def connect(ctl, *names) -> dict[str, Connection]:
    out = {}
    for n in names:
        out[n] = Connection(node=n, last_heartbeat=ctl.clock())   # as registration sets it
        ctl.agents.attach(out[n])
    return out


def sent(conn: Connection) -> list[str]:
    out = []
    while not conn.outbox.empty():
        msg = conn.outbox.get_nowait()
        out.append(msg.WhichOneof("msg") if msg is not None else "close")
    return out


def run_job(ctl, nodes=("node1", "node2"), **kw) -> int:
    spec = api_pb2.JobSpec(name="train", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u",
                           uid=1, batch=True, min_nodes=len(nodes), **kw)
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id
    n = len(nodes)
    scheduling.apply_plan(ctl, Plan(starts=(Start(
        job_id=jid, nodes=tuple(nodes), cpus_per_node=(1,) * n, mem_per_node_mb=(0,) * n,
        gpus_per_node=(0,) * n, tasks_per_node=(1,) * n),)), ctl.clock())
    with ctl.store.transaction() as st:
        st.update_job(jid, launched=True)
    return jid


def lose(ctl, name: str) -> None:
    with ctl.store.transaction() as st:
        st.put_node(name, down=True, reason=nodes.NOT_RESPONDING)
    faulttol.handle_lost_nodes(ctl)


def finished(ctl, node: str, jid: int, exit_code: int = 0, sig: int = 0) -> None:
    batch.record_batch_finished(ctl, node, agent_pb2.BatchFinished(
        job_id=jid, exit_code=exit_code, signal=sig, start_time=1000, end_time=int(ctl.clock())))


def kinds(ctl, jid) -> list[str]:
    return [e.kind for e in ctl.store.job_events(jid)]


def test_losing_the_batch_host_requeues_the_gang_and_stops_the_survivor(ctl):
    conns = connect(ctl, "node2")
    jid = run_job(ctl, requeue=True)
    ctl.clock.now = 1010.0
    lose(ctl, "node1")
    job = ctl.store.job(jid)
    assert (job.state, job.reason, job.restarts) == ("PENDING", "BeginTime", 1)
    assert job.eligible_time == 1010.0 + 10, "first restart waits restart_backoff_s"
    assert job.completing == ("node2",), "the survivor still cleans up"
    assert sent(conns["node2"]) == ["terminate_job"]
    [a] = ctl.store.attempts([jid])[jid]
    assert (a.attempt, a.state, a.nodes, a.start_time, a.end_time) == (
        1, "NODE_FAIL", ("node1", "node2"), 1000.0, 1010.0)
    assert kinds(ctl, jid) == ["node_lost", "requeued"]
    assert "node node1 lost (Not responding) while running on node[1-2]" in \
        ctl.store.job_events(jid)[0].text
    batch.job_cleaned(ctl, "node2", agent_pb2.JobCleaned(job_id=jid))
    assert ctl.store.job(jid).nodes == (), "released once the survivor is clean"


def test_losing_another_node_stops_the_script_whose_end_then_requeues_the_job(ctl):
    conns = connect(ctl, "node1")
    jid = run_job(ctl, requeue=True)
    lose(ctl, "node2")
    job = ctl.store.job(jid)
    assert (job.state, job.kill_reason) == ("RUNNING", "NODE_FAIL")
    assert sent(conns["node1"]) == ["terminate_job"]
    lose(ctl, "node2")          # the next pass: nothing more to do
    assert sent(conns["node1"]) == [] and kinds(ctl, jid) == ["node_lost"]
    finished(ctl, "node1", jid, sig=15)
    job = ctl.store.job(jid)
    assert (job.state, job.restarts, job.completing) == ("PENDING", 1, ("node1",))
    assert [a.state for a in ctl.store.attempts([jid])[jid]] == ["NODE_FAIL"]
    assert ctl.store.steps([jid])[jid][0].state == "NODE_FAIL"


def test_a_job_that_may_not_be_requeued_ends_node_fail(ctl):
    connect(ctl, "node2")
    jid = run_job(ctl, requeue=False)
    lose(ctl, "node1")
    job = ctl.store.job(jid)
    assert (job.state, job.reason, job.restarts) == ("NODE_FAIL", "NodeDown", 0)
    assert ctl.store.attempts([jid]) == {}
    assert kinds(ctl, jid) == ["node_lost"]


def test_a_requeued_job_starts_again_on_nodes_that_are_up(ctl):
    connect(ctl, "node2", "node3", "node4")
    jid = run_job(ctl, requeue=True)
    lose(ctl, "node1")
    batch.job_cleaned(ctl, "node2", agent_pb2.JobCleaned(job_id=jid))
    ctl.clock.now = 1011.0
    assert scheduling.run_pass(ctl) == 1
    job = ctl.store.job(jid)
    assert job.state == "RUNNING" and "node1" not in job.nodes, job.nodes
    assert ctl.store.job_events(jid)[-1].text == \
        f"attempt 2 started on {slurm.compress_hostlist(list(job.nodes))}"
    launch = batch.launch_message(ctl, job).launch_batch
    jobs_env = dict(launch.environment)
    assert jobs_env["SLURM_RESTART_COUNT"] == "1"
    assert jobs_env["LINGJUN_CHECKPOINT_DIR"] == f"{ctl.config.controller.state_dir}/checkpoints/{jid}"
    assert jobs_env["LINGJUN_HEARTBEAT_FILE"].startswith(jobs_env["LINGJUN_CHECKPOINT_DIR"] + "/")


def test_max_restarts_restarts_a_failed_run_with_a_doubling_capped_backoff(ctl):
    connect(ctl, "node1")
    jid = run_job(ctl, nodes=("node1",), max_restarts=3)
    waits = []
    for attempt in range(4):
        ctl.clock.now += 100
        finished(ctl, "node1", jid, exit_code=1)
        job = ctl.store.job(jid)
        if job.state == "PENDING":
            waits.append(job.eligible_time - ctl.clock.now)
            batch.job_cleaned(ctl, "node1", agent_pb2.JobCleaned(job_id=jid))
            scheduling.apply_plan(ctl, Plan(starts=(Start(
                job_id=jid, nodes=("node1",), cpus_per_node=(1,), mem_per_node_mb=(0,),
                gpus_per_node=(0,), tasks_per_node=(1,)),)), ctl.clock.now)
    assert waits == [10, 20, 25], "10 s, doubled, capped at restart_backoff_max_s"
    job = ctl.store.job(jid)
    assert (job.state, job.reason, job.restarts) == ("FAILED", "NonZeroExitCode", 3)
    assert [a.state for a in ctl.store.attempts([jid])[jid]] == ["FAILED"] * 3
    assert kinds(ctl, jid)[-1] == "gave_up"


def test_a_failed_run_without_max_restarts_is_final(ctl):
    connect(ctl, "node1")
    jid = run_job(ctl, nodes=("node1",), requeue=True)
    finished(ctl, "node1", jid, exit_code=2)
    assert ctl.store.job(jid).state == "FAILED"
    assert kinds(ctl, jid) == []


def test_a_job_silent_past_its_hang_timeout_is_stopped_and_restarted(ctl):
    conns = connect(ctl, "node1")
    jid = run_job(ctl, nodes=("node1",), hang_timeout_s=5, max_restarts=1)
    quiet = run_job(ctl, nodes=("node1",))            # no --hang-timeout: never judged
    faulttol.check_hangs(ctl)
    ctl.clock.now = 1004.0
    nodes.heartbeat(ctl, conns["node1"], agent_pb2.Heartbeat(activity=[
        agent_pb2.JobActivity(job_id=jid, last_activity=1004.0)]))
    ctl.clock.now = 1008.0
    faulttol.check_hangs(ctl)
    assert ctl.store.job(jid).kill_reason == "", "it wrote at 1004: alive at 1008"
    ctl.clock.now = 1009.5
    faulttol.check_hangs(ctl)
    assert ctl.store.job(jid).kill_reason == "HANG"
    assert ctl.store.job(quiet).kill_reason == ""
    assert sent(conns["node1"]) == ["terminate_job"]
    assert "no output or heartbeat for 6 s" in ctl.store.job_events(jid)[0].text
    finished(ctl, "node1", jid, sig=15)
    job = ctl.store.job(jid)
    assert (job.state, job.restarts) == ("PENDING", 1)
    assert kinds(ctl, jid) == ["hang", "requeued"]
    assert "ended hang" in ctl.store.job_events(jid)[1].text


def test_silence_is_timed_from_the_controllers_start_at_the_latest(ctl):
    ctl.started_at = 1000.0
    ctl.clock.now = 1002.0
    with ctl.store.transaction() as st:
        st.put_node("node3", last_seen=500.0)      # last seen long before this controller
    nodes.check_heartbeats(ctl)
    assert not ctl.store.node("node3").down, "agents get a full timeout to reconnect"
    ctl.clock.now = 1003.5
    nodes.check_heartbeats(ctl)
    assert ctl.store.node("node3").down and ctl.store.node("node3").reason == "Not responding"


def test_events_of_an_unknown_job_are_refused(ctl):
    with pytest.raises(errors.InvalidJobId):
        faulttol.get_events(ctl, api_pb2.GetJobEventsRequest(job_id=99))


def test_record_job_event_is_what_other_areas_call(ctl):
    jid = run_job(ctl)
    with ctl.store.transaction() as st:
        restarts.record_job_event(st, jid, restarts.EV_PREEMPTED, "preempted by job 7", 1234.0)
    reply = faulttol.get_events(ctl, api_pb2.GetJobEventsRequest(job_id=jid))
    assert [(e.time, e.kind, e.text) for e in reply.events] == [(1234, "preempted", "preempted by job 7")]


def test_a_survivor_that_dies_while_cleaning_up_does_not_hold_the_job_back(ctl):
    connect(ctl, "node2")
    jid = run_job(ctl, requeue=True)
    lose(ctl, "node1")
    assert ctl.store.job(jid).completing == ("node2",)
    ctl.agents.detach(ctl.agents.get("node2"))
    lose(ctl, "node2")
    job = ctl.store.job(jid)
    assert (job.state, job.completing, job.nodes) == ("PENDING", (), ())


def test_a_hung_job_that_exits_zero_when_stopped_still_failed(ctl):
    connect(ctl, "node1")
    jid = run_job(ctl, nodes=("node1",), hang_timeout_s=5)
    faulttol.check_hangs(ctl)
    ctl.clock.now = 1010.0
    faulttol.check_hangs(ctl)
    finished(ctl, "node1", jid, exit_code=0)      # its trap caught SIGTERM and exited 0
    job = ctl.store.job(jid)
    assert (job.state, job.restarts) == ("PENDING", 1), "requeueable by default: restarted"
    assert [a.state for a in ctl.store.attempts([jid])[jid]] == ["FAILED"]


def test_the_timer_wakes_when_a_silent_node_or_a_quiet_job_is_due(ctl):
    connect(ctl, "node1", "node2", "node3")          # node4 has no stream since 1000
    ctl.started_at = 990.0
    assert timers.next_deadline(ctl) == pytest.approx(1003.01), "node4: last seen 1000 + 3 s"
    jid = run_job(ctl, nodes=("node1",), hang_timeout_s=2)
    assert timers.next_deadline(ctl) == pytest.approx(1002.01), "the job: started 1000 + 2 s"
    ctl.activity[jid] = 1005.0
    assert timers.next_deadline(ctl) == pytest.approx(1003.01)


# -- silence and fencing ---------------------------------------------------------------
def test_a_stream_that_stops_beating_is_down_one_timeout_after_its_last_heartbeat(ctl):
    conns = connect(ctl, "node1", "node2", "node3", "node4")   # registered at 1000
    ctl.clock.now = 1001.0
    for conn in conns.values():
        nodes.heartbeat(ctl, conn, agent_pb2.Heartbeat(seq=1, sent_at=1001.0))
    assert timers.next_deadline(ctl) == pytest.approx(1004.01), "last heartbeat 1001 + 3 s"
    ctl.clock.now = 1002.0
    for name in ("node2", "node3", "node4"):
        nodes.heartbeat(ctl, conns[name], agent_pb2.Heartbeat(seq=2, sent_at=1002.0))
    ctl.clock.now = 1003.9
    nodes.check_heartbeats(ctl)
    assert not ctl.store.node("node1").down and ctl.agents.connected("node1")
    ctl.clock.now = 1004.01
    nodes.check_heartbeats(ctl)
    rec = ctl.store.node("node1")
    assert (rec.down, rec.reason, rec.reason_time) == (True, "Not responding", 1004.01), \
        "closed and DOWN in the same pass, not one more timeout later"
    assert not ctl.agents.connected("node1")


def test_a_stream_that_breaks_counts_its_silence_from_the_last_heartbeat(ctl):
    conns = connect(ctl, "node1")
    ctl.clock.now = 1002.0
    nodes.heartbeat(ctl, conns["node1"], agent_pb2.Heartbeat(seq=1, sent_at=1002.0))
    ctl.clock.now = 1004.0
    nodes.disconnected(ctl, conns["node1"])    # kill -9 of the agent: the stream ends
    assert ctl.store.node("node1").last_seen == 1002.0
    ctl.clock.now = 1005.1
    nodes.check_heartbeats(ctl)
    assert ctl.store.node("node1").down, "DOWN at 1002 + 3 s, not at 1004 + 3 s"


def test_a_requeued_attempt_waits_for_the_fence_of_a_silent_node(ctl):
    conns = connect(ctl, "node1")
    jid = run_job(ctl, requeue=True)
    ctl.clock.now = 1003.0
    nodes.heartbeat(ctl, conns["node1"], agent_pb2.Heartbeat(seq=1, sent_at=1003.0))
    ctl.clock.now = 1003.5                     # node2 silent since 1000: DOWN now
    nodes.check_heartbeats(ctl)
    faulttol.handle_lost_nodes(ctl)
    assert sent(conns["node1"]) == ["terminate_job"]
    ctl.clock.now = 1004.0
    finished(ctl, "node1", jid, sig=15)
    job = ctl.store.job(jid)
    margin = ctl.config.controller.fence_margin
    assert margin == ctl.config.controller.kill_wait_s + 2.0, "derived from kill_wait"
    assert job.state == "PENDING"
    assert job.eligible_time == pytest.approx(1003.5 + margin), \
        f"want the fence's end {1003.5 + margin}, got {job.eligible_time}"


def test_a_node_a_person_set_down_needs_no_fence_wait(ctl):
    connect(ctl, "node1", "node2")
    jid = run_job(ctl, requeue=True)
    with ctl.store.transaction() as st:
        st.put_node("node2", down=True, reason="maintenance", reason_time=1000.0)
        assert restarts.fence_wait_s(ctl, st, st.job(jid), 1000.0) == 0.0
        st.put_node("node2", reason=nodes.NOT_RESPONDING)
        assert restarts.fence_wait_s(ctl, st, st.job(jid), 1000.0) == \
            ctl.config.controller.fence_margin


@pytest.mark.parametrize("keys, grace, margin", [
    ("kill_wait_s = 5", 5.0, 7.0),
    ("kill_wait_s = 5\nfence_grace_s = 1", 1.0, 3.0),
    ("kill_wait_s = 30\nfence_margin_s = 10", 8.0, 10.0),
    ("kill_wait_s = 30\nfence_margin_s = 1", 0.0, 1.0),
], ids=["both derived from kill_wait", "grace set, margin follows",
        "margin set bounds the grace", "a margin under the slack leaves no grace"])
def test_fence_grace_and_margin(keys, grace, margin):
    from lingjun import config
    cc = config.parse(f"[controller]\n{keys}\n").controller
    assert (cc.fence_grace, cc.fence_margin) == (grace, margin)


def test_a_dependent_of_a_node_fail_job_waits_out_the_fence(ctl):
    from lingjund.service import dependencies
    jid = run_job(ctl, requeue=False)
    ctl.clock.now = 1010.0
    lose(ctl, "node1")                          # batch host lost: NODE_FAIL at 1010
    assert ctl.store.job(jid).state == "NODE_FAIL"
    spec = api_pb2.JobSpec(name="next", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u",
                           uid=1, batch=True, min_nodes=1, dependency=f"afterany:{jid}")
    dep = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id
    margin = ctl.config.controller.fence_margin
    assert dependencies.settle(ctl, 1010.0 + margin - 0.1).get(dep) == "Dependency", \
        "the lost node may still be fencing the job"
    assert dep not in dependencies.settle(ctl, 1010.0 + margin), "then it counts as ended"


@pytest.mark.parametrize("requeue, want", [(True, ("PENDING", 1)), (False, ("NODE_FAIL", 0))],
                         ids=["a requeueable job runs again", "another ends NODE_FAIL"])
def test_a_fenced_batch_result_is_a_node_failure(ctl, requeue, want):
    """The controller was the silent one (paused): the agent's lease lapsed and
    its supervisor stopped the job, which is a lost node to the job."""
    connect(ctl, "node1", "node2")
    jid = run_job(ctl, requeue=requeue)
    batch.record_batch_finished(ctl, "node1", agent_pb2.BatchFinished(
        job_id=jid, exit_code=0, signal=15, start_time=1000, end_time=1005,
        error="fenced: lease ended 0.1 s ago without renewal"))
    job = ctl.store.job(jid)
    assert (job.state, job.restarts) == want
