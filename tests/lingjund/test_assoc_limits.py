"""QOS and association limits over a real store and a scheduling pass:
sacctmgr sets them, jobs.submit queues, scheduling.run_pass holds what would
exceed them with Slurm's reason, and the held job starts once usage drops.
MaxTRESPerJob is refused at submit."""
from __future__ import annotations

import pytest

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import associations as A, authz, batch, jobs, scheduling
from lingjund.service.agents import Connection
from tests.lingjund import handclock

NODES = ("node1", "node2")


def conf(enforce: str) -> str:
    return f"""cluster_name = "c"
[accounting]
enforce = {enforce}
[[nodes]]
names = "node[1-2]"
cpus = 16
memory_mb = 16000
gpus = 4
[[partitions]]
name = "debug"
nodes = "ALL"
"""


def sacctmgr(ctl, verb, entity, names, **set_):
    return A.acctmgr(ctl, api_pb2.AcctMgrRequest(verb=verb, entity=entity, names=names, set=set_,
                                                 requester_uid=0))


@pytest.fixture
def ctl(tmp_path):
    with handclock.controller(tmp_path, conf('["limits"]'), NODES) as c:
        for n in NODES:
            c.agents.attach(Connection(node=n))
        sacctmgr(c, "add", "account", ["phys", "chem"])
        sacctmgr(c, "add", "user", ["alice", "bob"], account="phys")
        sacctmgr(c, "add", "user", ["carol"], account="chem")
        yield c


def submit(ctl, user="alice", gpus=0, **kw) -> int:
    spec = api_pb2.JobSpec(name="j", script="#!/bin/sh\ntrue\n", work_dir="/w", user=user,
                           uid=1000 + ord(user[0]), batch=True, partition="debug",
                           gpus_per_node=gpus, **kw)
    return jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id


def state(ctl, jid) -> tuple[str, str]:
    job = ctl.store.job(jid)
    return job.state, job.reason


def finish(ctl, jid: int) -> None:
    job = ctl.store.job(jid)
    batch.batch_started(ctl, job.batch_host, agent_pb2.BatchStarted(job_id=jid))
    assert batch.record_batch_finished(ctl, job.batch_host, agent_pb2.BatchFinished(
        job_id=jid, end_time=int(ctl.clock.now)))
    for n in job.nodes:
        batch.job_cleaned(ctl, n, agent_pb2.JobCleaned(job_id=jid))


def test_qos_grp_gpu_holds_the_second_job_until_the_first_ends(ctl):
    sacctmgr(ctl, "modify", "qos", ["normal"], grptres="gres/gpu=2")
    first, second = submit(ctl, gpus=2), submit(ctl, gpus=2)
    scheduling.run_pass(ctl)
    assert state(ctl, first)[0] == slurm.RUNNING
    assert state(ctl, second) == (slurm.PENDING, "QOSGrpGRES")
    ctl.clock.now += 10
    finish(ctl, first)
    scheduling.run_pass(ctl)
    assert state(ctl, second)[0] == slurm.RUNNING


def test_a_job_held_by_its_account_limit_does_not_hold_another_accounts_job(ctl):
    sacctmgr(ctl, "modify", "account", ["phys"], grptres="gres/gpu=4")
    a1, b1 = submit(ctl, gpus=4), submit(ctl, "bob", gpus=1)
    c1 = submit(ctl, "carol", gpus=1)
    scheduling.run_pass(ctl)
    assert state(ctl, a1)[0] == slurm.RUNNING
    assert state(ctl, b1) == (slurm.PENDING, "AssocGrpGRES")
    assert state(ctl, c1)[0] == slurm.RUNNING


def test_max_jobs_and_max_jobs_per_user(ctl):
    sacctmgr(ctl, "modify", "user", ["alice"], maxjobs="1")
    sacctmgr(ctl, "modify", "qos", ["normal"], maxjobsperuser="2")
    a1, a2 = submit(ctl), submit(ctl)
    b1, b2, b3 = submit(ctl, "bob"), submit(ctl, "bob"), submit(ctl, "bob")
    scheduling.run_pass(ctl)
    assert [state(ctl, j)[0] for j in (a1, b1, b2)] == [slurm.RUNNING] * 3
    assert state(ctl, a2) == (slurm.PENDING, "AssocMaxJobsLimit")
    assert state(ctl, b3) == (slurm.PENDING, "QOSMaxJobsPerUserLimit")


def test_without_limits_enforced_nothing_is_held(tmp_path):
    with handclock.controller(tmp_path, conf('["associations"]'), NODES) as c:
        for n in NODES:
            c.agents.attach(Connection(node=n))
        sacctmgr(c, "add", "account", ["phys"])
        sacctmgr(c, "add", "user", ["alice"], account="phys")
        sacctmgr(c, "modify", "qos", ["normal"], grptres="gres/gpu=2")
        jids = [submit(c, gpus=2), submit(c, gpus=2)]
        scheduling.run_pass(c)
        assert [c.store.job(j).state for j in jids] == [slurm.RUNNING, slurm.RUNNING]


@pytest.mark.parametrize("where,kw", [
    ("qos", dict(gpus=3)), ("assoc", dict(gpus=3)), ("qos_nodes", dict(min_nodes=2)),
])
def test_max_tres_per_job_is_refused_at_submit(ctl, where, kw):
    if where == "assoc":
        sacctmgr(ctl, "modify", "account", ["phys"], maxtres="gres/gpu=2")
    elif where == "qos":
        sacctmgr(ctl, "modify", "qos", ["normal"], maxtresperjob="gres/gpu=2")
    else:
        sacctmgr(ctl, "modify", "qos", ["normal"], maxtres="node=1")
    with pytest.raises(authz.SubmitLimit, match="Job violates accounting/QOS policy"):
        submit(ctl, **kw)
    submit(ctl, gpus=2)           # at the limit: taken
