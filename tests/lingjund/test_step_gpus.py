"""Which of an allocation's GPUs a step holds, and which of the step's each task sees."""
from __future__ import annotations

import pytest

from lingjun.v1 import api_pb2
from lingjund.service import errors, jobenv
from lingjund.service.steps import (StepRun, choose_step_gpus, cpus_asked, gpus_asked,
                                    held_gpus)
from lingjund.store.store import JobRecord

# A job holding GPUs 0-3 of node1 and GPUs 2-3 of node2.
JOB = JobRecord(job_id=7, name="j", user="u", uid=0, partition="debug", state="RUNNING",
                reason="None", priority=1, submit_time=0, time_limit_min=10, spec=api_pb2.JobSpec(),
                nodes=("node1", "node2"), cpus_per_node=(8, 8), tasks_per_node=(1, 1),
                gpus_per_node=(4, 2), gpu_ids=((0, 1, 2, 3), (2, 3)))
BOTH = ("node1", "node2")


def step(**kw) -> api_pb2.RunStepRequest:
    return api_pb2.RunStepRequest(job_id=7, argv=["true"], **kw)


@pytest.mark.parametrize("req,nodes,tasks,want", [
    (step(), BOTH, [1, 1], {"node1": 4, "node2": 2}),
    (step(gpus_given=True), BOTH, [1, 1], {"node1": 0, "node2": 0}),
    (step(gpus_given=True, gpus_per_node=2), BOTH, [1, 1], {"node1": 2, "node2": 2}),
    (step(gpus_given=True, gpus=3), BOTH, [1, 1], {"node1": 2, "node2": 1}),
    (step(gpus_given=True, gpus_per_task=1), ("node1",), [4], {"node1": 4}),
    (step(gpus_given=True, gpus_per_task=1), BOTH, [2, 2], {"node1": 2, "node2": 2}),
], ids=["no GPU option: all of the job's on each node", "--gres=none: none",
        "--gres=gpu:2 on each node", "-G 3 spread over two nodes",
        "--gpus-per-task=1 -n4 on one node", "--gpus-per-task=1, two tasks on each node"])
def test_gpus_a_step_asks(req, nodes, tasks, want):
    assert gpus_asked(JOB, req, nodes, tasks) == want


@pytest.mark.parametrize("req,nodes,tasks", [
    (step(gpus_given=True, gpus=5), ("node1",), [1]),
    (step(gpus_given=True, gpus_per_node=3), BOTH, [1, 1]),
    (step(gpus_given=True, gpus_per_task=1), ("node1",), [5]),
], ids=["more GPUs than the job has", "more than the job has on one of the nodes",
        "more tasks x GPUs per task than the job has"])
def test_asking_more_gpus_than_the_allocation_has_is_refused_in_slurms_words(req, nodes, tasks):
    with pytest.raises(errors.InvalidGres, match=r"^Invalid generic resource \(gres\) specification$"):
        gpus_asked(JOB, req, nodes, tasks)


def test_two_one_gpu_steps_get_different_gpus_and_a_third_whole_node_step_waits():
    first = choose_step_gpus(JOB, {"node1": 1}, {})
    assert first == {"node1": (0,)}
    runs = [StepRun(7, 0, ("node1",), {}, gpus=first)]
    second = choose_step_gpus(JOB, {"node1": 1}, held_gpus(runs, 7))
    assert second == {"node1": (1,)}
    runs.append(StepRun(7, 1, ("node1",), {}, gpus=second))
    assert held_gpus(runs, 7) == {"node1": {0, 1}}
    assert choose_step_gpus(JOB, {"node1": 4}, held_gpus(runs, 7)) is None   # waits
    assert choose_step_gpus(JOB, {"node1": 2}, held_gpus(runs, 7)) == {"node1": (2, 3)}
    # --overlap holds none and takes the lowest, held or not
    assert choose_step_gpus(JOB, {"node1": 4}, held_gpus(runs, 7), overlap=True) == {
        "node1": (0, 1, 2, 3)}


def test_other_jobs_steps_hold_nothing_of_this_job():
    runs = [StepRun(8, 0, ("node2",), {}, gpus={"node2": (2, 3)})]
    assert held_gpus(runs, 7) == {}
    assert choose_step_gpus(JOB, {"node2": 2}, held_gpus(runs, 7)) == {"node2": (2, 3)}


def test_cpus_follow_from_gpus_with_cpus_per_gpu():
    req = step(exact=True, gpus_given=True, gpus_per_node=2, cpus_per_gpu=3)
    assert cpus_asked(JOB, req, ("node1",), [1], {"node1": 2}) == {"node1": 6}


@pytest.mark.parametrize("ids,ntasks,gpt,bind,want", [
    ((0, 1, 2, 3), 4, 1, "", [(0,), (1,), (2,), (3,)]),
    ((0, 1, 2, 3), 2, 2, "", [(0, 1), (2, 3)]),
    ((2, 3), 4, 1, "", [(2,), (3,), (2,), (3,)]),
    ((0, 1, 2, 3), 2, 0, "", [(0, 1, 2, 3)] * 2),
    ((0, 1, 2, 3), 2, 1, "none", [(0, 1, 2, 3)] * 2),
    ((0, 1, 2, 3), 2, 0, "closest", [(0, 1, 2, 3)] * 2),
    ((0, 1, 2, 3), 4, 0, "single:2", [(0,), (0,), (1,), (1,)]),
    ((0, 1, 2, 3), 4, 0, "map_gpu:3,1", [(3,), (1,), (3,), (1,)]),
    ((0, 1, 2, 3), 3, 0, "map_gpu:2*2,0", [(2,), (2,), (0,)]),
    ((0, 1, 2, 3), 2, 0, "per_task:2", [(0, 1), (2, 3)]),
    ((), 2, 1, "", [(), ()]),
], ids=["--gpus-per-task=1: one each", "--gpus-per-task=2: two each",
        "more tasks than GPUs: round again", "no binding: every task sees all",
        "none overrides --gpus-per-task", "closest without topology: all are equally close",
        "single:2: two tasks per GPU", "map_gpu: by the node's index", "map_gpu with a repeat",
        "per_task:2", "a step without GPUs"])
def test_which_gpus_each_task_sees(ids, ntasks, gpt, bind, want):
    assert jobenv.task_gpus(ids, ntasks, gpt, bind) == want


def test_a_map_naming_a_gpu_the_step_does_not_hold_is_refused():
    with pytest.raises(ValueError):
        jobenv.task_gpus((2, 3), 2, 0, "map_gpu:0,1")
    with pytest.raises(errors.InvalidRequest, match="Invalid --gpu-bind argument: single:0"):
        jobenv.check_gpu_bind("single:0")


def test_a_step_sees_its_gpus_and_the_jobs_each_task_its_own():
    per_node = jobenv.step_env(JOB, "c", "ctl:1", step_id=3, step_nodes=("node1",),
                               tasks_per_node=[2], base_env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"},
                               step_gpus={"node1": (1, 2)})
    env = per_node["node1"]
    assert (env["SLURM_JOB_GPUS"], env["SLURM_STEP_GPUS"], env["CUDA_VISIBLE_DEVICES"],
            env["GPU_DEVICE_ORDINAL"], env["SLURM_GPUS_ON_NODE"]) == ("0,1,2,3", "1,2", "1,2", "1,2", "2")
    task = dict(env)
    task.update(jobenv.task_gpu_env((2,)))
    assert (task["CUDA_VISIBLE_DEVICES"], task["GPU_DEVICE_ORDINAL"], task["SLURM_STEP_GPUS"]) == (
        "2", "2", "1,2")
    none = jobenv.step_env(JOB, "c", "ctl:1", step_id=4, step_nodes=("node1",), tasks_per_node=[1],
                           base_env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, step_gpus={"node1": ()})
    assert none["node1"]["CUDA_VISIBLE_DEVICES"] == ""


def test_a_restarted_controller_still_knows_which_gpus_a_running_step_holds(tmp_path):
    """The step's GPUs are written with it (running_steps); after a restart a new
    step of the job is not given a GPU the recovered step still uses."""
    from lingjund.service import steps as stepsmod
    from lingjund.store.records import RunningStepRecord
    from tests.lingjund import handclock
    conf = '[[nodes]]\nnames = "node[1-2]"\ncpus = 8\ngpus = 4\n[[partitions]]\nname = "debug"\nnodes = "ALL"\n'
    with handclock.controller(tmp_path, conf, ["node1", "node2"]) as ctl:
        with ctl.store.transaction() as st:
            st.put_running_step(RunningStepRecord(
                job_id=7, step_id=0, name="a", nodes=("node1",), rank_node={0: "node1"},
                cpus={"node1": 1}, num_tasks=1, num_cpus=1, start_time=1.0,
                gpus={"node1": (0,)}))
        ctl.steps.clear()                      # as a fresh controller has them: none
        stepsmod.recover(ctl)
        held = held_gpus(ctl.steps.values(), 7)
        assert held == {"node1": {0}}
        assert choose_step_gpus(JOB, {"node1": 1}, held) == {"node1": (1,)}
