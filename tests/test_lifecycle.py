"""The lifecycle's decisions, pure: views in, changes out, no store and no clock.

The worked example of lingjund/lifecycle.py's docstring is checked moment by
moment; the properties tie ``next_deadline`` to ``decide``: nothing is due
before it, and something is due at it. The events (a run's end, scancel, a
node lost, a registration...) are checked one by one, their worked example
replayed, and two properties hold over any job and any event: an ended job
does not change, and no event makes a job run or brings an ended run back
except a requeue.
"""
from __future__ import annotations

import dataclasses
import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lingjun import slurm
from lingjun.v1 import api_pb2
from lingjund import lifecycle as lc
from lingjund.lifecycle import (Abandon, Cleaned, CloseStream, Expire, Limits, NodeDown, NodeLost,
                                Prolog, Signal, Stop, View, decide, next_deadline)
from lingjund.store.store import JobRecord, NodeRecord

USR1 = int(signal.SIGUSR1)


def job(job_id: int = 7, *, state: str = slurm.RUNNING, start: float = 1000.0, time_min: int = 0,
        batch: bool = True, launched: bool = True, nodes=("node1", "node2"), **fields) -> JobRecord:
    spec_fields = {k: fields.pop(k) for k in ("signal", "signal_time_s", "signal_flags",
                                              "hang_timeout_s", "max_restarts", "requeue")
                   if k in fields}
    running = state == slurm.RUNNING
    return JobRecord(
        job_id=job_id, name="j", user="u", uid=1, partition=fields.pop("partition", "low"),
        state=state, reason="", priority=1, submit_time=900.0, time_limit_min=time_min,
        spec=api_pb2.JobSpec(batch=batch, **spec_fields),
        start_time=start if running else 0.0,
        end_time=start + time_min * 60 if running and time_min else 0.0,
        nodes=tuple(nodes) if running else (), batch_host=nodes[0] if running else "",
        launched=launched and running, **fields)


def limits(**kw) -> Limits:
    base = dict(heartbeat_timeout_s=3.0, prolog_timeout_s=30.0, started_at=0.0,
                grace_s={"low": 5.0})
    base.update(kw)
    return Limits(**base)


# -- the worked example -----------------------------------------------------------------
def test_the_worked_example_time_signal_and_deadline():
    j = job(time_min=10, signal=USR1, signal_time_s=60, signal_flags="B", deadline=1500.0)
    v = View(holding=(j,), limits=limits())
    assert next_deadline(v, 1000.0) == 1500.0, "the warning at 1540 comes after the deadline"
    assert decide(v, 1000.0) == []
    assert decide(v, 1499.9) == []
    assert decide(v, 1500.0) == [Stop(7, slurm.DEADLINE, "deadline")]
    stopping = View(holding=(dataclasses.replace(j, kill_reason=slurm.DEADLINE),), limits=limits())
    assert next_deadline(stopping, 1500.0) is None, "a job being stopped has no timer left"
    assert decide(stopping, 1600.0) == []


def test_the_worked_example_without_a_deadline_warns_then_times_out():
    j = job(time_min=10, signal=USR1, signal_time_s=60, signal_flags="B")
    v = View(holding=(j,), limits=limits())
    assert next_deadline(v, 1000.0) == 1540.0
    assert decide(v, 1540.0) == [Signal(7, USR1, True, ("node1",), 60)]
    warned = View(holding=(dataclasses.replace(j, warn_signal_sent=True),), limits=limits())
    assert next_deadline(warned, 1541.0) == 1600.0
    assert decide(warned, 1599.0) == []
    assert decide(warned, 1600.0) == [Stop(7, slurm.TIMEOUT, "time limit")]


def test_a_warning_without_B_goes_to_every_node_of_the_job_and_only_once_launched():
    j = job(time_min=10, signal=USR1, signal_time_s=60)
    assert decide(View(holding=(j,)), 1545.0) == [Signal(7, USR1, False, ("node1", "node2"), 60)]
    unlaunched = dataclasses.replace(j, launched=False)
    assert decide(View(holding=(unlaunched,)), 1545.0) == []
    assert next_deadline(View(holding=(unlaunched,)), 1000.0) == 1600.0, "only the time limit"


def test_a_pending_job_expires_once_its_time_limit_no_longer_fits_before_its_deadline():
    j = job(state=slurm.PENDING, time_min=10, deadline=1500.0)
    v = View(deadline_pending=(j,))
    assert next_deadline(v, 800.0) == 900.0
    assert decide(v, 899.0) == []
    assert decide(v, 950.0) == [Expire(7)]


def test_a_job_at_its_time_limit_and_deadline_at_once_is_stopped_once_for_the_time_limit():
    j = job(time_min=10, deadline=1600.0)
    assert decide(View(holding=(j,)), 1600.0) == [Stop(7, slurm.TIMEOUT, "time limit")]


# -- preemption grace --------------------------------------------------------------------
def test_a_victim_is_killed_once_when_its_partitions_grace_time_ends():
    v = job(kill_reason=slurm.PREEMPTED, preempt_time=1060.0, preempted_by=9)
    view = View(holding=(v,), limits=limits())
    assert next_deadline(view, 1060.0) == 1065.0
    assert decide(view, 1064.9) == []
    assert decide(view, 1065.0) == [Stop(7, slurm.PREEMPTED, "preempted",
                                         exit_signal=int(signal.SIGTERM))]
    killed = View(holding=(dataclasses.replace(v, preempt_killed=True),), limits=limits())
    assert decide(killed, 2000.0) == [] and next_deadline(killed, 2000.0) is None


def test_may_stop_lets_only_one_stopper_through():
    running = job()
    assert lc.may_stop(running, slurm.TIMEOUT)
    assert not lc.may_stop(dataclasses.replace(running, kill_reason=slurm.CANCELLED), slurm.TIMEOUT)
    victim = dataclasses.replace(running, kill_reason=slurm.PREEMPTED)
    assert lc.may_stop(victim, slurm.PREEMPTED), "the end of its grace time kills it"
    assert not lc.may_stop(victim, slurm.DEADLINE)
    assert not lc.may_stop(dataclasses.replace(victim, preempt_killed=True), slurm.PREEMPTED)
    assert not lc.may_stop(job(state=slurm.COMPLETED), slurm.TIMEOUT)


# -- hangs --------------------------------------------------------------------------------
def test_a_job_is_hung_only_strictly_past_its_timeout_from_its_last_sign_of_life():
    j = job(hang_timeout_s=5)
    v = View(holding=(j,), activity={7: 1004.0})
    assert next_deadline(v, 1004.0) == pytest.approx(1009.0 + lc.SLACK)
    assert decide(v, 1009.0) == []
    (stop,) = decide(v, 1009.5)
    assert (stop.job_id, stop.kill_reason, stop.why) == (7, lc.HANG, "hang")
    assert "no output or heartbeat for 6 s (--hang-timeout 5 s) on node[1-2]" in stop.event
    no_report = View(holding=(j,))
    assert next_deadline(no_report, 1000.0) == pytest.approx(1005.0 + lc.SLACK), \
        "no report yet: timed from its start"


def test_a_rank_silent_past_the_timeout_while_others_write_names_itself_and_its_node():
    j = job(hang_timeout_s=5, nodes=("node1", "node2", "node3", "node4"))
    ranks = {7: (lc.RankSeen("node3", 0, 2, 1003.0), lc.RankSeen("node1", 0, 0, 1010.0))}
    v = View(holding=(j,), activity={7: 1011.0}, ranks=ranks)
    assert next_deadline(v, 1004.0) == pytest.approx(1008.0 + lc.SLACK)
    assert decide(v, 1008.0) == []
    (stop,) = decide(v, 1009.0)
    assert (stop.kill_reason, stop.why) == (lc.HANG, "hang")
    assert stop.event == "rank 2 on node3 silent for 6 s; others active (--hang-timeout 5 s)"
    assert stop.suspects == (("node3", "job 7 rank 2 silent for 6 s"),)
    # every rank silent: the whole job is hung, no node to blame over the others
    (whole,) = decide(View(holding=(j,), activity={7: 1003.0}, ranks=ranks), 1016.0)
    assert "no output or heartbeat" in whole.event and whole.suspects == ()
    started_late = View(holding=(job(hang_timeout_s=5, start=1020.0),), activity={7: 1021.0},
                        ranks=ranks)
    assert decide(started_late, 1024.0) == [], "a rank counts from the run's start"


# -- heartbeats and node loss ----------------------------------------------------------------
def test_a_silent_stream_is_closed_and_its_node_down_in_the_same_moment():
    nodes = {n: NodeRecord(n, registered=True, last_seen=1000.0) for n in ("node1", "node2")}
    v = View(nodes=nodes, streams={"node1": 1001.0, "node2": 1002.0}, limits=limits())
    assert next_deadline(v, 1002.0) == pytest.approx(1004.0 + lc.SLACK)
    assert decide(v, 1004.0) == []
    assert decide(v, 1004.5) == [CloseStream("node1", 3.5), NodeDown("node1", 3.5)]


def test_silence_counts_from_the_controllers_start_at_the_latest():
    v = View(nodes={"node3": NodeRecord("node3", registered=True, last_seen=500.0)},
             limits=limits(started_at=1000.0))
    assert decide(v, 1002.0) == []
    assert decide(v, 1003.5) == [NodeDown("node3", 3.5)]
    down = View(nodes={"node3": NodeRecord("node3", registered=True, down=True)}, limits=limits())
    assert decide(down, 5000.0) == [] and next_deadline(down, 5000.0) is None


def test_a_job_on_a_node_that_goes_down_is_lost_with_it_and_not_also_timed_out():
    j = job(time_min=1, hang_timeout_s=5)
    nodes = {"node1": NodeRecord("node1", registered=True),
             "node2": NodeRecord("node2", registered=True, last_seen=1000.0)}
    v = View(holding=(j,), nodes=nodes, streams={"node1": 1100.0}, limits=limits())
    assert decide(v, 1100.0) == [NodeDown("node2", 100.0),
                                 NodeLost(7, ("node2",), lc.NOT_RESPONDING)]


def test_a_down_node_no_longer_holds_back_the_cleanup_of_an_ended_job():
    ended = dataclasses.replace(job(state=slurm.COMPLETED), completing=("node2", "node3"))
    nodes = {"node2": NodeRecord("node2", registered=True, down=True, reason="bad disk"),
             "node3": NodeRecord("node3", registered=True)}
    assert lc.node_loss(View(holding=(ended,), nodes=nodes), 0.0) == [Cleaned(7, "node2")]
    lost = job(nodes=("node2", "node3"))
    assert lc.node_loss(View(holding=(lost,), nodes=nodes), 0.0) == \
        [NodeLost(7, ("node2",), "bad disk")]
    already = dataclasses.replace(lost, kill_reason=lc.NODE_LOST)
    assert lc.node_loss(View(holding=(already,), nodes=nodes), 0.0) == []


@pytest.mark.parametrize("kill_reason,batch,lost,alive,want", [
    (slurm.CANCELLED, True, ("node2",), ("node1",), "wait"),
    (slurm.CANCELLED, True, ("node1",), ("node2",), "end_stopped"),
    ("", False, ("node2",), ("node1",), "end_alloc"),
    ("", True, ("node2",), ("node1",), "stop"),
    ("", True, ("node1",), ("node2",), "end_run"),
    ("", True, ("node2",), (), "end_run"),          # the batch host's agent is gone too
])
def test_what_a_lost_node_does_to_a_running_job(kill_reason, batch, lost, alive, want):
    j = job(batch=batch, kill_reason=kill_reason)
    assert lc.lost_node_outcome(j, lost, alive) == want


# -- prologs and leases ---------------------------------------------------------------------
def test_the_nodes_that_did_not_answer_a_prolog_in_time_fail_it():
    v = View(prologs=(Prolog(7, 1000.0, ("node3", "node2")),), limits=limits())
    assert next_deadline(v, 1000.0) == pytest.approx(1030.0 + lc.SLACK)
    assert decide(v, 1030.0) == []
    assert decide(v, 1031.0) == [lc.PrologTimeout(7, ("node2", "node3"))]


def test_allocations_nobody_took_back_end_one_heartbeat_timeout_after_the_start():
    alloc = job(batch=False)
    v = View(orphans=(alloc, job(8, batch=True)), limits=limits(started_at=1000.0))
    assert next_deadline(v, 1000.0) == 1003.0
    assert decide(v, 1002.9) == []
    assert decide(v, 1003.0) == [Abandon(7)]


# -- how a run ends -------------------------------------------------------------------------
@pytest.mark.parametrize("kill_reason,exit,want", [
    ("", dict(), (slurm.COMPLETED, slurm.REASON_NONE)),
    ("", dict(exit_code=2), (slurm.FAILED, slurm.REASON_NON_ZERO_EXIT)),
    ("", dict(error="cannot open /x"), (slurm.FAILED, slurm.REASON_JOB_LAUNCH_FAILURE)),
    ("", dict(signal=9, error="fenced: lease lapsed"), (slurm.NODE_FAIL, slurm.REASON_NODE_DOWN)),
    ("", dict(lost=True), (slurm.NODE_FAIL, slurm.REASON_NODE_DOWN)),
    (slurm.TIMEOUT, dict(signal=15), (slurm.TIMEOUT, slurm.REASON_TIME_LIMIT)),
    (slurm.TIMEOUT, dict(), (slurm.TIMEOUT, slurm.REASON_TIME_LIMIT)),   # its trap exited 0
    (slurm.DEADLINE, dict(signal=15), (slurm.DEADLINE, slurm.REASON_DEADLINE)),
    (slurm.PREEMPTED, dict(signal=15), (slurm.PREEMPTED, slurm.REASON_NONE)),
    (slurm.CANCELLED, dict(error="fenced: x"), (slurm.CANCELLED, slurm.REASON_NONE)),
    (lc.HANG, dict(), (slurm.FAILED, slurm.REASON_NON_ZERO_EXIT)),
    (lc.NODE_LOST, dict(), (slurm.NODE_FAIL, slurm.REASON_NODE_DOWN)),
    ("", dict(signal=125, out_of_memory=True), (slurm.OUT_OF_MEMORY, slurm.REASON_OUT_OF_MEMORY)),
    ("", dict(exit_code=0, out_of_memory=True), (slurm.OUT_OF_MEMORY, slurm.REASON_OUT_OF_MEMORY)),
    (slurm.CANCELLED, dict(signal=9, out_of_memory=True), (slurm.CANCELLED, slurm.REASON_NONE)),
])
def test_what_stopped_a_run_decides_how_it_ends_else_its_exit(kill_reason, exit, want):
    assert lc.end_state(kill_reason, **exit) == want


def test_preempt_eligible_time_is_start_plus_exempt_time_when_preemptable():
    assert lc.preempt_eligible_time(job(start=1000.0), True, 60.0) == 1060.0
    assert lc.preempt_eligible_time(job(start=1000.0), False, 60.0) == 0.0
    assert lc.preempt_eligible_time(job(state=slurm.PENDING), True, 60.0) == 0.0


# -- restarts -----------------------------------------------------------------------------
def test_restart_backoff_doubles_and_is_capped():
    assert [lc.restart_backoff_s(n, 10.0, 60.0) for n in range(4)] == [10.0, 20.0, 40.0, 60.0]


def test_restart_limits_follow_the_table():
    assert lc.restart_limit(job(max_restarts=3), slurm.FAILED, requeueable=False) == 3
    assert lc.restart_limit(job(), slurm.NODE_FAIL, requeueable=True) == lc.DEFAULT_MAX_RESTARTS
    assert lc.restart_limit(job(), lc.HANG, requeueable=False) == 0
    assert lc.restart_limit(job(), slurm.FAILED, requeueable=True) == 0
    assert lc.restart_limit(job(batch=False, max_restarts=3), slurm.NODE_FAIL, True) == 0


def test_a_requeued_job_pends_again_with_one_more_restart():
    fields = lc.requeue_fields(job(restarts=1), 2000.0, 20.0, hold=True, release_nodes=False)
    assert (fields["state"], fields["restarts"], fields["eligible_time"], fields["reason"]) == \
        (slurm.PENDING, 2, 2020.0, slurm.REASON_HELD_USER)
    assert "nodes" not in fields, "its nodes stay listed until they have cleaned up"


# -- next_deadline against decide ----------------------------------------------------------
times = st.integers(min_value=0, max_value=4000).map(float)


@st.composite
def running_jobs(draw, job_id: int) -> JobRecord:
    preempted = draw(st.booleans())
    return job(job_id, start=draw(times), time_min=draw(st.integers(0, 30)),
               launched=draw(st.booleans()), nodes=(f"node{job_id % 3 + 1}",),
               signal=draw(st.sampled_from([0, USR1])), signal_time_s=draw(st.integers(0, 120)),
               signal_flags=draw(st.sampled_from(["", "B"])),
               hang_timeout_s=draw(st.sampled_from([0, 5, 60])),
               deadline=draw(st.one_of(st.just(0.0), times)),
               warn_signal_sent=draw(st.booleans()),
               kill_reason=slurm.PREEMPTED if preempted else draw(st.sampled_from(["", "", "HANG"])),
               preempt_time=draw(times) if preempted else 0.0,
               preempt_killed=preempted and draw(st.booleans()),
               partition=draw(st.sampled_from(["low", "high"])))


@st.composite
def views(draw) -> View:
    running = tuple(draw(running_jobs(i)) for i in range(draw(st.integers(0, 4))))
    pending = tuple(job(100 + i, state=slurm.PENDING, time_min=draw(st.integers(0, 30)),
                        deadline=draw(times)) for i in range(draw(st.integers(0, 2))))
    # few parts at a time, so that each timer is often the earliest one
    names = [f"node{i}" for i in range(1, draw(st.integers(1, 3)))]
    nodes = {n: NodeRecord(n, registered=draw(st.booleans()), last_seen=draw(times))
             for n in names}
    streams = {n: draw(times) for n in names if draw(st.booleans())}
    prologs = tuple(Prolog(200 + i, draw(times), ("node1",)) for i in range(draw(st.integers(0, 1))))
    orphans = tuple(job(300 + i, batch=False) for i in range(draw(st.integers(0, 1))))
    activity = {j.job_id: draw(times) for j in running if draw(st.booleans())}
    ranks = {j.job_id: tuple(lc.RankSeen(f"node{k + 1}", 0, k, draw(times))
                             for k in range(draw(st.integers(1, 3))))
             for j in running if draw(st.booleans())}
    return View(holding=running, deadline_pending=pending, nodes=nodes, streams=streams,
                activity=activity, ranks=ranks, prologs=prologs, orphans=orphans,
                next_begin=draw(st.one_of(st.none(), times)),
                limits=limits(started_at=draw(times), heartbeat_timeout_s=draw(st.sampled_from([3.0, 30.0])),
                              grace_s={"low": draw(st.sampled_from([0.0, 5.0, 120.0]))}))


@settings(max_examples=500, deadline=None)
@given(views(), times)
def test_something_is_due_at_next_deadline_and_nothing_before_it(view, now):
    due = next_deadline(view, now)
    if due is None:
        assert decide(view, 10_000.0) == [], "no timer runs, yet a change came due"
        return
    if due != view.next_begin:
        assert decide(view, due) != [], f"woken at {due} for nothing"
    before = due - 2 * lc.SLACK
    if before >= 0:
        assert decide(view, before) == [], f"due before the next deadline {due}"


# -- events ---------------------------------------------------------------------------------
POLICY = lc.Policy(requeueable=True, backoff_s=10.0, backoff_max_s=300.0, requeue_delay_s=5.0)
TERM = int(signal.SIGTERM)


def test_the_worked_example_of_the_events_node_loss_restart_then_scancel():
    j = job(time_min=10)
    t = lc.node_lost(j, ("node2",), ("node1",), 1200.0, grace_s=30.0, policy=POLICY)
    assert t == lc.Transition(7, {"kill_reason": lc.NODE_LOST}, ("node1", "node2"), 30.0,
                              "node failure")
    stopping = dataclasses.replace(j, **t.fields)
    end = lc.batch_ended(stopping, 1203.0, signal=TERM, alive=frozenset({"node1"}), policy=POLICY)
    assert (end.state, end.outcome, end.limit, end.delay) == \
        (slurm.NODE_FAIL, lc.RESTART, lc.DEFAULT_MAX_RESTARTS, 10.0)
    assert (end.fields["state"], end.fields["reason"], end.fields["restarts"],
            end.fields["eligible_time"], end.fields["completing"]) == \
        (slurm.PENDING, slurm.REASON_BEGIN_TIME, 1, 1213.0, ("node1",))
    assert "nodes" not in end.fields, "node1 still cleans up: the nodes stay listed"
    pending = dataclasses.replace(stopping, **end.fields)
    c = lc.cancel(pending, 1205.0, by="1000", grace_s=30.0)
    assert c == lc.Transition(7, dict(state=slurm.CANCELLED, start_time=1205.0, end_time=1205.0,
                                      cancelled_by="1000"), ended=True)
    assert lc.cancel(dataclasses.replace(pending, **c.fields), 1206.0, by="1000",
                     grace_s=30.0) is None


@pytest.mark.parametrize("kill_reason,result,want", [
    ("", dict(), (slurm.COMPLETED, lc.FINAL, slurm.COMPLETED, "")),
    ("", dict(exit_code=3), (slurm.FAILED, lc.FINAL, slurm.FAILED, "")),
    (slurm.TIMEOUT, dict(signal=TERM), (slurm.TIMEOUT, lc.FINAL, slurm.CANCELLED, "")),
    (slurm.CANCELLED, dict(signal=TERM), (slurm.CANCELLED, lc.FINAL, slurm.CANCELLED, "")),
    (lc.REQUEUE, dict(signal=TERM), (slurm.FAILED, lc.REQUEUED, slurm.REQUEUED, slurm.REQUEUED)),
    (lc.HANG, dict(signal=TERM), (slurm.FAILED, lc.RESTART, slurm.FAILED, slurm.FAILED)),
    ("", dict(lost=True, signal=9), (slurm.NODE_FAIL, lc.RESTART, slurm.NODE_FAIL,
                                     slurm.NODE_FAIL)),
])
def test_how_a_batch_script_ends_decides_the_job_and_the_batch_step(kill_reason, result, want):
    end = lc.batch_ended(job(kill_reason=kill_reason), 2000.0, policy=POLICY, **result)
    assert (end.state, end.outcome, end.step_state, end.attempt_state) == want
    if end.outcome == lc.FINAL:
        assert end.fields["end_time"] == 2000.0 and end.fields["state"] == end.state
        assert "nodes" not in end.fields, "sacct still shows where it ran"
    else:
        assert end.fields["state"] == slurm.PENDING and end.fields["nodes"] == ()


def test_a_requeue_waits_its_delay_and_the_fences_and_requeuehold_holds():
    held = lc.batch_ended(job(kill_reason=lc.REQUEUE_HOLD), 2000.0, signal=TERM,
                          policy=dataclasses.replace(POLICY, fence_wait_s=12.0))
    assert (held.outcome, held.fields["eligible_time"], held.fields["held"],
            held.fields["reason"]) == (lc.REQUEUED, 2012.0, True, slurm.REASON_HELD_USER)


def test_a_preemption_victim_requeues_only_with_preemptmode_requeue():
    victim = job(kill_reason=slurm.PREEMPTED, preempt_requeue=True)
    end = lc.batch_ended(victim, 2000.0, signal=TERM, policy=POLICY)
    assert (end.outcome, end.attempt_state, end.fields["eligible_time"]) == \
        (lc.REQUEUED, slurm.PREEMPTED, 2005.0)
    cancelled = lc.batch_ended(dataclasses.replace(victim, preempt_requeue=False), 2000.0,
                               signal=TERM, policy=POLICY)
    assert (cancelled.state, cancelled.outcome) == (slurm.PREEMPTED, lc.FINAL)
    lost = lc.batch_ended(victim, 2000.0, lost=True, policy=POLICY)
    assert (lost.state, lost.outcome) == (slurm.NODE_FAIL, lc.RESTART), \
        "a victim lost with its node is a node failure, not a requeue"


def test_restarts_stop_at_the_limit_and_say_so_and_a_failure_without_policy_is_final():
    tired = job(restarts=lc.DEFAULT_MAX_RESTARTS)
    end = lc.batch_ended(tired, 2000.0, lost=True, policy=POLICY)
    assert (end.outcome, end.fields["state"], end.limit) == \
        (lc.GAVE_UP, slurm.NODE_FAIL, lc.DEFAULT_MAX_RESTARTS)
    norequeue = lc.batch_ended(job(), 2000.0, lost=True,
                               policy=dataclasses.replace(POLICY, requeueable=False))
    assert (norequeue.outcome, norequeue.attempt_state) == (lc.FINAL, "")
    assert lc.batch_ended(job(restarts=2, max_restarts=3), 2000.0, exit_code=1,
                          policy=POLICY).delay == 40.0, "the third restart waits 10 * 2**2"


def test_only_the_nodes_with_an_agent_stay_completing():
    end = lc.batch_ended(job(), 2000.0, alive=frozenset({"node2", "node9"}), policy=POLICY)
    assert end.terminate == ("node2",) and end.fields["completing"] == ("node2",)


@pytest.mark.parametrize("kill_reason,want", [
    ("", "stop"), (slurm.PREEMPTED, "stop"), (slurm.TIMEOUT, "again"),
])
def test_scancel_stops_a_running_job_once_and_overrides_a_preemption(kill_reason, want):
    j = job(kill_reason=kill_reason)
    t = lc.cancel(j, 2000.0, by="1000", grace_s=30.0)
    assert t.terminate == ("node1", "node2") and t.why == "cancelled"
    if want == "stop":
        assert t.fields == {"kill_reason": slurm.CANCELLED, "cancelled_by": "1000"}
    else:
        assert t.fields == {}, "already being stopped: its nodes are only told again"


def test_an_allocation_stopped_ends_at_once_in_the_state_a_batch_job_would():
    alloc = job(batch=False)
    t = lc.stop(alloc, slurm.TIMEOUT, 2000.0, why="time limit", grace_s=30.0,
                alive=frozenset({"node1"}))
    assert t.ended and t.terminate == ("node1",)
    assert {k: t.fields[k] for k in ("kill_reason", "state", "reason", "end_time", "completing")} \
        == dict(kill_reason=slurm.TIMEOUT, state=slurm.TIMEOUT, reason=slurm.REASON_TIME_LIMIT,
                end_time=2000.0, completing=("node1",))
    c = lc.cancel(alloc, 2000.0, by="0", grace_s=30.0)
    assert (c.fields["state"], c.fields["exit_signal"], c.fields["cancelled_by"]) == \
        (slurm.CANCELLED, TERM, "0")


def test_an_allocation_released_or_abandoned():
    alloc = job(batch=False)
    ok = lc.released(alloc, 2000.0, 0, 0, grace_s=2.0, alive=frozenset({"node1", "node2"}))
    assert (ok.fields["state"], ok.terminate) == (slurm.COMPLETED, ("node1", "node2"))
    bad = lc.released(alloc, 2000.0, 3, 0, grace_s=2.0)
    assert (bad.fields["state"], bad.fields["reason"], bad.fields["exit_code"]) == \
        (slurm.FAILED, slurm.REASON_NON_ZERO_EXIT, 3)
    gone = lc.abandon(alloc, 2000.0, alive=frozenset({"node1"}))
    assert (gone.fields["state"], gone.grace_s, gone.fields["exit_signal"]) == \
        (slurm.CANCELLED, 0.0, int(signal.SIGKILL))
    assert lc.abandon(job(batch=False, state=slurm.PENDING), 2000.0).fields == \
        dict(state=slurm.CANCELLED, start_time=2000.0, end_time=2000.0)
    assert lc.abandon(job(batch=False, kill_reason=slurm.TIMEOUT), 2000.0) is None


def test_a_pending_job_that_can_never_run_or_expires_ends_never_started():
    p = job(state=slurm.PENDING)
    assert lc.never_runnable(p, 2000.0, "afterok:5(failed)").fields == dict(
        state=slurm.CANCELLED, start_time=2000.0, end_time=2000.0,
        reason=slurm.REASON_DEPENDENCY_NEVER, dependency="afterok:5(failed)")
    assert lc.expire(p, 2000.0).fields == dict(state=slurm.DEADLINE, start_time=2000.0,
                                               end_time=2000.0, reason=slurm.REASON_DEADLINE)


def test_a_failed_prolog_puts_the_job_back_as_it_was():
    t = lc.prolog_failed(job(restarts=2))
    assert t.fields["state"] == slurm.PENDING and t.fields["nodes"] == ()
    assert "restarts" not in t.fields, "it never ran: no restart counted"


def test_a_placed_job_starts_with_its_time_limit_from_now():
    f = lc.start(job(state=slurm.PENDING, time_min=10), 3000.0, nodes=("node3", "node4"))
    assert (f["state"], f["end_time"], f["batch_host"], f["launched"]) == \
        (slurm.RUNNING, 3600.0, "node3", False)


@pytest.mark.parametrize("kill_reason,batch,lost,alive,want", [
    (slurm.CANCELLED, True, ("node2",), ("node1",), None),
    (slurm.CANCELLED, True, ("node1",), ("node2",), (slurm.CANCELLED, ("node2",))),
    ("", False, ("node2",), ("node1",), (slurm.NODE_FAIL, ("node1",))),
    ("", True, ("node2",), ("node1",), ("stop", ("node1", "node2"))),
    ("", True, ("node1",), ("node2",), ("run", ("node2",))),
])
def test_what_a_lost_node_does_carried_to_the_job_row(kill_reason, batch, lost, alive, want):
    t = lc.node_lost(job(batch=batch, kill_reason=kill_reason), lost, alive, 2000.0,
                     grace_s=30.0, policy=POLICY)
    if want is None:
        assert t is None
    elif want[0] == "stop":
        assert t.fields == {"kill_reason": lc.NODE_LOST} and t.terminate == want[1]
    elif want[0] == "run":
        assert isinstance(t, lc.RunEnd) and t.state == slurm.NODE_FAIL
        assert t.terminate == want[1]
    else:
        assert (t.fields["state"], t.terminate, t.fields["exit_signal"]) == (want[0], want[1], 9)


def test_a_registering_agent_is_told_what_to_launch_stop_and_clean_and_its_lost_scripts():
    running = job(1)                                        # its script runs there
    unlaunched = job(2, launched=False)                     # prolog done, script not started
    vanished = job(3)                                       # launched, not running, no result
    reported = job(4)                                       # its result came with the Register
    stopping = job(5, kill_reason=slurm.TIMEOUT)
    ended = dataclasses.replace(job(6, state=slurm.COMPLETED), nodes=("node1",),
                                completing=("node1",))
    elsewhere = job(8, nodes=("node2", "node1"))            # node1 holds a part, not the script
    r = lc.registered("node1", NodeRecord("node1", registered=True, down=True,
                                          reason=lc.NOT_RESPONDING),
                      (running, unlaunched, vanished, reported, stopping, ended, elsewhere),
                      running=frozenset({1}), reported=frozenset({4}))
    assert r.back
    assert r.expected == (1, 2, 4, 8)
    assert r.follow == ((lc.LAUNCH, 2, ""), (lc.TERMINATE, 5, "timeout"), (lc.CLEANUP, 6, "cleanup"))
    assert r.lost == (3,)
    person = NodeRecord("node1", registered=True, down=True, reason="bad fan")
    assert not lc.registered("node1", person, (), frozenset(), frozenset()).back, \
        "a DOWN a person set stays until a person resumes it"


# -- properties of the events ------------------------------------------------------------------
FINISHED = [slurm.COMPLETED, slurm.FAILED, slurm.CANCELLED, slurm.TIMEOUT, slurm.NODE_FAIL,
            slurm.DEADLINE, slurm.PREEMPTED]


@st.composite
def any_jobs(draw) -> JobRecord:
    state = draw(st.sampled_from([slurm.PENDING, slurm.RUNNING] + FINISHED))
    j = job(draw(st.integers(1, 50)), state=state, batch=draw(st.booleans()),
            launched=draw(st.booleans()), restarts=draw(st.integers(0, 6)),
            kill_reason=draw(st.sampled_from(["", slurm.CANCELLED, slurm.TIMEOUT, slurm.PREEMPTED,
                                              lc.HANG, lc.REQUEUE, lc.NODE_LOST]))
            if state == slurm.RUNNING else "",
            preempt_requeue=draw(st.booleans()))
    if state in FINISHED:
        j = dataclasses.replace(j, nodes=("node1", "node2"), end_time=1500.0, start_time=1000.0,
                                completing=tuple(draw(st.sampled_from([(), ("node1",)]))))
    return j


def events(j: JobRecord, now: float, draw) -> list:
    """Every event function applied to ``j``, as the service could call them."""
    alive = frozenset(draw(st.sampled_from([(), ("node1",), ("node1", "node2")])))
    return [
        lc.cancel(j, now, by="1", grace_s=30.0, alive=alive),
        lc.abandon(j, now, alive=alive),
        lc.node_lost(j, ("node2",), tuple(sorted(alive - {"node2"})), now, grace_s=30.0,
                     policy=POLICY),
        lc.batch_ended(j, now, exit_code=draw(st.integers(0, 2)), signal=draw(
            st.sampled_from([0, 9, 15])), lost=draw(st.booleans()), alive=alive, policy=POLICY),
    ]


@settings(max_examples=300, deadline=None)
@given(any_jobs(), times, st.data())
def test_no_event_changes_a_job_that_has_ended(j, now, data):
    ended = dataclasses.replace(j, state=data.draw(st.sampled_from(FINISHED)), kill_reason="")
    assert [e for e in events(ended, now, data.draw) if e is not None] == []
    r = lc.registered("node1", None, (ended,), frozenset({ended.job_id}), frozenset())
    assert r.expected == () and r.lost == () and all(w == lc.CLEANUP for w, _, _ in r.follow)


@settings(max_examples=500, deadline=None)
@given(any_jobs(), times, st.data())
def test_no_event_makes_a_job_run_and_only_a_requeue_takes_an_ended_run_back_to_pending(j, now,
                                                                                        data):
    for e in events(j, now, data.draw):
        if e is None:
            continue
        state = e.fields.get("state")
        assert state != slurm.RUNNING, f"{e} starts a job; only the scheduler does (start)"
        if state == slurm.PENDING:
            assert j.state == slurm.RUNNING and isinstance(e, lc.RunEnd)
            assert e.outcome in (lc.REQUEUED, lc.RESTART)
            assert e.fields["restarts"] == j.restarts + 1
        if j.state not in (slurm.PENDING, slurm.RUNNING):
            assert state is None


def test_a_lost_node_whose_agent_is_still_there_is_told_to_end_the_job_but_not_awaited():
    # node2 set DOWN by a person: its agent is connected and obeys
    alloc = job(batch=False)
    t = lc.node_lost(alloc, ("node2",), ("node1",), 2000.0, grace_s=30.0,
                     connected=frozenset({"node1", "node2"}))
    assert t.terminate == ("node1", "node2") and t.fields["completing"] == ("node1",)


# -- scrontab: a cron entry's run ends, the job waits for its next time ----------------------
@pytest.mark.parametrize("result,state", [
    (dict(exit_code=0), slurm.COMPLETED),
    (dict(exit_code=3), slurm.FAILED),
])
def test_a_cron_entrys_run_is_queued_again_for_its_next_time(result, state):
    end = lc.batch_ended(job(restarts=2), 2000.0, policy=lc.Policy(cron_next=2060.0), **result)
    assert end.outcome == lc.CRON and end.state == state and end.attempt_state == state
    f = end.fields
    assert f["state"] == slurm.PENDING and f["reason"] == slurm.REASON_BEGIN_TIME
    # each run is numbered as a requeue's is (Restarts=, SLURM_RESTART_COUNT, sacct -D)
    assert f["eligible_time"] == 2060.0 and f["restarts"] == 3


def test_a_cancelled_cron_job_is_not_queued_again():
    stopping = job(kill_reason=slurm.CANCELLED)
    end = lc.batch_ended(stopping, 2000.0, signal=TERM, policy=lc.Policy(cron_next=2060.0))
    assert end.outcome == lc.FINAL and end.state == slurm.CANCELLED


def test_a_job_of_no_crontab_ends_as_before():
    end = lc.batch_ended(job(), 2000.0, policy=lc.Policy())
    assert end.outcome == lc.FINAL and end.fields["state"] == slurm.COMPLETED
