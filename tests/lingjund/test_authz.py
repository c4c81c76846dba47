"""Who may do what, over the real SlurmApi: owners and operators.

Operators come from ``[authz] operators`` (a uid here, so no user account is
needed); the e2e test test_authz_users.py shows the same with real users.
Every refusal is checked to leave the store exactly as it was.
"""
from __future__ import annotations

import grpc
import pytest

from lingjun.v1 import api_pb2
from tests.lingjund.test_api import CONF, _serve, spec

ALICE, BOB, OPERATOR = 1000, 1001, 1002
Hold = api_pb2.HoldJobsRequest


@pytest.fixture
def api(tmp_path):
    yield from _serve(tmp_path, f'[authz]\noperators = ["{OPERATOR}"]\n'
                                f'max_submit_jobs_per_user = 3\n' + CONF)


def submit(stub, uid: int, **kw) -> int:
    s = spec(user=f"u{uid}", uid=uid, hold=True, time_limit_min=10, **kw)
    return stub.SubmitJob(api_pb2.SubmitJobRequest(spec=s)).job_id


def cancel(stub, uid: int, **kw) -> list[tuple]:
    r = stub.CancelJobs(api_pb2.CancelJobsRequest(requester_uid=uid, **kw))
    return [(x.array_id or x.job_id, x.ok, x.error) for x in r.results]


def test_a_user_cannot_cancel_anothers_job_and_nothing_changes(api):
    stub, store = api
    jid = submit(stub, BOB)
    before = store.dump()
    assert cancel(stub, ALICE, job_ids=[jid]) == [(jid, False, "Access/permission denied")]
    assert cancel(stub, ALICE, user=store.job(jid).user) == [(jid, False, "Access/permission denied")]
    assert store.dump() == before


def test_a_user_cannot_cancel_tasks_of_anothers_array(api):
    stub, store = api
    jid = submit(stub, BOB, array="1-2")
    before = store.dump()
    got = cancel(stub, ALICE, array_tasks=[api_pb2.ArrayTaskSelection(array_job_id=jid,
                                                                      task_ids=[1])])
    assert got == [(f"{jid}_1", False, "Access/permission denied")]
    assert store.dump() == before


@pytest.mark.parametrize("who", [BOB, OPERATOR, 0],
                         ids=["the owner cancels", "an operator cancels", "root cancels"])
def test_the_owner_an_operator_and_root_may_cancel(api, who):
    stub, store = api
    jid = submit(stub, BOB)
    assert cancel(stub, who, job_ids=[jid]) == [(jid, True, "")]
    assert store.job(jid).state == "CANCELLED"


def test_an_operator_hold_is_an_admin_hold_the_owner_cannot_release(api):
    stub, store = api
    jid = submit(stub, ALICE)
    stub.HoldJobs(Hold(job_ids=[jid], action=Hold.RELEASE, requester_uid=ALICE))
    r = stub.HoldJobs(Hold(job_ids=[jid], action=Hold.HOLD, requester_uid=OPERATOR))
    assert r.results[0].ok and store.job(jid).hold_admin
    r = stub.HoldJobs(Hold(job_ids=[jid], action=Hold.RELEASE, requester_uid=ALICE))
    assert (r.results[0].ok, r.results[0].error) == (False, "Access/permission denied")
    r = stub.HoldJobs(Hold(job_ids=[jid], action=Hold.RELEASE, requester_uid=OPERATOR))
    assert r.results[0].ok and not store.job(jid).held


def test_an_operator_may_update_and_requeue_anothers_job(api):
    stub, store = api
    jid = submit(stub, ALICE)
    stub.UpdateJob(api_pb2.UpdateJobRequest(job_id=jid, requester_uid=OPERATOR, time_limit_min=99))
    assert store.job(jid).time_limit_min == 99
    store.update_job(jid, state="COMPLETED", held=False)
    for who, ok in ((BOB, False), (OPERATOR, True)):
        r = stub.RequeueJobs(api_pb2.RequeueJobsRequest(job_ids=[jid], requester_uid=who))
        assert r.results[0].ok is ok, (who, r)
    assert store.job(jid).state == "PENDING"


def test_only_operators_change_node_states(api):
    stub, store = api
    before = store.dump()
    drain = api_pb2.UpdateNodeRequest(names=["node1"], state="DRAIN", reason="fan",
                                      requester_uid=ALICE, requester="alice")
    with pytest.raises(grpc.RpcError) as e:
        stub.UpdateNode(drain)
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.PERMISSION_DENIED,
                                                   "Invalid user id")
    assert store.dump() == before
    drain.requester_uid = OPERATOR
    stub.UpdateNode(drain)
    assert store.node("node1").drain


def test_the_batch_script_is_for_its_owner_and_operators(api):
    stub, store = api
    jid = submit(stub, BOB, script="#!/bin/sh\necho secret-token\n")
    for who in (BOB, OPERATOR, 0):
        r = stub.GetBatchScript(api_pb2.GetBatchScriptRequest(job_id=jid, requester_uid=who))
        assert r.script == "#!/bin/sh\necho secret-token\n"
    with pytest.raises(grpc.RpcError) as e:
        stub.GetBatchScript(api_pb2.GetBatchScriptRequest(job_id=jid, requester_uid=ALICE))
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.PERMISSION_DENIED,
                                                   "Access/permission denied")
    with pytest.raises(grpc.RpcError) as e:
        stub.GetBatchScript(api_pb2.GetBatchScriptRequest(job_id=jid + 100, requester_uid=BOB))
    assert e.value.details() == "Invalid job id specified"


def test_max_submit_jobs_per_user_counts_pending_jobs_and_array_tasks(api):
    stub, store = api
    submit(stub, ALICE, array="1-2")
    submit(stub, BOB)                       # another user's jobs do not count
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        submit(stub, ALICE, array="1-2")
    assert e.value.details() == ("Job violates accounting/QOS policy "
                                 "(job submit limit, user's size and/or time limits)")
    assert store.dump() == before
    third = submit(stub, ALICE)             # 2 tasks + 1 = the limit of 3
    with pytest.raises(grpc.RpcError):
        submit(stub, ALICE)
    cancel(stub, ALICE, job_ids=[third])    # a finished job frees its place
    submit(stub, ALICE)


def test_steps_and_allocation_leases_are_the_owners_alone(api):
    """srun --jobid=N into another's job would run commands as that job's owner."""
    stub, store = api
    jid = submit(stub, BOB)
    before = store.dump()
    for who in (ALICE, OPERATOR):
        with pytest.raises(grpc.RpcError) as e:
            list(stub.RunStep(api_pb2.RunStepRequest(job_id=jid, argv=["id"], requester_uid=who)))
        assert (e.value.code(), e.value.details()) == (grpc.StatusCode.PERMISSION_DENIED,
                                                       "Access/permission denied")
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Allocate(iter([api_pb2.AllocationRequest(attach_job_id=jid,
                                                               requester_uid=who)])))
        assert e.value.details() == "Access/permission denied"
    assert store.dump() == before
    with pytest.raises(grpc.RpcError) as e:        # the owner gets past the door
        list(stub.RunStep(api_pb2.RunStepRequest(job_id=jid, argv=["id"], requester_uid=BOB)))
    assert e.value.details() == "Job/step already completing or completed"
