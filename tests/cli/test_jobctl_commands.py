"""sbatch's dependency/begin options and scontrol's job commands against a fake
controller: what they ask for, what they print, their exit codes."""
from __future__ import annotations

import os
import time

import grpc
import pytest

from cli import sbatch, scontrol
from lingjun.v1 import api_pb2
from tests.cli.fakes import RpcFailure
from tests.cli.test_commands import FakeApi, run
from tests.cli.test_sbatch_args import spec_of, workdir  # noqa: F401 - the fixture


@pytest.mark.parametrize("argv,key,want", [
    (["-d", "afterok:7", "--wrap", "true"], "dependency", "afterok:7"),
    (["--dependency=singleton", "--wrap", "true"], "dependency", "singleton"),
    (["--kill-on-invalid-dep=yes", "--wrap", "true"], "kill_on_invalid_dep", True),
    (["--kill-on-invalid-dep=NO", "--wrap", "true"], "kill_on_invalid_dep", False),
], ids=["-d is passed on as written (the controller judges it)", "singleton",
        "--kill-on-invalid-dep=yes", "--kill-on-invalid-dep is case-blind"])
def test_dependency_options_reach_the_spec(argv, key, want, workdir):  # noqa: F811
    got = getattr(spec_of(argv, workdir), key)
    assert got == want, f"{key}: want {want!r}, got {got!r}"


def test_begin_and_deadline_are_sent_as_unix_seconds(workdir):  # noqa: F811
    t0 = time.time()
    spec = spec_of(["-b", "now+60", "--deadline=now+1hour", "--wrap", "true"], workdir)
    assert 59 <= spec.begin_time - t0 <= 61, spec.begin_time - t0
    assert 3599 <= spec.deadline - t0 <= 3601, spec.deadline - t0


def ok(job_ids, failures=None):
    failures = failures or {}
    return api_pb2.JobControlResponse(results=[
        api_pb2.CancelResult(job_id=j, ok=j not in failures, error=failures.get(j, ""))
        for j in job_ids])


@pytest.mark.parametrize("argv,method,want", [
    (["hold", "5"], "HoldJobs", dict(job_ids=[5], action=api_pb2.HoldJobsRequest.HOLD)),
    (["uhold", "5,6", "7"], "HoldJobs", dict(job_ids=[5, 6, 7], action=api_pb2.HoldJobsRequest.USER_HOLD)),
    (["release", "JobId=5"], "HoldJobs", dict(job_ids=[5], action=api_pb2.HoldJobsRequest.RELEASE)),
    (["requeue", "5"], "RequeueJobs", dict(job_ids=[5], hold=False)),
    (["requeuehold", "5"], "RequeueJobs", dict(job_ids=[5], hold=True)),
], ids=["hold one job", "ids by commas and by words", "JobId= prefix", "requeue", "requeuehold"])
def test_job_control_requests(argv, method, want):
    api = FakeApi(**{method: ok(want["job_ids"])})
    rc, out, err = run(scontrol.main, argv, api)
    assert (rc, out, err) == (0, "", "")
    (called, req), = api.calls
    assert called == method
    for k, v in want.items():
        got = list(getattr(req, k)) if k == "job_ids" else getattr(req, k)
        assert got == v, f"{k}: want {v!r}, got {got!r}"
    assert req.requester_uid == os.getuid()


def test_each_failed_job_gets_its_line_and_rc_1():
    api = FakeApi(HoldJobs=ok([5, 6], {6: "Job is no longer pending execution"}))
    rc, out, err = run(scontrol.main, ["hold", "5,6,x"], api)
    assert (rc, out) == (1, "")
    assert err.splitlines() == ["Invalid job id specified for job x",
                                "Job is no longer pending execution for job 6"]


@pytest.mark.parametrize("argv,want", [
    (["JobId=5", "TimeLimit=1-00:00:00"], dict(time_limit_min=1440)),
    (["jobid=5", "timelimit=UNLIMITED"], dict(time_limit_min=-1)),
    (["Job=5", "Partition=gpu", "NumNodes=2-3"], dict(partition="gpu", min_nodes=2, max_nodes=3)),
    (["JobId=5", "JobName=x", "Comment=hi there"], dict(name="x", comment="hi there")),
    (["JobId=5", "Dep=afterok:3"], dict(dependency="afterok:3")),
    (["JobId=5", "Dependency="], dict(dependency="")),
    (["JobId=5", "Nice"], dict(nice=100)),
    (["JobId", "5", "TimeLimit", "7"], dict(time_limit_min=7)),
], ids=["TimeLimit in Slurm's time syntax", "keys are case-blind; UNLIMITED",
        "Job= is JobId; NumNodes=min-max", "JobName and a comment with a space",
        "keys may be shortened as scontrol allows", "an empty Dependency= clears it",
        "a bare Nice means Nice=100", "key and value as separate words"])
def test_update_job_requests(argv, want):
    api = FakeApi(UpdateJob=api_pb2.UpdateJobResponse())
    rc, out, err = run(scontrol.main, ["update", *argv], api)
    assert (rc, out, err) == (0, "", "")
    (called, req), = api.calls
    assert called == "UpdateJob" and req.job_id == 5
    for k, v in want.items():
        assert req.HasField(k) and getattr(req, k) == v, f"{k}: want {v!r}, got {getattr(req, k)!r}"


def test_time_limit_increments_are_relative_to_the_job():
    api = FakeApi(UpdateJob=api_pb2.UpdateJobResponse(), GetJobs=api_pb2.GetJobsResponse(
        jobs=[api_pb2.JobInfo(job_id=5, time_limit_min=10)]))
    assert run(scontrol.main, ["update", "JobId=5", "TimeLimit=+5"], api)[0] == 0
    assert api.calls[-1][1].time_limit_min == 15
    rc, _, err = run(scontrol.main, ["update", "JobId=5", "TimeLimit=-20"], api)
    assert (rc, err) == (1, "scontrol: error: TimeLimit decrement larger than current time limit "
                            "(20 > 10)\n")


@pytest.mark.parametrize("argv,want_err", [
    (["JobId=5", "Bogus=1"], "Update of this parameter is not supported: Bogus=1\nRequest aborted\n"),
    (["JobId=5", "TimeLimit=soon"], "scontrol: error: Invalid TimeLimit value\n"),
    (["JobId=5", "TimeLimit="], "scontrol: error: Invalid TimeLimit value\n"),
    (["JobId=5", "NumNodes=0"], "scontrol: error: Invalid node count specified: 0\n"),
    (["JobId=5", "StartTime=whenever"],
     "Invalid time specification (pos=0): whenever\nNo changes specified\n"),
    (["JobId=5"], "No changes specified\n"),
    (["JobId=5", "Name"], "Invalid input: Name\nRequest aborted\n"),
], ids=["a key scontrol does not know", "a time limit nobody can read", "an empty time limit",
        "zero nodes",
        "a start time nobody can read", "nothing to change", "a key without a value"])
def test_update_refused_before_asking(argv, want_err):
    api = FakeApi()
    rc, out, err = run(scontrol.main, ["update", *argv], api)
    assert (rc, out, err) == (1, "", want_err)
    assert api.calls == []


def test_update_error_from_the_controller_names_the_job():
    api = FakeApi(UpdateJob=RpcFailure(grpc.StatusCode.PERMISSION_DENIED, "Access/permission denied"))
    rc, out, err = run(scontrol.main, ["update", "JobId=5", "TimeLimit=99"], api)
    assert (rc, err) == (1, "Access/permission denied for job 5\n")
