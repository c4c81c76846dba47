"""Who may change a job, over the real SlurmApi: the rules a root-run e2e
cluster cannot show. A user changes only their own jobs; raising a time
limit and undoing an admin hold are root's alone. Refusals change nothing."""
from __future__ import annotations

import grpc
import pytest

from lingjun.v1 import api_pb2
from tests.lingjund.test_api import api, spec  # noqa: F401 - the fixture

ALICE, BOB = 1000, 1001
Hold = api_pb2.HoldJobsRequest


def submit(stub, uid: int = ALICE, **kw) -> int:
    s = spec(user=f"u{uid}", uid=uid, hold=True, time_limit_min=10, **kw)
    return stub.SubmitJob(api_pb2.SubmitJobRequest(spec=s)).job_id


@pytest.mark.parametrize("change,who,words", [
    (dict(time_limit_min=20), ALICE, "Access/permission denied"),
    (dict(time_limit_min=-1), ALICE, "Access/permission denied"),
    (dict(comment="mine now"), BOB, "Access/permission denied"),
    (dict(nice=-5), ALICE, "Access/permission denied"),
    (dict(dependency="afterok:1?afterok:2,afterok:3"), ALICE, "Job dependency problem"),
    (dict(deadline=1), ALICE, "Invalid time specified"),
], ids=["a user may not raise their own time limit", "nor make it unlimited",
        "a user may not change another's job", "a user may not lower their nice below 0",
        "a dependency mixing ',' and '?'", "a deadline in the past"])
def test_refused_updates_change_nothing(api, change, who, words):  # noqa: F811
    stub, store = api
    jid = submit(stub)
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        stub.UpdateJob(api_pb2.UpdateJobRequest(job_id=jid, requester_uid=who, **change))
    assert e.value.details() == words
    assert store.dump() == before


def test_a_user_may_lower_their_time_limit_and_root_raise_it(api):  # noqa: F811
    stub, store = api
    jid = submit(stub)
    stub.UpdateJob(api_pb2.UpdateJobRequest(job_id=jid, requester_uid=ALICE, time_limit_min=5))
    assert store.job(jid).time_limit_min == 5
    stub.UpdateJob(api_pb2.UpdateJobRequest(job_id=jid, requester_uid=0, time_limit_min=60))
    assert store.job(jid).time_limit_min == 60


def test_only_root_undoes_an_admin_hold(api):  # noqa: F811
    stub, store = api
    jid = submit(stub)
    r = stub.HoldJobs(Hold(job_ids=[jid], action=Hold.HOLD, requester_uid=0))
    assert r.results[0].ok and store.job(jid).hold_admin
    for action in (Hold.RELEASE, Hold.USER_HOLD):
        r = stub.HoldJobs(Hold(job_ids=[jid], action=action, requester_uid=ALICE))
        assert (r.results[0].ok, r.results[0].error) == (False, "Access/permission denied")
    assert store.job(jid).hold_admin
    stub.HoldJobs(Hold(job_ids=[jid], action=Hold.RELEASE, requester_uid=0))
    assert not store.job(jid).held


def test_a_hold_by_the_owner_is_a_user_hold_they_can_release(api):  # noqa: F811
    stub, store = api
    jid = submit(stub)
    stub.HoldJobs(Hold(job_ids=[jid], action=Hold.RELEASE, requester_uid=ALICE))
    stub.HoldJobs(Hold(job_ids=[jid], action=Hold.HOLD, requester_uid=ALICE))
    job = store.job(jid)
    assert (job.held, job.hold_admin, job.reason) == (True, False, "JobHeldUser")
    r = stub.HoldJobs(Hold(job_ids=[jid], action=Hold.RELEASE, requester_uid=ALICE))
    assert r.results[0].ok and not store.job(jid).held


def test_requeue_refusals(api):  # noqa: F811
    stub, store = api
    pending = submit(stub)
    never = submit(stub, requeue=False)
    store.update_job(never, state="COMPLETED", held=False)
    other = submit(stub, uid=BOB)
    store.update_job(other, state="COMPLETED", held=False)
    r = stub.RequeueJobs(api_pb2.RequeueJobsRequest(job_ids=[pending, never, other, 777],
                                                   requester_uid=ALICE))
    assert [(x.job_id, x.ok, x.error) for x in r.results] == [
        (pending, False, "Job is pending execution"),
        (never, False, "Requested operation is presently disabled"),
        (other, False, "Access/permission denied"),
        (777, False, "Invalid job id specified")]


def test_requeue_of_a_finished_job_pends_it_again_with_one_more_restart(api):  # noqa: F811
    stub, store = api
    jid = submit(stub)
    store.update_job(jid, state="FAILED", held=False, exit_code=1, end_time=5.0,
                     nodes=("node1",), cpus_per_node=(1,), batch_host="node1")
    r = stub.RequeueJobs(api_pb2.RequeueJobsRequest(job_ids=[jid], requester_uid=ALICE))
    assert r.results[0].ok
    job = store.job(jid)
    assert (job.state, job.reason, job.restarts, job.exit_code, job.end_time, job.nodes) == \
        ("PENDING", "BeginTime", 1, 0, 0.0, ())
