"""Which steps of one allocation run side by side (Slurm 22.05's step rules)."""
from __future__ import annotations

import pytest

from lingjun.v1 import api_pb2
from lingjund.service import errors
from lingjund.service.steps import StepRun, cpus_asked, fits, held_cpus
from lingjund.store.store import JobRecord

JOB = JobRecord(job_id=7, name="j", user="u", uid=0, partition="debug", state="RUNNING",
                reason="None", priority=1, submit_time=0, time_limit_min=10, spec=api_pb2.JobSpec(),
                nodes=("node1", "node2"), cpus_per_node=(2, 2), tasks_per_node=(1, 1))


def step(**kw) -> api_pb2.RunStepRequest:
    return api_pb2.RunStepRequest(job_id=7, argv=["true"], **kw)


@pytest.mark.parametrize("req,nodes,tasks,want", [
    (step(), ("node1",), [1], {"node1": 2}),
    (step(exact=True), ("node1", "node2"), [1, 1], {"node1": 1, "node2": 1}),
    (step(exact=True, cpus_per_task=2), ("node1",), [1], {"node1": 2}),
    (step(overlap=True), ("node1",), [1], {}),
], ids=["a plain step holds all the job's CPUs on its nodes", "--exclusive holds one CPU per task",
        "-c 2 holds two CPUs per task", "--overlap holds nothing"])
def test_cpus_a_step_holds(req, nodes, tasks, want):
    assert cpus_asked(JOB, req, nodes, tasks) == want


def test_an_exact_step_larger_than_the_allocation_is_refused():
    with pytest.raises(errors.NodeConfigUnavailable, match="More processors requested than permitted"):
        cpus_asked(JOB, step(exact=True), ("node1",), [3])


@pytest.mark.parametrize("held,asked,want", [
    ({}, {"node1": 2}, True),
    ({"node1": 1}, {"node1": 1}, True),
    ({"node1": 1}, {"node1": 2}, False),
    ({"node1": 2}, {"node2": 2}, True),
    ({"node1": 2}, {}, True),
], ids=["alone on the node: fits", "two one-CPU steps share a 2-CPU node", "a whole-node step waits for a running one",
        "steps on different nodes do not meet", "an --overlap step always fits"])
def test_when_a_step_fits(held, asked, want):
    assert fits(JOB, held, asked) is want


def test_held_cpus_adds_up_the_jobs_live_steps_only():
    runs = [StepRun(7, 0, ("node1",), {}, cpus={"node1": 1}), StepRun(7, 1, ("node1",), {}, cpus={"node1": 1}),
            StepRun(8, 0, ("node1",), {}, cpus={"node1": 2})]
    assert held_cpus(runs, 7) == {"node1": 2}
