"""Which GPUs a start gets: device indices per node, not only a count.

A 4-GPU node: two 2-GPU jobs get (0, 1) and (2, 3), never the same ones; a
third waits for Resources; indices a running job holds are never given out,
and those a finished job held are given out again, lowest first.
"""
from __future__ import annotations

from lingjun import slurm
from lingjund.sched.cycle import schedule
from lingjund.sched.estimate import estimate_start
from lingjund.sched.snapshot import RunningJob, Snapshot
from tests.sched.builders import cluster, job, node

NOW = 1_000_000.0


def gpu_ids(plan) -> dict[int, tuple[tuple[int, ...], ...]]:
    return {s.job_id: s.gpu_ids_per_node for s in plan.starts}


def test_two_jobs_on_one_node_get_disjoint_gpus_and_a_third_waits():
    plan = schedule(cluster([node("node1", cpus=8, gpus=4)],
                            [job(1, gpus=2), job(2, gpus=2), job(3, gpus=2)]), NOW)
    assert gpu_ids(plan) == {1: ((0, 1),), 2: ((2, 3),)}
    assert plan.reasons[3] == slurm.REASON_RESOURCES


def test_held_indices_are_skipped_lowest_free_first():
    # a running job holds GPUs 0 and 2: the free ones are 1 and 3
    n = node("node1", cpus=8, gpus=4, alloc_cpus=1, alloc_gpus=2, alloc_gpu_ids=(0, 2))
    plan = schedule(cluster([n], [job(1, gpus=1), job(2, gpus=1)]), NOW)
    assert gpu_ids(plan) == {1: ((1,),), 2: ((3,),)}


def test_indices_a_finished_job_held_are_given_again():
    # job 1 held (0, 1) and ended: the snapshot no longer counts them held
    first = schedule(cluster([node("node1", cpus=8, gpus=4)], [job(1, gpus=2), job(2, gpus=2)]),
                     NOW)
    assert gpu_ids(first) == {1: ((0, 1),), 2: ((2, 3),)}
    still = node("node1", cpus=8, gpus=4, alloc_cpus=1, alloc_gpus=2, alloc_gpu_ids=(2, 3))
    again = schedule(cluster([still], [job(3, gpus=1)]), NOW)
    assert gpu_ids(again) == {3: ((0,),)}


def test_every_node_of_a_gang_gets_its_own_indices():
    nodes = [node("node1", cpus=8, gpus=4, alloc_cpus=1, alloc_gpus=1, alloc_gpu_ids=(0,)),
             node("node2", cpus=8, gpus=4)]
    plan = schedule(cluster(nodes, [job(1, nodes=2, gpus=2)]), NOW)
    assert plan.starts[0].nodes == ("node1", "node2")
    assert gpu_ids(plan) == {1: ((1, 2), (0, 1))}


def test_an_exclusive_job_gets_every_gpu():
    plan = schedule(cluster([node("node1", cpus=8, gpus=4)], [job(1, gpus=1, exclusive=True)]),
                    NOW)
    assert gpu_ids(plan) == {1: ((0, 1, 2, 3),)}


def test_a_job_without_gpus_names_none():
    plan = schedule(cluster([node("node1", cpus=8, gpus=4)], [job(1)]), NOW)
    assert gpu_ids(plan) == {1: ((),)}


def test_held_count_without_indices_is_never_given_twice():
    # a job that started before indices were kept holds 2 of 4 by count only:
    # only two remain, whichever they are
    n = node("node1", cpus=8, gpus=4, alloc_cpus=1, alloc_gpus=2)
    plan = schedule(cluster([n], [job(1, gpus=2), job(2, gpus=1)]), NOW)
    assert len(plan.starts) == 1 and len(plan.starts[0].gpu_ids_per_node[0]) == 2
    assert plan.reasons[2] == slurm.REASON_RESOURCES


def test_an_estimate_frees_the_indices_the_ending_job_holds():
    n = node("node1", cpus=8, gpus=4, alloc_cpus=2, alloc_gpus=4, alloc_gpu_ids=(0, 1, 2, 3))
    snap = cluster([n], [job(9, gpus=2)])
    running = (RunningJob(job_id=1, nodes=("node1",), end_time=NOW + 60, cpus_per_node=(1,),
                          gpus_per_node=(2,), gpu_ids_per_node=((1, 3),)),
               RunningJob(job_id=2, nodes=("node1",), end_time=NOW + 600, cpus_per_node=(1,),
                          gpus_per_node=(2,), gpu_ids_per_node=((0, 2),)))
    snap = Snapshot(nodes=snap.nodes, partitions=snap.partitions, pending=snap.pending,
                    running=running)
    when, start = estimate_start(snap, snap.pending[0], NOW)
    assert when == NOW + 60 and start.gpu_ids_per_node == ((1, 3),)


def test_cpus_and_memory_follow_from_gpus():
    # --gres=gpu:2 --cpus-per-gpu=3 --mem-per-gpu=1000: 6 CPUs and 2,000 MB on the node
    plan = schedule(cluster([node("node1", cpus=8, mem=16000, gpus=4)],
                            [job(1, gpus=2, cpus_per_gpu=3, mem_per_gpu_mb=1000)]), NOW)
    (start,) = plan.starts
    assert (start.cpus_per_node, start.mem_per_node_mb, start.gpu_ids_per_node) == (
        (6,), (2000,), ((0, 1),))


def test_a_second_job_waits_for_the_cpus_its_gpus_bring():
    # 8 CPUs: a first 2-GPU job at 3 CPUs per GPU leaves 2, too few for a second
    plan = schedule(cluster([node("node1", cpus=8, gpus=4)],
                            [job(1, gpus=2, cpus_per_gpu=3), job(2, gpus=2, cpus_per_gpu=3)]), NOW)
    assert [s.job_id for s in plan.starts] == [1]
    assert plan.reasons[2] == slurm.REASON_RESOURCES
