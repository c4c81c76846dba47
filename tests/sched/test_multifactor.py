"""priority/multifactor: Slurm 22.05's weighted factors, and the queue they give.

Worked examples follow priority_multifactor.c's arithmetic (factors in
[0, 1], weighted, summed as doubles, less nice, truncated, at least 1);
properties: a higher nice never raises a job's priority, an older job is never
behind an otherwise equal younger one, the vectorised pass gives what the
one-job function gives, and priority/basic's order is the stored priority's.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import DEFAULT_PROFILE
from lingjund.sched.plugins.multifactor import (Cluster, MultifactorPriority, Weights,
                                                job_priority, job_size_factor)
from lingjund.sched.plugins.priority import BasicPriority
from lingjund.sched.snapshot import JobRequest, Snapshot
from tests.sched.builders import busy, job, node, partition

DAY = 86400.0
NOW = 1_000_000_000.0
W = Weights(age=1000, fairshare=1000, job_size=1000, partition=1000, qos=1000,
            max_age_s=7 * 86400)
# 4 nodes of 4 CPUs; partition debug has PriorityJobFactor 1, gpu 2 (the highest)
SNAP = Snapshot(nodes=tuple(node(f"node{i}") for i in range(1, 5)),
                partitions=(partition("debug", "node[1-4]", priority_job_factor=1),
                            partition("gpu", "node[1-4]", priority_job_factor=2)),
                pending=())
CLUSTER = Cluster.of(SNAP)
PARTS = {p.name: p for p in SNAP.partitions}


def prio(j: JobRequest, w: Weights = W, now: float = NOW) -> int:
    return job_priority(j, PARTS.get(j.partition), CLUSTER, w, now)


def test_the_worked_example_of_the_module():
    # age 3.5 of 7 days: 500; fair share 0.5: 500; 1 node of 4 and 1 CPU of 16:
    # (0.25 + 0.0625) / 2 * 1000 = 156.25; partition 1 of 2: 500; no QOS
    j = job(1, begin_time=NOW - 3.5 * DAY, fairshare=0.5)
    assert CLUSTER == Cluster(nodes=4, cpus=16, max_partition_factor=2)
    assert prio(j) == 1656
    assert prio(replace(j, nice=100)) == 1556


def test_each_factor_alone():
    only = Weights(max_age_s=7 * 86400)
    j = job(1, nodes=2, cpus=2, begin_time=NOW - 7 * DAY, fairshare=1.0, qos_factor=0.25,
            assoc_factor=0.5, part="gpu")
    assert prio(j, only) == 1                      # every weight 0: the floor of 1
    assert prio(j, replace(only, age=1000)) == 1000   # max age reached
    assert prio(replace(j, begin_time=NOW - 8 * DAY), replace(only, age=1000)) == 1000
    assert prio(j, replace(only, fairshare=5000)) == 5000
    assert prio(j, replace(only, qos=1000)) == 250
    assert prio(j, replace(only, assoc=1000)) == 500
    assert prio(j, replace(only, partition=1000)) == 1000        # gpu holds the highest factor
    # 2 nodes of 4, 2 tasks x 2 CPUs = 4 of 16 CPUs: (0.5 + 0.25) / 2
    assert prio(j, replace(only, job_size=1000)) == 375
    # favouring small jobs: ((4-2)/4 + (16-4)/16) / 2
    assert prio(j, replace(only, job_size=1000, favor_small=True)) == 625
    assert prio(replace(j, site_factor=42), only) == 42


def test_nice_lowers_and_a_negative_nice_raises():
    j = job(1, begin_time=NOW - DAY, fairshare=1.0)
    base = prio(j)
    assert prio(replace(j, nice=1000)) == base - 1000
    assert prio(replace(j, nice=-1000)) == base + 1000
    assert prio(replace(j, nice=10**9)) == 1       # never below 1: 0 is a held job


def test_a_job_not_yet_eligible_has_no_age():
    w = replace(W, job_size=0, partition=0, fairshare=0)
    assert prio(job(1, begin_time=0.0), w) == 1                  # a dependency, a hold
    assert prio(job(1, begin_time=NOW + 60), w) == 1              # --begin in the future
    assert prio(job(1, begin_time=NOW - 7 * DAY, held=True), w) == 1


def test_a_set_priority_is_kept():
    j = job(1, prio=77, priority_set=True, begin_time=NOW - DAY, nice=500)
    assert prio(j) == 77
    assert MultifactorPriority(W).priorities([j], NOW, SNAP).tolist() == [77]


def test_job_size_counts_tasks_and_cpus_per_task():
    w = Weights(job_size=1000)
    assert job_size_factor(job(1, num_tasks=8), CLUSTER, w) == (1 / 4 + 8 / 16) / 2
    assert job_size_factor(job(1, nodes=2, ntasks_per_node=4, cpus=2), CLUSTER, w) == 0.75
    assert job_size_factor(job(1), CLUSTER, Weights()) == 0.0      # weight 0: not computed


def test_the_queue_is_highest_priority_first_then_submission_then_id():
    w = replace(W, job_size=0)
    sort = MultifactorPriority(w)
    jobs = [job(3, submit=5, begin_time=NOW - DAY, nice=0),
            job(1, submit=5, begin_time=NOW - DAY, nice=0),
            job(2, submit=1, begin_time=NOW - DAY, nice=10),
            job(4, submit=9, begin_time=NOW - 3 * DAY)]
    queue, moved = sort.rank(jobs, NOW, SNAP)
    assert [j.job_id for j in queue] == [4, 1, 3, 2]
    # the priorities that differ from the ones the jobs hold (prio=100 each)
    assert moved == {j.job_id: prio(j, w) for j in jobs}


def test_the_pass_walks_the_multifactor_queue_and_backfill_keeps_it():
    # one free CPU: the job submitted later but with a lower nice starts
    snap = Snapshot(nodes=(node("node1", cpus=1), busy("node2", cpus=1)),
                    partitions=(partition("debug", "node[1-2]"),),
                    pending=(job(1, begin_time=NOW - 60, nice=1000),
                             job(2, begin_time=NOW - 30)))
    profile = replace(DEFAULT_PROFILE, queue_sort=MultifactorPriority(W))
    plan = schedule(snap, NOW, profile)
    assert [s.job_id for s in plan.starts] == [2]
    assert plan.reasons == {1: "Resources"}
    basic = schedule(snap, NOW)                       # priority/basic: stored 100 each, FIFO
    assert [s.job_id for s in basic.starts] == [1]


def test_backfill_reserves_for_the_job_multifactor_puts_first():
    # node[1-2] busy until +600. Two equal 2-node gangs: the one submitted first has
    # nice 1000, so the later one is first in the queue and gets the reservation when
    # node[1-2] come free; the niced one's can only follow it. A 1-node job starts at
    # once on node3, which the reservation does not need.
    from lingjund.sched.backfill import Backfill
    from lingjund.sched.snapshot import RunningJob
    from tests.sched.builders import cluster
    nodes = [busy("node1", 2), busy("node2", 2), node("node3", 2)]
    running = (RunningJob(job_id=7, nodes=("node1", "node2"), end_time=NOW + 600,
                          cpus_per_node=(2, 2), mem_per_node_mb=(0, 0)),)
    niced = job(10, nodes=2, cpus=2, time_limit_min=10, begin_time=NOW - 60, nice=1000)
    later = job(11, nodes=2, cpus=2, time_limit_min=10, begin_time=NOW - 30)
    small = job(12, cpus=2, time_limit_min=60, begin_time=NOW - 10)
    snap = replace(cluster(nodes, [niced, later, small]), running=running)
    profile = replace(DEFAULT_PROFILE, queue_sort=MultifactorPriority(W), backfill=Backfill())
    plan = schedule(snap, NOW, profile)
    # priority/basic (stored priority 100 each): FIFO, the niced job reserves first
    basic = schedule(snap, NOW, replace(DEFAULT_PROFILE, backfill=Backfill()))
    free_at = basic.expected[10][0]
    assert NOW + 600 <= free_at < NOW + 660 < basic.expected[11][0]
    # multifactor: the later job first, the niced one after it
    assert plan.expected[11] == (free_at, ("node1", "node2"))
    assert plan.expected[10][0] == basic.expected[11][0]
    assert [s.job_id for s in plan.starts] == [12] == [s.job_id for s in basic.starts]


jobs_ = st.builds(
    lambda i, age, nice, nodes, cpus, fs, part: job(
        i, nodes=nodes, cpus=cpus, begin_time=NOW - age if age >= 0 else 0.0, nice=nice,
        fairshare=fs, part=part, submit=NOW - max(age, 0) - 1),
    st.integers(1, 10**6), st.floats(-1, 30 * DAY), st.integers(-10**6, 10**6),
    st.integers(1, 4), st.integers(1, 4), st.floats(0, 1), st.sampled_from(["debug", "gpu"]))
weights_ = st.builds(Weights, age=st.integers(0, 100_000), assoc=st.integers(0, 100_000),
                     fairshare=st.integers(0, 100_000), job_size=st.integers(0, 100_000),
                     partition=st.integers(0, 100_000), qos=st.integers(0, 100_000),
                     max_age_s=st.integers(60, 30 * 86400), favor_small=st.booleans())


@settings(max_examples=200, deadline=None)
@given(j=jobs_, w=weights_, more=st.integers(1, 10**6))
def test_a_higher_nice_never_raises_priority(j, w, more):
    assert prio(replace(j, nice=j.nice + more), w) <= prio(j, w)


@settings(max_examples=200, deadline=None)
@given(j=jobs_, w=weights_, older=st.floats(0, 30 * DAY))
def test_an_older_job_is_never_lower(j, w, older):
    if j.begin_time <= 0:
        j = replace(j, begin_time=NOW - 1)
    assert prio(replace(j, begin_time=j.begin_time - older), w) >= prio(j, w)


@settings(max_examples=100, deadline=None)
@given(js=st.lists(jobs_, min_size=1, max_size=30, unique_by=lambda j: j.job_id), w=weights_,
       later=st.floats(0, 10 * DAY))
def test_the_vectorised_pass_equals_the_one_job_function(js, w, later):
    sort = MultifactorPriority(w)
    # the second pass reuses what the first kept; the third has some jobs replaced
    changed = [replace(j, nice=j.nice + 7) if k % 5 == 0 else j for k, j in enumerate(js)]
    for now, js in ((NOW, js), (NOW + later, js), (NOW + later, changed)):
        got = sort.priorities(js, now, SNAP).tolist()
        assert got == [prio(j, w, now) for j in js]
        queue = sort.order(js, now, SNAP)
        keys = [(-prio(j, w, now), j.submit_time, j.job_id) for j in queue]
        assert keys == sorted(keys)


@settings(max_examples=100, deadline=None)
@given(js=st.lists(jobs_, min_size=1, max_size=30, unique_by=lambda j: j.job_id),
       prios=st.lists(st.integers(1, 2**32 - 1), min_size=30, max_size=30))
def test_basic_orders_by_the_stored_priority_whatever_the_factors(js, prios):
    js = [replace(j, priority=p) for j, p in zip(js, prios)]
    queue = BasicPriority().order(js, NOW, SNAP)
    assert [j.job_id for j in queue] == [
        j.job_id for j in sorted(js, key=lambda j: (-j.priority, j.submit_time, j.job_id))]
