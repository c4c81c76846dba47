"""QOS and association limits in the pure pass: the limit holds, the reason is
Slurm's, a held job blocks nobody, and starts in one pass are charged."""
from __future__ import annotations

from dataclasses import replace

import pytest

from lingjun.slurm import (REASON_ASSOC_GRP_CPU, REASON_ASSOC_GRP_GRES, REASON_ASSOC_GRP_JOBS,
                           REASON_ASSOC_MAX_JOBS, REASON_QOS_GRP_CPU, REASON_QOS_GRP_GRES,
                           REASON_QOS_GRP_NODE, REASON_QOS_MAX_CPU_PER_USER,
                           REASON_QOS_MAX_GRES_PER_USER, REASON_QOS_MAX_JOBS_PER_USER,
                           REASON_QOS_MAX_NODE_PER_USER)
from lingjund.sched import limits as L
from lingjund.sched.cycle import schedule
from tests.sched.builders import cluster, job, node, outcomes

NOW = 1_000_000.0
GPU_NODES = [node(f"node{i}", cpus=16, gpus=8) for i in range(1, 5)]


def a(job_id, user="alice", account="phys", qos="normal", **kw):
    return job(job_id, user=user, account=account, qos=qos, **kw)


def run(jobs, limits, nodes=GPU_NODES):
    return outcomes(schedule(replace(cluster(nodes, jobs), limits=limits), NOW))


PHYS = {("phys", "alice"): (("assoc", "phys", "alice"), ("account", "phys"), ("account", "root")),
        ("phys", "bob"): (("assoc", "phys", "bob"), ("account", "phys"), ("account", "root")),
        ("chem", "carol"): (("assoc", "chem", "carol"), ("account", "chem"), ("account", "root"))}


def test_two_4_gpu_jobs_under_grp_gpu_6_only_one_starts_and_the_next_account_still_does():
    lim = L.Limits(qos_grp={"normal": L.qos_grp(gpu=6)}, chain=PHYS)
    out = run([a(1, gpus=4, prio=300), a(2, gpus=4, prio=200, user="bob"),
               a(3, gpus=2, prio=100, user="carol", account="chem")], lim)
    assert out == {1: "node1", 2: REASON_QOS_GRP_GRES, 3: "node1"}


def test_running_usage_counts_and_a_held_job_does_not_block_lower_jobs_of_others():
    lim = L.Limits(qos_grp={"normal": L.qos_grp(gpu=8)}, chain=PHYS,
                   usage={("qos", "normal"): (8, 1, 8, 1)})
    out = run([a(1, gpus=1, prio=300), a(2, gpus=1, prio=100, qos="high")], lim)
    assert out == {1: REASON_QOS_GRP_GRES, 2: "node1"}


@pytest.mark.parametrize("limits,jobs,want", [
    pytest.param(L.Limits(qos_grp={"normal": L.qos_grp(cpu=4)}),
                 [a(1, cpus=3), a(2, cpus=2)], REASON_QOS_GRP_CPU, id="QOS GrpTRES cpu"),
    pytest.param(L.Limits(qos_grp={"normal": L.qos_grp(node=2)}),
                 [a(1, nodes=2), a(2)], REASON_QOS_GRP_NODE, id="QOS GrpTRES node"),
    pytest.param(L.Limits(qos_user={"normal": L.qos_per_user(gpu=4)}),
                 [a(1, gpus=4), a(2, gpus=1)], REASON_QOS_MAX_GRES_PER_USER, id="MaxTRESPerUser gpu"),
    pytest.param(L.Limits(qos_user={"normal": L.qos_per_user(cpu=2)}),
                 [a(1, cpus=2), a(2)], REASON_QOS_MAX_CPU_PER_USER, id="MaxTRESPerUser cpu"),
    pytest.param(L.Limits(qos_user={"normal": L.qos_per_user(node=1)}),
                 [a(1), a(2)], REASON_QOS_MAX_NODE_PER_USER, id="MaxTRESPerUser node"),
    pytest.param(L.Limits(qos_user={"normal": L.qos_per_user(jobs=1)}),
                 [a(1), a(2)], REASON_QOS_MAX_JOBS_PER_USER, id="MaxJobsPerUser"),
    pytest.param(L.Limits(assoc={("phys", "alice"): ((("assoc", "phys", "alice"), L.assoc_max_jobs(1)),)},
                          chain=PHYS),
                 [a(1), a(2)], REASON_ASSOC_MAX_JOBS, id="association MaxJobs"),
    pytest.param(L.Limits(assoc={("phys", "alice"): ((("account", "phys"), L.assoc_grp(jobs=1)),)},
                          chain=PHYS),
                 [a(1), a(2)], REASON_ASSOC_GRP_JOBS, id="account GrpJobs"),
    pytest.param(L.Limits(assoc={("phys", "alice"): ((("account", "root"), L.assoc_grp(gpu=5)),)},
                          chain=PHYS),
                 [a(1, gpus=4), a(2, gpus=4)], REASON_ASSOC_GRP_GRES, id="parent account GrpTRES gpu"),
    pytest.param(L.Limits(assoc={("phys", "alice"): ((("account", "phys"), L.assoc_grp(cpu=3)),)},
                          chain=PHYS),
                 [a(1, cpus=2), a(2, cpus=2)], REASON_ASSOC_GRP_CPU, id="account GrpTRES cpu"),
])
def test_each_limit_holds_the_second_job_with_slurms_reason(limits, jobs, want):
    out = run(jobs, limits)
    assert out[1].startswith("node") and out[2] == want


def test_an_account_limit_counts_every_user_below_it():
    grp = ((("account", "phys"), L.assoc_grp(gpu=4)),)
    lim = L.Limits(assoc={("phys", "alice"): grp, ("phys", "bob"): grp}, chain=PHYS)
    out = run([a(1, gpus=4), a(2, gpus=1, user="bob"), a(3, gpus=1, user="carol", account="chem")], lim)
    assert out == {1: "node1", 2: REASON_ASSOC_GRP_GRES, 3: "node1"}


def test_an_exclusive_job_is_counted_with_the_whole_node_it_takes():
    lim = L.Limits(qos_grp={"normal": L.qos_grp(cpu=8)})
    out = run([a(1, exclusive=True), a(2)], lim)
    assert out == {1: REASON_QOS_GRP_CPU, 2: "node1"}


def test_array_tasks_stop_at_the_limit_with_its_reason():
    lim = L.Limits(qos_user={"normal": L.qos_per_user(jobs=2)})
    plan = schedule(replace(cluster(GPU_NODES, [a(1, array_tasks=(0, 1, 2, 3))]), limits=lim), NOW)
    assert [s.array_task_id for s in plan.starts] == [0, 1]
    assert plan.reasons == {1: REASON_QOS_MAX_JOBS_PER_USER}


def test_without_limits_nothing_changes():
    assert run([a(1, gpus=8), a(2, gpus=8)], None) == {1: "node1", 2: "node2"}
