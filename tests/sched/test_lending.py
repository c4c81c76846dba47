"""Lending idle quota in the pure pass (lending.py): who borrows, where, and who gives way.

Every case: node[1-2], 16 CPUs and 4 GPUs each, one partition ``debug``;
accounts ``a`` (user ``ua``) and ``b`` (user ``ub``) with GrpTRES=gres/gpu=4
on their user associations; jobs ask 1 CPU and GPUs per node as given.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from lingjun.slurm import REASON_ASSOC_GRP_GRES, REASON_ASSOC_GRP_JOBS, REASON_RESOURCES
from lingjund.sched import limits as L
from lingjund.sched.cycle import schedule
from lingjund.sched.plugins import DEFAULT_PROFILE
from lingjund.sched.snapshot import RunningJob, Snapshot
from tests.sched.builders import job, node, partition

NOW = 1_000_000.0
USERS = {"a": "ua", "b": "ub"}


def limits(usage: dict, lend: bool = True, grp_jobs: int = L.UNLIMITED) -> L.Limits:
    checks, chains = {}, {}
    for acc, user in USERS.items():
        key = ("assoc", acc, user)
        checks[(acc, user)] = ((key, L.assoc_grp(gpu=4, jobs=grp_jobs)),)
        chains[(acc, user)] = (key,)
    return L.Limits(assoc=checks, chain=chains, usage=usage, lend=lend)


def running(job_id: int, where: str, gpus: int, acc: str, borrowed: bool = False,
            start: float = NOW - 600) -> RunningJob:
    return RunningJob(job_id=job_id, nodes=(where,), cpus_per_node=(1,), mem_per_node_mb=(0,),
                      gpus_per_node=(gpus,), partition="debug", start_time=start,
                      account=acc, qos="normal", borrowed=borrowed)


def pend(job_id: int, acc: str, gpus: int = 1, **kw):
    return job(job_id, gpus=gpus, account=acc, user=USERS[acc], qos="normal", **kw)


def snap(run: list[RunningJob], pending, lend: bool = True, grp_jobs: int = L.UNLIMITED,
         parts=None) -> Snapshot:
    usage: dict = {}
    for r in run:
        L.add_usage(usage, (("assoc", r.account, USERS[r.account]),),
                    (1, 1, sum(r.gpus_per_node)), r.borrowed)
    nodes = []
    for name in ("node1", "node2"):
        here = [r for r in run if name in r.nodes]
        nodes.append(node(name, cpus=16, gpus=4, alloc_cpus=len(here),
                          alloc_gpus=sum(r.gpus_per_node[0] for r in here), jobs=len(here),
                          partitions=("debug",)))
    parts = parts or (partition("debug", ("node1", "node2"), default=True),)
    return Snapshot(nodes=tuple(nodes), partitions=parts, pending=tuple(pending),
                    running=tuple(run), limits=limits({k: tuple(v) for k, v in usage.items()},
                                                      lend, grp_jobs))


def starts(plan) -> dict[int, bool]:
    """job id -> whether it starts borrowed."""
    return {s.job_id: s.borrowed for s in plan.starts}


def test_an_account_alone_fills_the_idle_quota_as_borrowed():
    plan = schedule(snap([], [pend(i, "a") for i in range(1, 11)]), NOW)
    assert starts(plan) == {**{i: False for i in range(1, 5)}, **{i: True for i in range(5, 9)}}
    assert plan.reasons == {9: REASON_ASSOC_GRP_GRES, 10: REASON_ASSOC_GRP_GRES}


def test_without_lending_the_quota_holds():
    plan = schedule(snap([], [pend(i, "a") for i in range(1, 7)], lend=False), NOW)
    assert starts(plan) == {i: False for i in range(1, 5)}
    assert plan.reasons == {5: REASON_ASSOC_GRP_GRES, 6: REASON_ASSOC_GRP_GRES}


def test_borrowers_go_after_every_job_that_may_run_as_its_own():
    """a's borrower is first in the queue, b's job within quota behind it: b's
    job gets the GPUs, the borrower what is left (nothing)."""
    run = [running(1, "node1", 4, "a")]
    plan = schedule(snap(run, [pend(10, "a", gpus=4, prio=1000), pend(11, "b", gpus=4)]), NOW)
    assert starts(plan) == {11: False}
    assert plan.reasons == {10: REASON_ASSOC_GRP_GRES}


def test_a_job_held_by_a_limit_that_is_not_lendable_does_not_borrow():
    """GrpJobs=4: the fifth job of a waits AssocGrpJobsLimit, borrowing or not."""
    plan = schedule(snap([], [pend(i, "a") for i in range(1, 7)], grp_jobs=4), NOW)
    assert starts(plan) == {i: False for i in range(1, 5)}
    assert set(plan.reasons.values()) == {REASON_ASSOC_GRP_JOBS}


def test_borrowed_jobs_do_not_count_against_their_accounts_quota():
    run = [running(1, "node1", 3, "a"), running(2, "node2", 4, "a", borrowed=True)]
    plan = schedule(snap(run, [pend(10, "a")]), NOW)
    assert starts(plan) == {10: False}, plan.reasons


def test_a_borrower_does_not_take_the_nodes_of_a_blocked_partition():
    """b's 2-node job (2 GPUs each, within quota) does not fit and blocks debug
    (no backfill here): a's borrower behind it may not take node2's free GPUs."""
    run = [running(1, "node1", 4, "a")]
    plan = schedule(snap(run, [pend(10, "b", gpus=2, nodes=2), pend(11, "a", gpus=1)]), NOW)
    assert starts(plan) == {}
    assert plan.reasons == {10: REASON_RESOURCES, 11: REASON_ASSOC_GRP_GRES}


CASES = [
    pytest.param([running(1, "node1", 4, "a"), running(2, "node2", 4, "a", borrowed=True)],
                 pend(10, "b", gpus=2), {10: (2,)},
                 id="a job within its quota preempts a borrowed job of another account"),
    pytest.param([running(1, "node1", 4, "a"), running(2, "node2", 2, "a", borrowed=True),
                  running(3, "node2", 2, "a", borrowed=True, start=NOW - 300)],
                 pend(10, "b", gpus=2), {10: (3,)},
                 id="the fewest borrowed jobs that make room, the youngest of equals"),
    pytest.param([running(1, "node1", 4, "a"), running(2, "node2", 4, "b")],
                 pend(10, "b", gpus=1), {},
                 id="jobs that run on their own quota are never taken"),
    pytest.param([running(1, "node1", 2, "b"), running(2, "node1", 2, "b", borrowed=True),
                  running(3, "node2", 4, "a")],
                 pend(10, "b", gpus=2), {},
                 id="an account's own borrowed jobs do not give way to it"),
    pytest.param([running(1, "node1", 4, "a"), running(2, "node2", 4, "a", borrowed=True,
                                                        start=NOW - 1)],
                 pend(10, "b", gpus=2), {},
                 id="a borrowed job younger than PreemptExemptTime stays"),
]


@pytest.mark.parametrize("run,pending,want", CASES)
def test_borrowed_jobs_give_way(run, pending, want):
    s = replace(snap(run, [pending]), preempt_exempt_s=60)
    plan = schedule(s, NOW, DEFAULT_PROFILE)
    got = {}
    for p in plan.preemptions:
        got.setdefault(p.by, []).append(p.victim)
    assert {k: tuple(sorted(v)) for k, v in got.items()} == want
    assert pending.job_id not in starts(plan)


def test_an_owner_waits_for_its_borrowed_victim_rather_than_take_another():
    run = [running(1, "node1", 4, "a"),
           replace(running(2, "node2", 2, "a", borrowed=True), stopping=True),
           running(3, "node2", 2, "a", borrowed=True)]
    plan = schedule(snap(run, [pend(10, "b", gpus=2)]), NOW)
    assert plan.preemptions == ()
    assert plan.reasons[10] == REASON_RESOURCES


def test_borrowed_jobs_still_give_way_after_lending_is_turned_off():
    run = [running(1, "node1", 4, "a"), running(2, "node2", 4, "a", borrowed=True)]
    plan = schedule(snap(run, [pend(10, "b", gpus=2), pend(11, "a")], lend=False), NOW)
    assert [(p.victim, p.by) for p in plan.preemptions] == [(2, 10)]
    assert plan.reasons[11] == REASON_ASSOC_GRP_GRES and not plan.starts
