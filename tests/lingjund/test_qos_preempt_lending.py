"""preempt/qos and lending idle quota over a real store and scheduling passes.

node[1-2], 16 CPUs and 4 GPUs each (8 GPUs); sacctmgr sets the QOS and
accounts up through the service; agents are plain outboxes. Each test moves
the hand clock and runs passes as the controller would.
"""
from __future__ import annotations

import re

import pytest

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import associations as A, batch, jobs, preemption, scheduling
from lingjund.service.agents import Connection
from tests.lingjund import handclock
from tests.lingjund.test_assoc_limits import sacctmgr

NODES = ("node1", "node2")


def conf(preempt: str = "none", lend: bool = False, mode: str = "REQUEUE") -> str:
    return f"""cluster_name = "c"
[accounting]
enforce = ["associations", "limits"]
[preempt]
type = "{preempt}"
mode = "{mode}"
[scheduler]
lend_idle_quota = {"true" if lend else "false"}
[[nodes]]
names = "node[1-2]"
cpus = 16
memory_mb = 16000
gpus = 4
[[partitions]]
name = "debug"
nodes = "ALL"
"""


def make(tmp_path, text, grptres="gres/gpu=4"):
    cm = handclock.controller(tmp_path, text, NODES)
    c = cm.__enter__()
    for n in NODES:
        c.agents.attach(Connection(node=n))
    sacctmgr(c, "add", "account", ["acct_a", "acct_b"], grptres=grptres)
    sacctmgr(c, "add", "user", ["alice"], account="acct_a")
    sacctmgr(c, "add", "user", ["bob"], account="acct_b")
    return cm, c


@pytest.fixture
def lending(tmp_path):
    cm, c = make(tmp_path, conf(lend=True))
    yield c
    cm.__exit__(None, None, None)


@pytest.fixture
def by_qos(tmp_path):
    cm, c = make(tmp_path, conf(preempt="qos", mode="CANCEL"), grptres="")
    sacctmgr(c, "add", "qos", ["low"])
    sacctmgr(c, "add", "qos", ["high"], preempt="low", preemptmode="requeue")
    sacctmgr(c, "modify", "account", ["acct_a", "acct_b"], qos="normal,low,high")
    yield c
    cm.__exit__(None, None, None)


def submit(ctl, user="alice", gpus=1, **kw) -> int:
    spec = api_pb2.JobSpec(name="j", script="#!/bin/sh\ntrue\n", work_dir="/w", user=user,
                           uid=1000 + ord(user[0]), batch=True, partition="debug",
                           gpus_per_node=gpus, **kw)
    return jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id


def launched(ctl, jid: int) -> None:
    job = ctl.store.job(jid)
    batch.batch_started(ctl, job.batch_host, agent_pb2.BatchStarted(job_id=jid))


def finish(ctl, jid: int) -> None:
    job = ctl.store.job(jid)
    assert batch.record_batch_finished(ctl, job.batch_host, agent_pb2.BatchFinished(
        job_id=jid, end_time=int(ctl.clock.now), signal=15))
    for n in job.nodes:
        batch.job_cleaned(ctl, n, agent_pb2.JobCleaned(job_id=jid))


def state(ctl, jid) -> tuple[str, str]:
    job = ctl.store.job(jid)
    return job.state, job.reason


def own_gpus(ctl, account: str) -> int:
    """GPUs an account's running jobs hold of its own quota (borrowed ones left out)."""
    live = ctl.store.live
    return sum(sum(j.gpus_per_node) for jid in live.by_state.get(slurm.RUNNING, ())
               if (j := live.jobs[jid]).spec.account == account
               and j.reason != slurm.REASON_BORROWED)


# -- preempt/qos ------------------------------------------------------------------------

def test_a_high_qos_job_preempts_a_low_one_with_the_low_qos_mode(by_qos):
    ctl = by_qos
    low = submit(ctl, gpus=4, qos="low", requeue=True, num_tasks=1, cpus_per_task=16)
    other = submit(ctl, user="bob", gpus=4, qos="normal", num_tasks=1, cpus_per_task=16)
    scheduling.run_pass(ctl)
    assert state(ctl, low)[0] == state(ctl, other)[0] == slurm.RUNNING
    launched(ctl, low)
    launched(ctl, other)
    ctl.clock.now += 60
    high = submit(ctl, user="bob", gpus=2, qos="high")
    scheduling.run_pass(ctl)
    victim = ctl.store.job(low)
    assert (victim.kill_reason, victim.preempted_by) == ("PREEMPTED", high)
    assert ctl.store.job(other).kill_reason == "", "a normal-QOS job was preempted"
    # the victim's mode is its own QOS's: low's is cluster, so the cluster's CANCEL
    # (high's REQUEUE is for high's jobs)
    assert preemption.mode_of(ctl, victim) == "CANCEL"
    assert victim.preempt_requeue is False
    finish(ctl, low)
    assert state(ctl, low)[0] == slurm.PREEMPTED
    scheduling.run_pass(ctl)
    assert state(ctl, high)[0] == slurm.RUNNING


def test_the_victims_qos_mode_requeue_requeues_it(by_qos):
    ctl = by_qos
    sacctmgr(ctl, "modify", "qos", ["low"], preemptmode="requeue")
    low = submit(ctl, gpus=4, qos="low", requeue=True, num_tasks=1, cpus_per_task=16, min_nodes=2)
    scheduling.run_pass(ctl)
    launched(ctl, low)
    ctl.clock.now += 60
    high = submit(ctl, user="bob", gpus=1, qos="high")
    scheduling.run_pass(ctl)
    assert ctl.store.job(low).preempt_requeue is True
    finish(ctl, low)
    assert ctl.store.job(low).state == slurm.PENDING and ctl.store.job(low).restarts == 1
    ctl.clock.now += 1
    scheduling.run_pass(ctl)
    assert state(ctl, high)[0] == slurm.RUNNING


def test_the_victims_qos_gracetime_decides_when_it_is_killed(by_qos):
    """Under preempt/qos a victim's GraceTime is its QOS's (Slurm's preempt/qos),
    not its partition's; its QOS's PreemptExemptTime shows as PreemptEligibleTime."""
    ctl = by_qos
    sacctmgr(ctl, "modify", "qos", ["low"], gracetime="30", preemptexempttime="0:20")
    low = submit(ctl, gpus=4, qos="low", requeue=True, num_tasks=1, cpus_per_task=16, min_nodes=2)
    scheduling.run_pass(ctl)
    launched(ctl, low)
    assert preemption.eligible_time(ctl, ctl.store.job(low)) == ctl.store.job(low).start_time + 20
    ctl.clock.now += 10                        # inside low's PreemptExemptTime
    high = submit(ctl, user="bob", gpus=1, qos="high")
    scheduling.run_pass(ctl)
    assert ctl.store.job(low).kill_reason == ""
    ctl.clock.now += 15
    scheduling.run_pass(ctl)
    assert ctl.store.job(low).kill_reason == "PREEMPTED"
    preempted_at = ctl.store.job(low).preempt_time
    ctl.clock.now = preempted_at + 29.9        # in low's 30 s of grace
    scheduling.run_pass(ctl)
    assert not ctl.store.job(low).preempt_killed, "killed before its QOS's GraceTime"
    ctl.clock.now = preempted_at + 30.1
    scheduling.run_pass(ctl)
    assert ctl.store.job(low).preempt_killed
    [ev] = [e for e in ctl.store.job_events(low) if e.kind == "preempted"]
    assert "after 30 s grace" in ev.text, ev.text
    finish(ctl, low)
    ctl.clock.now += 1
    scheduling.run_pass(ctl)
    assert state(ctl, high)[0] == slurm.RUNNING


def test_a_normal_job_preempts_nothing_under_preempt_qos(by_qos):
    ctl = by_qos
    low = submit(ctl, gpus=4, qos="low", num_tasks=1, cpus_per_task=16, min_nodes=2)
    scheduling.run_pass(ctl)
    ctl.clock.now += 60
    plain = submit(ctl, user="bob", gpus=1, qos="normal")
    scheduling.run_pass(ctl)
    assert ctl.store.job(low).kill_reason == ""
    assert state(ctl, plain) == (slurm.PENDING, slurm.REASON_RESOURCES)


def test_bad_qos_preemption_settings_change_nothing(by_qos):
    ctl = by_qos
    before = dict(ctl.store.assoc.qos)
    for kw in ({"preempt": "nosuch"}, {"preemptmode": "suspend"}, {"preempt": "high"}):
        with pytest.raises(A.BadOption):
            sacctmgr(ctl, "modify", "qos", ["low" if kw.get("preempt") == "high" else "high"], **kw)
    assert ctl.store.assoc.qos == before
    # GraceTime is whole seconds (Slurm would read "1:30" as 1 s), PreemptExemptTime a time
    for kw, said in (({"gracetime": "1:30"}, "Invalid value for GraceTime (1:30)"),
                     ({"gracetime": "abc"}, "Invalid value for GraceTime (abc)"),
                     ({"preemptexempttime": "zz"}, "Bad PreemptExemptTime format")):
        with pytest.raises(A.BadOption, match=re.escape(said)):
            sacctmgr(ctl, "modify", "qos", ["low"], **kw)
    assert ctl.store.assoc.qos == before


# -- lending ----------------------------------------------------------------------------

def test_without_lending_an_account_never_passes_its_quota(tmp_path):
    cm, ctl = make(tmp_path, conf(lend=False))
    try:
        ids = [submit(ctl) for _ in range(6)]
        scheduling.run_pass(ctl)
        assert own_gpus(ctl, "acct_a") == 4
        assert [state(ctl, j)[1] for j in ids[4:]] == ["AssocGrpGRES"] * 2
    finally:
        cm.__exit__(None, None, None)


def test_an_account_alone_borrows_the_idle_quota_and_gives_it_back(lending):
    ctl = lending
    a_jobs = [submit(ctl) for _ in range(10)]
    scheduling.run_pass(ctl)
    running = [j for j in a_jobs if state(ctl, j)[0] == slurm.RUNNING]
    assert len(running) == 8, "all 8 GPUs in use"
    assert [state(ctl, j)[1] for j in a_jobs[:4]] == ["None"] * 4, "the first four are its own"
    assert [state(ctl, j)[1] for j in a_jobs[4:8]] == [slurm.REASON_BORROWED] * 4
    assert [state(ctl, j) for j in a_jobs[8:]] == [(slurm.PENDING, "AssocGrpGRES")] * 2
    assert own_gpus(ctl, "acct_a") == 4
    for j in a_jobs[:8]:
        launched(ctl, j)

    # B submits within its quota: borrowed jobs of A are preempted, A's own are not
    ctl.clock.now += 30
    b_jobs = [submit(ctl, user="bob") for _ in range(2)]
    scheduling.run_pass(ctl)
    taken = [j for j in a_jobs if ctl.store.job(j).kill_reason == "PREEMPTED"]
    assert taken and set(taken) <= set(a_jobs[4:8]), taken
    assert all(ctl.store.job(j).kill_reason == "" for j in a_jobs[:4])
    for j in taken:
        finish(ctl, j)
        assert state(ctl, j)[0] == slurm.PENDING, "a borrowed job is requeued"
    # one victim per pass makes room: go on until both of B's jobs run
    for _ in range(4):
        ctl.clock.now += 1
        scheduling.run_pass(ctl)
        for j in a_jobs:
            job = ctl.store.job(j)
            if job.kill_reason == "PREEMPTED" and job.state == slurm.RUNNING:
                finish(ctl, j)
    assert [state(ctl, j) for j in b_jobs] == [(slurm.RUNNING, "None")] * 2
    assert own_gpus(ctl, "acct_b") == 2
    assert own_gpus(ctl, "acct_a") == 4
    # the requeued ones wait as borrowers again: nothing is free
    assert sum(state(ctl, j)[0] == slurm.RUNNING for j in a_jobs) == 6


def test_borrowed_jobs_do_not_count_against_the_owner(lending):
    """A's own job ends; A's next job starts as its own although A already
    holds 4 borrowed GPUs."""
    ctl = lending
    a_jobs = [submit(ctl) for _ in range(8)]
    scheduling.run_pass(ctl)
    for j in a_jobs:
        launched(ctl, j)
    ctl.clock.now += 5
    finish(ctl, a_jobs[0])
    nxt = submit(ctl)
    scheduling.run_pass(ctl)
    assert state(ctl, nxt) == (slurm.RUNNING, "None")
    assert own_gpus(ctl, "acct_a") == 4


def test_a_borrower_does_not_take_what_another_pending_job_can_use(lending):
    """B's job fits in B's quota and goes first even when A's borrower is ahead
    in the queue: borrowing takes only what is left over."""
    ctl = lending
    a_jobs = [submit(ctl) for _ in range(4)]
    scheduling.run_pass(ctl)
    borrower = submit(ctl, gpus=4)
    b_job = submit(ctl, user="bob", gpus=4)
    scheduling.run_pass(ctl)
    assert state(ctl, b_job) == (slurm.RUNNING, "None")
    assert state(ctl, borrower) == (slurm.PENDING, "AssocGrpGRES")
    assert all(state(ctl, j)[0] == slurm.RUNNING for j in a_jobs)
