"""Associations in the service: usage charged and kept over a restart,
billing weights and UsageFactor, the default account, MaxWall, the memory
copy after a rolled-back write, and the [accounting] settings' checks."""
from __future__ import annotations

import time

import pytest

from lingjun import config
from lingjun.v1 import api_pb2
from lingjund.service import associations as A, errors, jobs
from lingjund.service.context import Controller
from lingjund.service.views import build_snapshot
from lingjund.store.assoc import Account, Association, Qos
from lingjund.store.store import Store

NODES = '[[nodes]]\nnames = "n1"\ncpus = 8\nmemory_mb = 8192\ngpus = 2\n[[partitions]]\nname = "debug"\nnodes = "ALL"\n'
R = api_pb2.AcctMgrRequest


def make(tmp_path, accounting: str = "", now: list | None = None):
    store = Store(str(tmp_path / "db.sqlite"))
    clock = now or [1000.0]
    ctl = Controller(config=config.parse(f'cluster_name = "c"\n[accounting]\n{accounting}\n' + NODES),
                     store=store, clock=lambda: clock[0])
    return ctl, clock


def sacctmgr(ctl, verb, entity, names, **set_):
    return A.acctmgr(ctl, R(verb=verb, entity=entity, names=names, set=set_, requester_uid=0))


def spec(**kw):
    base = dict(name="t", script="#!/bin/sh\ntrue\n", work_dir="/tmp", user="alice", uid=1000, batch=True)
    base.update(kw)
    return api_pb2.JobSpec(**base)


def running(ctl, start: float, cpus: int = 2, gpus: int = 0, **kw) -> int:
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(**kw))).job_id
    with ctl.store.transaction() as st:
        st.update_job(jid, state="RUNNING", start_time=start, nodes=("n1",), cpus_per_node=(cpus,),
                      mem_per_node=(1024,), gpus_per_node=(gpus,))
    return jid


@pytest.fixture
def alice(tmp_path):
    ctl, clock = make(tmp_path, 'priority_decay_half_life = "1:00:00"')
    sacctmgr(ctl, "add", "account", ["phys"])
    sacctmgr(ctl, "add", "user", ["alice"], account="phys")
    return ctl, clock


def usage(ctl, account="phys", user="alice") -> float:
    return ctl.store.assoc.assocs[(account, user, "")].raw_usage


def test_a_running_job_is_charged_its_cpus_times_seconds_and_usage_decays(alice):
    ctl, clock = alice
    t0 = time.time()        # a finished job stays in memory for a while after its end (real time)
    ctl.store.assoc.usage_tick = t0
    jid = running(ctl, start=t0, cpus=2)
    A.charge_usage(ctl, t0 + 60)
    assert usage(ctl) == pytest.approx(120.0)
    with ctl.store.transaction() as st:
        st.update_job(jid, state="COMPLETED", end_time=t0 + 90)
    A.charge_usage(ctl, t0 + 60 + 3600)        # 30 s more of it, then an hour's decay
    assert usage(ctl) == pytest.approx(120.0 / 2 + 60.0, rel=0.01)


def test_usage_survives_a_restart_and_the_downtime_of_a_running_job_is_charged(tmp_path):
    ctl, clock = make(tmp_path, 'priority_decay_half_life = "0"')
    sacctmgr(ctl, "add", "account", ["phys"])
    sacctmgr(ctl, "add", "user", ["alice"], account="phys")
    ctl.store.assoc.usage_tick = 1000.0
    running(ctl, start=1000.0, cpus=4)
    A.charge_usage(ctl, 1010.0)
    assert usage(ctl) == 40.0
    ctl.store.close()
    ctl2, _ = make(tmp_path, 'priority_decay_half_life = "0"', now=[1100.0])
    assert usage(ctl2) == 40.0                 # from the store
    t = ctl2.store.assoc
    t.usage_tick = max(a.usage_time for a in t.assocs.values())    # as usage_loop starts
    A.charge_usage(ctl2, 1100.0)
    assert usage(ctl2) == 400.0                # the job kept running while we were away


def test_billing_weights_and_the_qos_usage_factor(tmp_path):
    ctl, _ = make(tmp_path, 'priority_decay_half_life = "0"\ntres_billing_weights = "CPU=1.0,Mem=0.25G,GRES/gpu=16"')
    sacctmgr(ctl, "add", "account", ["phys"])
    sacctmgr(ctl, "add", "user", ["alice"], account="phys")
    sacctmgr(ctl, "add", "qos", ["double"], usagefactor="2")
    ctl.store.assoc.usage_tick = 1000.0
    running(ctl, start=1000.0, cpus=2, gpus=1)
    running(ctl, start=1000.0, cpus=1, qos="double")
    A.charge_usage(ctl, 1001.0)
    assert usage(ctl) == pytest.approx((2 + 0.25 + 16) + 2 * (1 + 0.25))


def test_more_usage_lowers_the_fairshare_factor_and_strangers_get_one(alice):
    ctl, _ = alice
    sacctmgr(ctl, "add", "user", ["bob"], account="phys")
    assert A.fairshare_factor(ctl, "alice", "phys") == A.fairshare_factor(ctl, "bob", "phys") == 1.0
    with ctl.store.transaction():
        ctl.store.save_usage({("phys", "alice", ""): (500.0, 1000.0)})
    ctl.store.assoc.usage_tick = 1000.5
    assert A.fairshare_factor(ctl, "alice", "phys") < A.fairshare_factor(ctl, "bob", "phys")
    assert A.fairshare_factor(ctl, "alice", "") == A.fairshare_factor(ctl, "alice", "phys")
    assert A.fairshare_factor(ctl, "nobody", "") == 1.0


def test_without_enforcement_the_default_account_is_still_given_and_strangers_pass(alice):
    ctl, _ = alice
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec())).job_id
    assert ctl.store.job(jid).spec.account == "phys"
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(user="carol", uid=1002, account="x"))).job_id
    assert ctl.store.job(jid).spec.account == "x"


def test_maxwall_refuses_a_longer_job_and_bounds_one_without_a_limit(tmp_path):
    ctl, _ = make(tmp_path, 'enforce = ["limits"]')
    sacctmgr(ctl, "add", "account", ["phys"], maxwall="30")
    sacctmgr(ctl, "add", "user", ["alice"], account="phys")
    before = ctl.store.dump()
    with pytest.raises(errors.SlurmError, match="Job violates accounting/QOS policy"):
        jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(time_limit_min=31)))
    assert ctl.store.dump() == before
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec())).job_id
    assert ctl.store.job(jid).time_limit_min == 30


def test_a_qos_the_association_does_not_allow_is_refused(tmp_path):
    ctl, _ = make(tmp_path, 'enforce = ["qos"]')
    sacctmgr(ctl, "add", "qos", ["high"])
    sacctmgr(ctl, "add", "account", ["phys"])
    sacctmgr(ctl, "add", "user", ["alice"], account="phys")
    with pytest.raises(errors.InvalidQos):
        jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(qos="high")))
    sacctmgr(ctl, "add", "user", ["bob"], account="phys", qos="normal,high")
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(user="bob", uid=1001, qos="high"))).job_id
    assert ctl.store.job(jid).spec.qos == "high"


def test_users_inherit_the_limits_of_the_accounts_above_them(alice):
    ctl, _ = alice
    sacctmgr(ctl, "add", "account", ["chem"], parent="phys")
    sacctmgr(ctl, "add", "user", ["alice"], account="chem", maxjobs="3")
    A.acctmgr(ctl, R(verb="modify", entity="account", names=["phys"],
                     set={"grptres": "cpu=8", "maxjobs": "5"}, requester_uid=0))
    e = A.effective_association(ctl.store.assoc, "chem", "alice")
    assert (e.max_jobs, e.grp_tres, e.qos) == (3, "cpu=8", "normal")
    assert A.effective_association(ctl.store.assoc, "phys", "alice").max_jobs == 5


def test_a_rolled_back_write_leaves_the_memory_copy_as_it_was(alice):
    ctl, _ = alice
    st = ctl.store
    before = dict(st.assoc.accounts), dict(st.assoc.assocs)
    with pytest.raises(RuntimeError):
        with st.transaction():
            st.put_assoc_record(Account("ghost", parent="root"))
            st.put_assoc_record(Association("phys", user="alice", shares=99))
            st.delete_assoc_record(st.assoc.accounts["phys"])
            raise RuntimeError("boom")
    assert (st.assoc.accounts, st.assoc.assocs) == before
    assert "ghost" not in Store(st.path).assoc.accounts


def test_a_fresh_store_holds_root_and_normal(tmp_path):
    t = Store(str(tmp_path / "db.sqlite")).assoc
    assert list(t.accounts) == ["root"] and t.users["root"].admin_level == "Administrator"
    assert set(t.assocs) == {("root", "", ""), ("root", "root", "")}
    assert t.qos == {"normal": Qos("normal", description="Normal QOS default")}


@pytest.mark.parametrize("text,words", [
    ('enforce = ["assocs"]', "[accounting] enforce: 'assocs' is not one of"),
    ('tres_billing_weights = "CPU=x"', "[accounting] tres_billing_weights: invalid entry 'CPU=x'"),
    ('priority_usage_reset_period = "HOURLY"', "priority_usage_reset_period: 'HOURLY' is not one of"),
])
def test_bad_accounting_settings_are_refused(text, words):
    with pytest.raises(config.ConfigError) as e:
        config.parse(f"[accounting]\n{text}\n")
    assert words in str(e.value)


def test_limits_and_qos_imply_associations():
    assert config.parse('[accounting]\nenforce = ["limits"]\n').accounting.enforce == ("associations", "limits")


def test_fair_share_and_qos_priority_order_the_queue_under_multifactor(alice):
    """The user who used the cluster waits behind the one who did not; a QOS of
    higher Priority goes first; a pass sees new usage once it is charged."""
    ctl, clock = alice
    sacctmgr(ctl, "add", "account", ["bio"])
    sacctmgr(ctl, "add", "user", ["bob"], account="bio")
    sacctmgr(ctl, "add", "qos", ["high"], priority="100")
    sacctmgr(ctl, "modify", "user", ["bob"], qos="normal,high")
    held = dict(begin_time=4_000_000_000)                 # pending for good
    a1 = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(**held))).job_id
    b1 = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(user="bob", uid=1001, **held))).job_id
    prio = lambda jid: ctl.store.job(jid).priority        # noqa: E731
    assert abs(prio(a1) - prio(b1)) <= 1                  # nobody has used anything: equal but for age
    seen = lambda jid: next(j for j in build_snapshot(ctl, clock[0]).pending if j.job_id == jid)  # noqa: E731
    before = seen(a1).fairshare
    with ctl.store.transaction():
        ctl.store.save_usage({("phys", "alice", ""): (5000.0, 1000.0)})
    ctl.store.assoc.usage_tick = 1000.5
    ctl.views.forget_requests()                           # as usage_loop does after a charge
    after = seen(a1).fairshare
    assert after < before == 1.0
    a2 = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(**held))).job_id
    b2 = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(user="bob", uid=1001, **held))).job_id
    weight = ctl.config.priority.weight_fairshare
    assert prio(b2) - prio(a2) >= weight * (1.0 - after) - 2
    b3 = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec(user="bob", uid=1001, qos="high", **held))).job_id
    assert prio(b3) - prio(b2) >= ctl.config.priority.weight_qos - 2
