"""Node health in the service layer over a real store: probe drains, return to
service, a person's drain, flap damping, and the prolog's requeue."""
from __future__ import annotations

import pytest

from lingjun import slurm
from lingjun.v1 import agent_pb2, api_pb2
from lingjund.sched.snapshot import Plan, Start
from lingjund.service import health, jobs, nodes, scheduling
from tests.lingjund import handclock

CONF = """
[[nodes]]
names = "node[1-4]"
cpus = 2
memory_mb = 2000
[sanity]
flap_count = 3
flap_window_s = 100
prolog_timeout_s = 30
"""


@pytest.fixture
def ctl(tmp_path):
    with handclock.controller(tmp_path, CONF, [f"node{i}" for i in range(1, 5)]) as c:
        yield c


def res(name="disk", ok=True, reason="", severity="drain") -> api_pb2.SanityResult:
    return api_pb2.SanityResult(name=name, severity=severity, ok=ok, reason=reason, phase="periodic")


BAD = res(ok=False, reason="/scratch: 1 MB free < 2 MB")


def node(ctl, name="node1"):
    return ctl.store.node(name)


def events(ctl, name="node1") -> list[str]:
    return [e.event for e in reversed(ctl.store.node_events(name))]


def test_a_failing_drain_probe_drains_and_passing_returns_the_node(ctl):
    health.record(ctl, "node1", "periodic", [res("cpu"), BAD])
    n = node(ctl)
    assert (n.drain, n.drain_by_probe, n.reason, n.reason_user, n.reason_time) == \
        (True, True, "disk: /scratch: 1 MB free < 2 MB", "root", 1000.0)
    ctl.clock.now += 5
    health.record(ctl, "node1", "periodic", [res("cpu"), res("disk")])
    n = node(ctl)
    assert (n.drain, n.reason) == (False, "")
    assert events(ctl) == ["drain", "resume"]
    assert {r.name: r.ok for r in ctl.store.probe_results()["node1"]} == {"cpu": True, "disk": True}


def test_a_warn_probe_is_recorded_but_drains_nothing(ctl):
    health.record(ctl, "node1", "periodic", [res("processes", ok=False, reason="3 defunct", severity="warn")])
    assert not node(ctl).drain
    assert ctl.store.probe_results()["node1"][0].reason == "3 defunct"


def test_several_failures_name_the_first_and_count_the_rest(ctl):
    health.record(ctl, "node1", "periodic", [BAD, res("gpu", ok=False, reason="GPU 0: XID 79")])
    assert node(ctl).reason == "disk: /scratch: 1 MB free < 2 MB (+1 more)"


def test_a_person_drain_is_neither_reworded_nor_lifted_by_probes(ctl):
    nodes.update_node(ctl, api_pb2.UpdateNodeRequest(names=["node1"], state="DRAIN",
                                                     reason="bad fan", requester="alice"))
    health.record(ctl, "node1", "periodic", [BAD])
    health.record(ctl, "node1", "periodic", [res("disk")])
    n = node(ctl)
    assert (n.drain, n.reason, n.reason_user) == (True, "bad fan", "alice")
    assert [(e.event, e.reason, e.by) for e in ctl.store.node_events("node1")] == \
        [("drain", "bad fan", "alice")]


def test_a_person_taking_over_a_probe_drain_keeps_it(ctl):
    health.record(ctl, "node1", "periodic", [BAD])
    nodes.update_node(ctl, api_pb2.UpdateNodeRequest(names=["node1"], state="DRAIN",
                                                     reason="investigating", requester="bob"))
    health.record(ctl, "node1", "periodic", [res("disk")])
    assert (node(ctl).drain, node(ctl).reason) == (True, "investigating")


def test_a_flapping_node_stays_drained_until_a_person_resumes_it(ctl):
    for _ in range(2):
        health.record(ctl, "node1", "periodic", [BAD])
        ctl.clock.now += 10
        health.record(ctl, "node1", "periodic", [res("disk")])
        ctl.clock.now += 10
        assert not node(ctl).drain
    health.record(ctl, "node1", "periodic", [BAD])
    ctl.clock.now += 10
    health.record(ctl, "node1", "periodic", [res("disk")])
    n = node(ctl)
    assert n.drain and not n.drain_by_probe, n
    assert n.reason == "flapping: 3 recoveries in 100 s, last disk: /scratch: 1 MB free < 2 MB"
    health.record(ctl, "node1", "periodic", [res("disk")])
    assert node(ctl).drain
    assert events(ctl) == ["drain", "resume", "drain", "resume", "drain", "flapping"]
    nodes.update_node(ctl, api_pb2.UpdateNodeRequest(names=["node1"], state="RESUME"))
    assert not node(ctl).drain


def test_recoveries_outside_the_window_do_not_count(ctl):
    for _ in range(4):
        health.record(ctl, "node1", "periodic", [BAD])
        ctl.clock.now += 60
        health.record(ctl, "node1", "periodic", [res("disk")])
        ctl.clock.now += 60
    assert not node(ctl).drain


def test_a_down_node_is_left_to_whoever_downed_it(ctl):
    with ctl.store.transaction() as st:
        st.put_node("node1", down=True, reason="Not responding")
    health.record(ctl, "node1", "periodic", [BAD])
    assert not node(ctl).drain and node(ctl).reason == "Not responding"


def test_a_dropin_gone_from_the_directory_is_forgotten(ctl):
    health.record(ctl, "node1", "periodic", [res("dropin:a"), res("dropin:b"), res("disk")])
    health.record(ctl, "node1", "periodic", [res("dropin:a"), res("disk")])
    assert sorted(r.name for r in ctl.store.probe_results()["node1"]) == ["disk", "dropin:a"]


# -- prolog ----------------------------------------------------------------------------
def running_gang(ctl, n=3) -> int:
    spec = api_pb2.JobSpec(name="gang", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u",
                           uid=1, batch=True, min_nodes=n)
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id
    names = tuple(f"node{i}" for i in range(1, n + 1))
    plan = Plan(starts=(Start(job_id=jid, nodes=names, cpus_per_node=(1,) * n,
                              mem_per_node_mb=(0,) * n, gpus_per_node=(0,) * n,
                              tasks_per_node=(1,) * n),), reasons={})
    [job] = scheduling.apply_plan(ctl, plan, ctl.clock())
    health.start_prolog(ctl, job)
    return jid


def report(jid, *results) -> agent_pb2.SanityReport:
    return agent_pb2.SanityReport(phase="prolog", job_id=jid, results=list(results))


def test_a_failed_prolog_drains_the_node_and_requeues_the_job_in_place(ctl):
    jid = running_gang(ctl)
    before = ctl.store.job(jid)
    health.prolog_report(ctl, "node1", report(jid, res("disk")))
    health.prolog_report(ctl, "node2", report(jid, res("dropin:gpu", ok=False, reason="burn failed")))
    job = ctl.store.job(jid)
    assert (job.state, job.nodes, job.batch_host, job.start_time, job.launched) == \
        (slurm.PENDING, (), "", 0.0, False)
    assert (job.priority, job.submit_time, job.restarts, job.eligible_time) == \
        (before.priority, before.submit_time, before.restarts, before.eligible_time)
    n2 = node(ctl, "node2")
    assert (n2.drain, n2.drain_by_probe, n2.reason) == (True, True, "dropin:gpu: burn failed")
    assert [(e.event, e.job_id) for e in ctl.store.node_events("node2")] == [("prolog_fail", jid)]
    health.prolog_report(ctl, "node3", report(jid, res("disk")))     # late answer: nothing happens
    assert ctl.store.job(jid).state == slurm.PENDING and jid not in ctl.prologs


def test_a_passed_prolog_leaves_the_job_running_to_be_launched(ctl):
    jid = running_gang(ctl, 2)
    health.prolog_report(ctl, "node1", report(jid, res("disk")))
    assert jid in ctl.prologs
    health.prolog_report(ctl, "node2", report(jid, res("disk"), res("processes", ok=False, severity="warn")))
    assert jid not in ctl.prologs and ctl.store.job(jid).state == slurm.RUNNING


def test_a_silent_node_fails_its_prolog_after_the_timeout(ctl):
    jid = running_gang(ctl, 2)
    health.prolog_report(ctl, "node1", report(jid, res("disk")))
    ctl.clock.now += 29
    health.check_prologs(ctl)
    assert ctl.store.job(jid).state == slurm.RUNNING
    ctl.clock.now += 2
    health.check_prologs(ctl)
    assert ctl.store.job(jid).state == slurm.PENDING
    assert (node(ctl, "node2").drain, node(ctl, "node2").reason) == (True, "prolog: no answer in 30 s")
    assert not node(ctl, "node1").drain


def tcp_report(jid, unreachable=()) -> agent_pb2.SanityReport:
    ok = not unreachable
    return agent_pb2.SanityReport(phase="prolog", job_id=jid, unreachable=list(unreachable), results=[
        res("disk"), res("tcp", ok=ok, severity="warn", reason="" if ok else "cannot reach ...")])


def test_the_node_most_peers_cannot_reach_is_drained_not_the_ones_that_tried(ctl):
    jid = running_gang(ctl, 4)
    health.prolog_report(ctl, "node1", tcp_report(jid, ["node4"]))
    health.prolog_report(ctl, "node2", tcp_report(jid, ["node4"]))
    health.prolog_report(ctl, "node3", tcp_report(jid))
    assert jid in ctl.prologs                       # waits for every answer before blaming
    health.prolog_report(ctl, "node4", tcp_report(jid, ["node1", "node2", "node3"]))
    assert ctl.store.job(jid).state == slurm.PENDING
    assert (node(ctl, "node4").drain, node(ctl, "node4").reason) == \
        (True, "tcp: unreachable from node[1-2]")
    assert [n for n in ("node1", "node2", "node3") if node(ctl, n).drain] == []


def test_one_peer_missing_one_link_in_a_big_gang_blames_nobody(ctl):
    jid = running_gang(ctl, 4)
    for n, miss in (("node1", ["node4"]), ("node2", []), ("node3", []), ("node4", [])):
        health.prolog_report(ctl, n, tcp_report(jid, miss))
    assert ctl.store.job(jid).state == slurm.RUNNING and jid not in ctl.prologs


def test_a_person_resuming_a_flapping_node_starts_the_count_afresh(ctl):
    for _ in range(3):
        health.record(ctl, "node1", "periodic", [BAD])
        ctl.clock.now += 1
        health.record(ctl, "node1", "periodic", [res("disk")])
        ctl.clock.now += 1
    assert node(ctl).reason.startswith("flapping: ")
    nodes.update_node(ctl, api_pb2.UpdateNodeRequest(names=["node1"], state="RESUME", requester="ops"))
    ctl.clock.now += 1
    health.record(ctl, "node1", "periodic", [BAD])
    ctl.clock.now += 1
    health.record(ctl, "node1", "periodic", [res("disk")])
    assert not node(ctl).drain
    assert [(e.event, e.by) for e in ctl.store.node_events("node1", limit=3)] == \
        [("resume", ""), ("drain", ""), ("resume", "ops")]
