"""The SlurmApi over a real socket: idempotent submission, refusals that change nothing."""
from __future__ import annotations


import grpc
import pytest

from lingjun.v1 import api_pb2
from lingjund.store.store import Store
from tests.lingjund import inproc

CONF = """
[[nodes]]
names = "node[1-4]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "debug"
nodes = "ALL"
"""


@pytest.fixture
def api(tmp_path):
    """A controller on port 0, its loop in a thread of its own; yields (stub, store)."""
    yield from _serve(tmp_path, CONF)


@pytest.fixture(params=["ANY", "ALL"])
def api_enforcing(tmp_path, request):
    """The same controller with EnforcePartLimits=ANY or ALL."""
    yield from _serve(tmp_path, f'[controller]\nenforce_part_limits = "{request.param}"\n' + CONF)


def _serve(tmp_path, conf: str):
    with inproc.serve(tmp_path, conf) as s:
        yield s.stub, s.store


def spec(**kw) -> api_pb2.JobSpec:
    base = dict(name="t", script="#!/bin/sh\ntrue\n", work_dir="/tmp", user="root", uid=0, batch=True)
    base.update(kw)
    return api_pb2.JobSpec(**base)


def test_a_retried_submission_with_the_same_token_returns_the_first_job(api):
    stub, store = api
    first = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(), client_token="tok-1"))
    again = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(), client_token="tok-1"))
    other = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(), client_token="tok-2"))
    assert (again.job_id, again.duplicate) == (first.job_id, True)
    assert other.job_id == first.job_id + 1
    assert len(store.dump()["jobs"]) == 2


def test_an_acknowledged_job_is_in_the_store_before_the_reply(api):
    stub, store = api
    r = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(name="durable")))
    # A second connection to the file sees it: it was committed, not just cached.
    other = Store(store.path)
    try:
        assert other.job(r.job_id).name == "durable"
    finally:
        other.close()


@pytest.mark.parametrize("bad,code,words", [
    (spec(partition="nosuch"), grpc.StatusCode.INVALID_ARGUMENT, "Invalid partition name specified"),
    (spec(cpus_per_task=3), grpc.StatusCode.INVALID_ARGUMENT, "Requested node configuration is not available"),
    (spec(min_nodes=2, max_nodes=2, num_tasks=5), grpc.StatusCode.INVALID_ARGUMENT,
     "Requested node configuration is not available"),
    (spec(script="no shebang"), grpc.StatusCode.INVALID_ARGUMENT, "lacks #!"),
    (spec(work_dir="relative/dir"), grpc.StatusCode.INVALID_ARGUMENT, "absolute path"),
    (spec(min_nodes=-1), grpc.StatusCode.INVALID_ARGUMENT, "Invalid min_nodes"),
    (spec(time_limit_min=-7), grpc.StatusCode.INVALID_ARGUMENT, "Requested time limit is invalid"),
    (spec(script="#!/bin/sh\n" + "x" * (5 * 1024 * 1024)), grpc.StatusCode.INVALID_ARGUMENT, "too large"),
], ids=["unknown partition", "more CPUs per task than a node has",
        "more tasks than two nodes have CPUs for -N 2 -n 5", "a script without #!", "a relative working dir",
        "a negative node count", "a negative time limit", "a script over the size limit"])
def test_impossible_requests_are_refused_and_change_nothing(api, bad, code, words):
    stub, store = api
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        stub.SubmitJob(api_pb2.SubmitJobRequest(spec=bad))
    assert e.value.code() == code
    assert words in (e.value.details() or "")
    assert store.dump() == before


OVER_PARTITION_LIMITS = [
    pytest.param(spec(min_nodes=5), "Node count specification invalid",
                 id="more nodes than the partition has (sbatch -N 5)"),
    pytest.param(spec(num_tasks=9), "More processors requested than permitted",
                 id="more tasks than the partition has CPUs (sbatch -n 9)"),
]


@pytest.mark.parametrize("over,words", OVER_PARTITION_LIMITS)
def test_over_partition_limits_is_accepted_by_default_as_in_slurm(api, over, words):
    # Slurm's default EnforcePartLimits=NO: the job is taken and pends (golden
    # err_sbatch_too_many_nodes: "Submitted batch job 1"); the reason comes from the core.
    stub, store = api
    r = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=over))
    assert store.job(r.job_id).state == "PENDING"


@pytest.mark.parametrize("over,words", OVER_PARTITION_LIMITS)
def test_over_partition_limits_is_refused_when_enforced(api_enforcing, over, words):
    stub, store = api_enforcing
    before = store.dump()
    with pytest.raises(grpc.RpcError) as e:
        stub.SubmitJob(api_pb2.SubmitJobRequest(spec=over))
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, words)
    assert store.dump() == before


def test_asking_for_an_unknown_job_is_not_found(api):
    stub, _ = api
    with pytest.raises(grpc.RpcError) as e:
        stub.GetJobs(api_pb2.GetJobsRequest(job_ids=[424242]))
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.NOT_FOUND, "Invalid job id specified")


def test_cancelling_a_pending_job_ends_it_at_once(api):
    stub, store = api
    jid = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(min_nodes=4))).job_id
    r = stub.CancelJobs(api_pb2.CancelJobsRequest(job_ids=[jid, 999], requester_uid=0))
    assert [(x.job_id, x.ok, x.error) for x in r.results] == [
        (999, False, "Invalid job id specified"), (jid, True, "")]
    assert store.job(jid).state == "CANCELLED"


def test_submitting_several_jobs_in_one_call_answers_each_and_refuses_a_bad_one_alone(api):
    stub, store = api
    jobs = [api_pb2.SubmitJobRequest(spec=spec(name="a"), client_token="many-1"),
            api_pb2.SubmitJobRequest(spec=spec(name="b", partition="nosuch")),
            api_pb2.SubmitJobRequest(spec=spec(name="c", work_dir="relative/dir")),
            api_pb2.SubmitJobRequest(spec=spec(name="d")),
            api_pb2.SubmitJobRequest(spec=spec(name="e"), client_token="many-1")]
    got = stub.SubmitJobs(api_pb2.SubmitJobsRequest(jobs=jobs)).results
    assert [r.error for r in got] == ["", "Invalid partition name specified",
                                      "The working directory must be an absolute path", "", ""]
    a, d, e = got[0].job, got[3].job, got[4].job
    assert d.job_id == a.job_id + 1 and not a.duplicate and not d.duplicate
    assert (e.job_id, e.duplicate) == (a.job_id, True)     # the same token, within one call
    names = {j["job_id"]: j["name"] for j in store.dump()["jobs"]}
    assert names == {a.job_id: "a", d.job_id: "d"}


def test_a_script_submitted_without_the_batch_flag_is_a_batch_job(api):
    """An SDK client that leaves `batch` unset gets the batch job it sent a script
    for (it used to be cancelled at once as an allocation nobody held)."""
    stub, store = api
    r = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(batch=False, name="sdk")))
    job = store.job(r.job_id)
    assert (job.state, job.spec.batch) == ("PENDING", True)


def test_a_submission_with_neither_batch_flag_nor_script_is_refused(api):
    stub, store = api
    with pytest.raises(grpc.RpcError) as e:
        stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(batch=False, script="")))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Batch script is empty or lacks #!" in e.value.details()
    assert store.dump()["jobs"] == []
