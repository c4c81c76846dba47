"""Priority over the real SlurmApi: nice, Priority=, scontrol top, and the
sprio RPC, with who may do what (the rules a root-run e2e cluster cannot show).
Refusals change nothing."""
from __future__ import annotations

import grpc
import pytest

from lingjun.v1 import api_pb2
from tests.lingjund.test_api import api, spec  # noqa: F401 - the fixture

ALICE, BOB = 1000, 1001
Update = api_pb2.UpdateJobRequest


def submit(stub, uid: int = ALICE, **kw) -> int:
    kw.setdefault("begin_time", 4_000_000_000)      # pending for good, eligible later
    s = spec(user=f"u{uid}", uid=uid, time_limit_min=10, **kw)
    return stub.SubmitJob(api_pb2.SubmitJobRequest(spec=s)).job_id


def refused(call, words: str, store) -> None:
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.details() == words
    assert store.dump() == before


def test_nice_at_submission_and_update_move_the_priority(api):  # noqa: F811
    stub, store = api
    plain, nice = submit(stub), submit(stub, nice=1000)
    assert store.job(plain).priority - store.job(nice).priority == 1000
    stub.UpdateJob(Update(job_id=plain, requester_uid=ALICE, nice=1500))
    assert store.job(nice).priority - store.job(plain).priority == 500
    refused(lambda: stub.UpdateJob(Update(job_id=plain, requester_uid=ALICE, nice=-1)),
            "Access/permission denied", store)
    stub.UpdateJob(Update(job_id=plain, requester_uid=0, nice=-1))    # an operator may
    assert store.job(plain).spec.nice == -1


def test_a_user_may_not_submit_a_negative_nice(api):  # noqa: F811
    """The anchor's Slurm 22.05, sbatch --nice=-5 by a user: "Batch job submission
    failed: Invalid --nice value"."""
    stub, store = api
    refused(lambda: submit(stub, nice=-5), "Invalid --nice value", store)
    assert store.job(submit(stub, uid=0, nice=-5)).spec.nice == -5     # an operator may


def test_priority_set_by_an_operator_stays_and_resets_nice(api):  # noqa: F811
    stub, store = api
    jid = submit(stub, nice=50)
    stub.UpdateJob(Update(job_id=jid, requester_uid=0, priority=123))
    job = store.job(jid)
    assert (job.priority, job.priority_set, job.spec.nice) == (123, True, 0)
    stub.UpdateJob(Update(job_id=jid, requester_uid=0, nice=10))       # nice: no move
    assert store.job(jid).priority == 123
    info = stub.GetJobs(api_pb2.GetJobsRequest(job_ids=[jid])).jobs[0]
    assert (info.priority, info.nice) == (123, 10)


def test_an_owner_may_neither_raise_nor_durably_lower_the_priority(api):  # noqa: F811
    stub, store = api
    jid = submit(stub)
    prio = store.job(jid).priority
    refused(lambda: stub.UpdateJob(Update(job_id=jid, requester_uid=ALICE, priority=prio + 1)),
            "Access/permission denied", store)
    refused(lambda: stub.UpdateJob(Update(job_id=jid, requester_uid=ALICE, priority=prio - 1)),
            "Changes to job priority are not persistent, change nice instead", store)
    refused(lambda: stub.UpdateJob(Update(job_id=jid, requester_uid=BOB, priority=1)),
            "Access/permission denied", store)


def test_priority_zero_holds_and_release_computes_it_again(api):  # noqa: F811
    stub, store = api
    jid = submit(stub)
    prio = store.job(jid).priority
    stub.UpdateJob(Update(job_id=jid, requester_uid=0, priority=0))
    job = store.job(jid)
    assert (job.held, job.hold_admin, job.reason) == (True, True, "JobHeldAdmin")
    assert stub.GetJobs(api_pb2.GetJobsRequest(job_ids=[jid])).jobs[0].priority == 0
    refused(lambda: stub.UpdateJob(Update(job_id=jid, requester_uid=0, priority=5)),
            "Job is in held state, pending scheduler release", store)
    H = api_pb2.HoldJobsRequest
    stub.HoldJobs(H(job_ids=[jid], action=H.RELEASE, requester_uid=0))
    job = store.job(jid)
    assert (job.held, job.priority_set, job.priority) == (False, False, prio)


def prios(store, *jobs) -> list[int]:
    return [store.job(j).priority for j in jobs]


def test_top_as_slurm_22_05_does_it(api):  # noqa: F811
    """The two cases observed on the anchor's Slurm 22.05 (multifactor, fair share
    10000 + partition 1000 = 11000 for each of these jobs, less their nice)."""
    stub, store = api
    a, b, c, d = (submit(stub, uid=0, nice=n) for n in (-562, -400, -300, -187))
    assert prios(store, a, b, c, d) == [11562, 11400, 11300, 11187]
    stub.TopJobs(api_pb2.TopJobsRequest(job_ids=[d], requester_uid=0))
    # d takes the top; the 375 it gained comes evenly from the three above it
    assert prios(store, d, a, b, c) == [11562, 11437, 11275, 11175]
    # every move is made through nice: priority + nice stays 11000
    assert {store.job(j).priority + store.job(j).spec.nice for j in (a, b, c, d)} == {11000}
    stub.TopJobs(api_pb2.TopJobsRequest(job_ids=[c, b], requester_uid=0))
    # c and b take the two highest, in the order given (+387, +162); the 549 comes
    # from the two above them: 274 and 275 (the remainder from the last)
    assert prios(store, c, b, d, a) == [11562, 11437, 11288, 11162]
    assert {store.job(j).priority + store.job(j).spec.nice for j in (a, b, c, d)} == {11000}


def test_top_touches_nobody_else_and_is_for_operators(api):  # noqa: F811
    stub, store = api
    a, b, c = submit(stub), submit(stub), submit(stub)
    other = submit(stub, uid=BOB)
    below = submit(stub, nice=100)
    before = dict(zip((a, b, c, other, below), prios(store, a, b, c, other, below)))
    refused(lambda: stub.TopJobs(api_pb2.TopJobsRequest(job_ids=[c], requester_uid=ALICE)),
            "Access/permission denied", store)        # operators only by default
    stub.TopJobs(api_pb2.TopJobsRequest(job_ids=[c, b], requester_uid=0))
    after = dict(zip((a, b, c, other, below), prios(store, a, b, c, other, below)))
    assert after[c] > after[b] > after[a]             # equal before: ties cost a point
    assert sum(after[j] for j in (a, b, c)) <= sum(before[j] for j in (a, b, c))
    assert (after[other], after[below]) == (before[other], before[below])
    refused(lambda: stub.TopJobs(api_pb2.TopJobsRequest(job_ids=[a, other], requester_uid=0)),
            "Invalid job id specified", store)        # two owners at once


def test_priority_factors_list_the_eligible_pending_jobs(api):  # noqa: F811
    stub, store = api
    now_job = submit(stub, begin_time=0)
    submit(stub)                                       # begins later: not listed
    submit(stub, begin_time=0, hold=True)              # held: not listed
    r = stub.GetPriorityFactors(api_pb2.PriorityFactorsRequest())
    assert r.priority_type == "priority/multifactor"
    assert dict(r.weights) == {"age": 1000, "assoc": 0, "fairshare": 10000, "jobsize": 0,
                               "partition": 1000, "qos": 1000}
    assert [j.job_id for j in r.jobs] == [now_job]
    j = r.jobs[0]
    assert (j.fairshare, j.partition_factor, j.qos_factor, j.nice) == (1.0, 1.0, 0.0, 0)
    assert j.priority == store.job(now_job).priority
    assert stub.GetPriorityFactors(api_pb2.PriorityFactorsRequest(users=["nobody"])).jobs == []
    # a priority an operator set: listed with it, and no factors (as Slurm's sprio)
    stub.UpdateJob(Update(job_id=now_job, requester_uid=0, priority=77))
    j = stub.GetPriorityFactors(api_pb2.PriorityFactorsRequest()).jobs[0]
    assert (j.job_id, j.priority, j.fairshare, j.partition_factor, j.nice) == (now_job, 77, 0, 0, 0)
