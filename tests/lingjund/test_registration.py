"""Agent registration at the service layer: what a registering node is told
about its jobs, and registrations that arrive together."""
from __future__ import annotations

import asyncio

import pytest

from lingjun.v1 import agent_pb2, api_pb2
from lingjund.service import jobs, nodes, scheduling
from lingjund.service.agents import Connection
from lingjund.sched.snapshot import Plan, Start
from tests.lingjund import handclock

CONF = """
[controller]
heartbeat_timeout_s = 30
[[nodes]]
names = "node[1-12]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "debug"
nodes = "ALL"
"""


@pytest.fixture
def ctl(tmp_path):
    with handclock.controller(tmp_path, CONF, [f"node{i}" for i in range(1, 13)], last_seen=1000.0) as c:
        yield c


def run_job(ctl, node: str) -> int:
    spec = api_pb2.JobSpec(name="train", script="#!/bin/sh\ntrue\n", work_dir="/w", user="u",
                           uid=1, batch=True, min_nodes=1)
    jid = jobs.submit(ctl, api_pb2.SubmitJobRequest(spec=spec)).job_id
    scheduling.apply_plan(ctl, Plan(starts=(Start(
        job_id=jid, nodes=(node,), cpus_per_node=(1,), mem_per_node_mb=(0,),
        gpus_per_node=(0,), tasks_per_node=(1,)),)), ctl.clock())
    with ctl.store.transaction() as st:
        st.update_job(jid, launched=True)
    return jid


def register(node: str, running=()) -> agent_pb2.Register:
    return agent_pb2.Register(node_name=node, running_job_ids=list(running),
                              inventory=agent_pb2.Inventory(hostname=node, cpus=2, real_memory_mb=2000))


def test_a_node_is_told_of_its_own_jobs_only(ctl):
    # node1's name is a prefix of node10's and node11's: their jobs are not node1's
    mine = run_job(ctl, "node1")
    others = [run_job(ctl, "node10"), run_job(ctl, "node11")]
    reply, follow = nodes.register(ctl, Connection("node1"), register("node1", running=[mine]))
    assert reply.accepted
    assert list(reply.expected_job_ids) == [mine]
    assert follow == []
    # and the others' jobs were not taken for lost on node1
    assert all(ctl.store.job(j).state == "RUNNING" for j in others)


def test_registrations_that_arrive_together_are_each_answered(ctl):
    ctl.clock.now = 2000.0

    async def burst():
        return await asyncio.gather(*(
            nodes.register_batched(ctl, Connection(n), register(n))
            for n in ["node3", "node4", "nodeX", "node5"]))
    replies = [r for r, _ in asyncio.run(burst())]
    assert [r.accepted for r in replies] == [True, True, False, True]
    assert "unknown node 'nodeX'" in replies[2].message
    recs = ctl.store.nodes()
    assert "nodeX" not in recs
    assert all(recs[n].last_seen == 2000.0 and recs[n].inventory.cpus == 2
               for n in ("node3", "node4", "node5"))
