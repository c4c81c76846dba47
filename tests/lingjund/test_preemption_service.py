"""Preemption in the service layer over a real SQLite store and a hand-moved
clock: what the controller sends a victim and when, and how its end is recorded.

node[1-2], 2 CPUs each; partitions ``low`` (tier 1, REQUEUE, GraceTime 5 s),
``lowc`` (tier 1, CANCEL, GraceTime 0) and ``high`` (tier 2). Agents are
plain outboxes: every message the controller sends is read back.
"""
from __future__ import annotations

import signal

import pytest

from lingjun import config, slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund import lifecycle
from lingjund.service import batch, jobs, scheduling, timers
from lingjund.service.agents import Connection
from tests.lingjund import handclock

CONF = """
[preempt]
type = "partition_prio"
mode = "REQUEUE"
[[nodes]]
names = "node[1-2]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "low"
nodes = "ALL"
grace_time_s = 5
[[partitions]]
name = "lowc"
nodes = "ALL"
preempt_mode = "CANCEL"
[[partitions]]
name = "high"
nodes = "ALL"
priority_tier = 2
preempt_mode = "OFF"
"""
NODES = ("node1", "node2")


@pytest.fixture
def ctl(tmp_path):
    with handclock.controller(tmp_path, CONF, NODES) as c:
        for n in NODES:
            c.agents.attach(Connection(node=n))
        yield c


def sent(ctl) -> list[tuple[str, str, object]]:
    """(node, kind, message) of everything sent since the last call."""
    out = []
    for n in NODES:
        q = ctl.agents.get(n).outbox
        while not q.empty():
            msg = q.get_nowait()
            kind = msg.WhichOneof("msg")
            out.append((n, kind, getattr(msg, kind)))
    return out


def submit(ctl, part: str, nodes: int = 2, **kw) -> int:
    spec = api_pb2.JobSpec(name="j", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u", uid=1,
                           batch=True, partition=part, min_nodes=nodes, cpus_per_task=2, **kw)
    return jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id


def running_victim(ctl, part: str = "low", **kw) -> int:
    jid = submit(ctl, part, **kw)
    scheduling.run_pass(ctl)
    job = ctl.store.job(jid)
    assert job.state == slurm.RUNNING
    batch.batch_started(ctl, job.batch_host, agent_pb2.BatchStarted(job_id=jid))
    sent(ctl)
    ctl.clock.now += 60
    return jid


def finish(ctl, jid: int, sig: int = 0) -> None:
    job = ctl.store.job(jid)
    assert batch.record_batch_finished(ctl, job.batch_host, agent_pb2.BatchFinished(
        job_id=jid, signal=sig, end_time=int(ctl.clock.now)))
    for n in job.nodes:
        batch.job_cleaned(ctl, n, agent_pb2.JobCleaned(job_id=jid))


def test_victim_gets_its_signal_then_the_kill_after_grace_then_requeues(ctl):
    victim = running_victim(ctl, signal=int(signal.SIGUSR1), signal_time_s=30, signal_flags="B")
    high = submit(ctl, "high", nodes=1)
    scheduling.run_pass(ctl)
    msgs = sent(ctl)
    assert [(n, k, m.signal, m.batch_only) for n, k, m in msgs] == \
        [("node1", "signal_job", signal.SIGUSR1, True)], msgs
    job = ctl.store.job(victim)
    assert (job.kill_reason, job.preempted_by, job.preempt_time) == ("PREEMPTED", high, 1060.0)
    assert ctl.store.job(high).reason == slurm.REASON_RESOURCES
    now = ctl.clock()
    assert lifecycle.next_deadline(timers.view(ctl, now), now) == 1065.0, \
        "the pass must wake when the grace ends"

    ctl.clock.now += 4.9                         # still in its grace time
    scheduling.run_pass(ctl)
    assert sent(ctl) == [], "signalled twice, or killed before its grace time ended"

    ctl.clock.now += 0.2
    scheduling.run_pass(ctl)
    kills = sent(ctl)
    assert sorted((n, k) for n, k, _ in kills) == [("node1", "terminate_job"),
                                                   ("node2", "terminate_job")]
    # the batch node writes slurmstepd's "... DUE TO PREEMPTION ***" into the output
    assert {(m.announce, m.cause) for _, _, m in kills} == {(True, "PREEMPTION")}
    finish(ctl, victim, sig=signal.SIGTERM)
    job = ctl.store.job(victim)
    assert (job.state, job.reason, job.restarts) == (slurm.PENDING, slurm.REASON_BEGIN_TIME, 1)
    scheduling.run_pass(ctl)
    assert ctl.store.job(high).state == slurm.RUNNING
    # the history says why, and sacct -D keeps the preempted run
    [ev] = ctl.store.job_events(victim)
    assert (ev.kind, ev.time) == ("preempted", 1060.0)
    assert ev.text.startswith(f"preempted by job {high} on node[1-2]; requeued after 5 s grace"), ev.text
    assert [a.state for a in ctl.store.attempts([victim])[victim]] == [slurm.PREEMPTED]


def test_cancel_mode_with_no_grace_kills_at_once_and_ends_preempted(ctl):
    victim = running_victim(ctl, "lowc")
    submit(ctl, "high", nodes=2)
    scheduling.run_pass(ctl)
    kinds = sorted((n, k) for n, k, _ in sent(ctl))
    # No --signal: SIGTERM to its steps, and with GraceTime=0 the kill in the same pass.
    assert kinds == [("node1", "signal_job"), ("node1", "terminate_job"),
                     ("node2", "signal_job"), ("node2", "terminate_job")], kinds
    finish(ctl, victim, sig=signal.SIGTERM)
    job = ctl.store.job(victim)
    assert (job.state, job.restarts) == (slurm.PREEMPTED, 0)
    assert ctl.store.steps([victim])[victim][0].state == slurm.CANCELLED


def test_a_job_that_refuses_requeue_is_cancelled_instead(ctl):
    victim = running_victim(ctl, "low", requeue=False)
    submit(ctl, "high", nodes=2)
    scheduling.run_pass(ctl)
    ctl.clock.now += 5
    scheduling.run_pass(ctl)
    finish(ctl, victim, sig=signal.SIGTERM)
    assert ctl.store.job(victim).state == slurm.PREEMPTED


def test_scancel_in_the_grace_time_wins(ctl):
    victim = running_victim(ctl, "low")
    submit(ctl, "high", nodes=1)
    scheduling.run_pass(ctl)
    jobs.cancel(ctl, api_pb2.CancelJobsRequest(job_ids=[victim], requester_uid=1))
    finish(ctl, victim, sig=signal.SIGTERM)
    job = ctl.store.job(victim)
    assert (job.state, job.restarts) == (slurm.CANCELLED, 0)


def test_preemption_off_leaves_running_jobs_alone(ctl):
    ctl.config = config.parse(CONF.replace('type = "partition_prio"', 'type = "none"'))
    victim = running_victim(ctl, "low")
    high = submit(ctl, "high", nodes=1)
    scheduling.run_pass(ctl)
    assert sent(ctl) == []
    assert ctl.store.job(victim).kill_reason == ""
    assert ctl.store.job(high).reason == slurm.REASON_RESOURCES


@pytest.mark.parametrize("text,error", [
    ('[preempt]\ntype = "suspend"\n', "[preempt] type"),
    ('[preempt]\nmode = "SUSPEND"\n', "[preempt] mode"),
    ('[[partitions]]\nname = "p"\npreempt_mode = "GANG"\n', "preempt_mode"),
    ('[[partitions]]\nname = "p"\ngrace_time_s = -1\n', "grace_time_s"),
], ids=["an unknown PreemptType", "SUSPEND mode (not supported)", "an unknown partition mode",
        "a negative grace time"])
def test_bad_preempt_config_is_refused(text, error):
    with pytest.raises(config.ConfigError, match=error.replace("[", r"\[").replace("]", r"\]")):
        config.parse(text)


def test_a_partition_may_opt_in_when_the_cluster_mode_is_off(ctl):
    """[preempt] mode OFF (the default) leaves partitions that name no mode
    alone; a partition with its own mode is still preemptible."""
    text = CONF.replace('mode = "REQUEUE"\n', 'mode = "OFF"\n', 1)
    ctl.config = config.parse(text)
    assert ctl.config.preempt_mode(ctl.partition("low")) == "OFF"
    victim = running_victim(ctl, "lowc")
    submit(ctl, "high", nodes=2)
    scheduling.run_pass(ctl)
    assert ctl.store.job(victim).kill_reason == "PREEMPTED"
