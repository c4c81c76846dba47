"""The controller's live-state gauges over a real store: what a scrape says
as jobs come, run, pend for reasons and go quiet, and nodes drain; the
counts a scrape keeps between scrapes agree with a fresh count."""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lingjun.v1 import api_pb2
from lingjund import metrics
from lingjund.sched.snapshot import Plan, Start
from lingjund.service import jobs, scheduling
from lingjund.service.agents import Connection
from tests.lingjund import handclock

CONF = """
[[nodes]]
names = "node[1-3]"
cpus = 4
memory_mb = 2000
gpus = 2
[[partitions]]
name = "gpu"
nodes = "node[1-2]"
default = true
[[partitions]]
name = "cpu"
nodes = "node3"
"""


@pytest.fixture
def ctl(tmp_path):
    with handclock.controller(tmp_path, CONF, ["node1", "node2", "node3"], last_seen=1000.0) as c:
        for n in ("node1", "node2", "node3"):
            c.agents.attach(Connection(node=n, last_heartbeat=c.clock()))
        yield c


def submit(ctl, **kw) -> int:
    spec = api_pb2.JobSpec(name="j", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u", uid=1,
                           batch=True, min_nodes=1, **kw)
    return jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id


def start(ctl, jid: int, node: str, gpus: int = 0) -> None:
    scheduling.apply_plan(ctl, Plan(starts=(Start(
        job_id=jid, nodes=(node,), cpus_per_node=(1,), mem_per_node_mb=(0,),
        gpus_per_node=(gpus,), tasks_per_node=(1,)),)), ctl.clock())
    with ctl.store.transaction() as st:
        st.update_job(jid, launched=True)


def scrape(m: metrics.ControllerMetrics) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def get(page, name, **labels):
    want = set((k, str(v)) for k, v in labels.items())
    hits = [v for k, v in page.get(name, {}).items() if want <= set(k)]
    return hits[0] if len(hits) == 1 else (None if not hits else hits)


def test_jobs_by_state_partition_account_and_reason(ctl):
    m = metrics.ControllerMetrics(ctl)
    a = submit(ctl, account="ml", gpus_per_node=2)
    b = submit(ctl, account="ml", hold=True)
    c = submit(ctl, account="bio", partition="cpu")
    start(ctl, a, "node1", gpus=2)
    page = scrape(m)
    assert get(page, "lingjun_jobs", state="RUNNING", partition="gpu", account="ml") == 1
    assert get(page, "lingjun_jobs", state="PENDING", account="ml", reason="JobHeldUser") == 1
    assert get(page, "lingjun_jobs", state="PENDING", partition="cpu", account="bio") == 1
    assert get(page, "lingjun_account_gpus_allocated", partition="gpu", account="ml") == 2
    assert get(page, "lingjun_partition_gpus", partition="gpu", state="allocated") == 2
    assert get(page, "lingjun_partition_gpus", partition="gpu", state="idle") == 2
    assert get(page, "lingjun_partition_gpus", partition="cpu", state="idle") == 2
    assert get(page, "lingjun_nodes", partition="gpu", state="mixed") == 1
    assert get(page, "lingjun_nodes", partition="gpu", state="idle") == 1
    # the next scrape sees what changed since (the counts are kept between scrapes)
    jobs.cancel(ctl, api_pb2.CancelJobsRequest(job_ids=[c], requester_uid=0))
    start(ctl, b, "node2")
    page = scrape(m)
    assert get(page, "lingjun_jobs", state="PENDING") is None
    # (the cancelled job counts as long as squeue shows it)
    shown = 1 if c in ctl.store.live.jobs else None
    assert get(page, "lingjun_jobs", state="CANCELLED", partition="cpu") == shown
    assert get(page, "lingjun_jobs", state="RUNNING", partition="gpu", account="ml") == 2
    assert m.registry.get_sample_value("lingjun_jobs", {
        "state": "RUNNING", "partition": "gpu", "account": "ml", "reason": ""}) == 2
    assert m.live.jobs.counts == metrics.count_jobs(ctl)
    fresh = metrics.NodeScan(ctl)
    assert m.live.nodes.summarize() == fresh.summarize()
    assert {n: v for n, v in m.live.nodes.per_node.items() if any(v)} == fresh.per_node


def test_a_drained_node_is_named_with_its_reason_and_who_drained_it(ctl):
    m = metrics.ControllerMetrics(ctl)
    with ctl.store.transaction() as st:
        st.put_node("node2", drain=True, reason="gpu: 1 of 2 GPUs missing", drain_by_probe=True)
        st.put_node("node3", drain=True, reason="maintenance", reason_user="root")
    page = scrape(m)
    assert get(page, "lingjun_node_drained", node="node2") is not None
    assert get(page, "lingjun_node_drained", node="node2", by="probe",
               reason="gpu: 1 of 2 GPUs missing") == 1
    assert get(page, "lingjun_node_drained", node="node3", by="admin") == 1
    assert get(page, "lingjun_nodes", partition="gpu", state="drained") == 1
    # a drained node's GPUs are not idle: nothing can start there
    assert get(page, "lingjun_partition_gpus", partition="gpu", state="idle") == 2
    assert get(page, "lingjun_partition_gpus", partition="gpu", state="unavailable") == 2


def test_only_jobs_silent_for_a_while_get_a_last_activity_series(ctl):
    m = metrics.ControllerMetrics(ctl)
    quiet = submit(ctl)
    hangs = submit(ctl, hang_timeout_s=120)
    start(ctl, quiet, "node1")
    start(ctl, hangs, "node2")
    began = ctl.clock()
    ctl.clock.now += 30
    assert get(scrape(m), "lingjun_job_last_activity_timestamp_seconds") is None
    ctl.clock.now += 40              # 70 s: past half of the 120 s hang timeout
    page = scrape(m)
    assert get(page, "lingjun_job_last_activity_timestamp_seconds", job_id=hangs) == began
    assert get(page, "lingjun_job_hang_timeout_seconds", job_id=hangs) == 120
    assert get(page, "lingjun_job_last_activity_timestamp_seconds", job_id=quiet) is None
    ctl.activity[hangs] = ctl.clock()    # it wrote output
    ctl.clock.now += metrics.SILENT_AFTER_S
    page = scrape(m)
    assert get(page, "lingjun_job_last_activity_timestamp_seconds", job_id=quiet) == began
    assert get(page, "lingjun_job_last_activity_timestamp_seconds", job_id=hangs) == began + 70
