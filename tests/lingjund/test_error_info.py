"""Errors carry google.rpc.ErrorInfo with Slurm's error name, so programs need not parse English.

A real server on port 0; each refusal is read back the way a client
program would, through grpcio-status (``rpc_status.from_call``) and through
``lingjun.client.error_reason``.
"""
from __future__ import annotations

import importlib
import pkgutil
import re

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

import lingjund.service
from lingjun import client
from lingjun.v1 import api_pb2, api_pb2_grpc
from lingjund.service import errors
from lingjund.transport import status
from tests.lingjund import inproc
from tests.lingjund.test_api import CONF, spec

ALICE, BOB = 1001, 1002


@pytest.fixture
def served(tmp_path):
    with inproc.serve(tmp_path, CONF) as s:
        yield s


def refusal(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value


def info_of(err: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    st = rpc_status.from_call(err)
    assert st is not None, f"no google.rpc.Status in {err.code()} {err.details()!r}"
    assert st.code == err.code().value[0] and st.message == err.details()
    (detail,) = st.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    return info


def test_an_unknown_job_is_eslurm_invalid_job_id(served):
    err = refusal(lambda: served.stub.GetJobEvents(api_pb2.GetJobEventsRequest(job_id=999)))
    info = info_of(err)
    assert (err.code(), err.details()) == (grpc.StatusCode.NOT_FOUND, "Invalid job id specified")
    assert (info.reason, info.domain) == ("ESLURM_INVALID_JOB_ID", "lingjun")
    assert client.error_reason(err) == "ESLURM_INVALID_JOB_ID"


def test_anothers_job_is_eslurm_access_denied(served):
    jid = served.stub.SubmitJob(api_pb2.SubmitJobRequest(
        spec=spec(user="bob", uid=BOB, hold=True))).job_id
    err = refusal(lambda: served.stub.GetBatchScript(
        api_pb2.GetBatchScriptRequest(job_id=jid, requester_uid=ALICE)))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert client.error_reason(err) == "ESLURM_ACCESS_DENIED"


@pytest.mark.parametrize("kw,reason,details", [
    (dict(partition="nosuch"), "ESLURM_INVALID_PARTITION_NAME", "Invalid partition name specified"),
    (dict(script="echo no shebang"), "EINVAL", "Batch script is empty or lacks #!"),
    (dict(time_limit_min=-5), "ESLURM_INVALID_TIME_LIMIT",
     "Requested time limit is invalid (missing or exceeds some limit)"),
    (dict(mail_type="END"), "ESLURM_NOT_SUPPORTED",
     "--mail-type is not available: MailProg /nonexistent/mail is not an executable file"),
], ids=["an unknown partition", "a script without #!", "a negative time limit",
        "--mail-type without a MailProg"])
def test_a_refused_submission_names_its_reason(tmp_path, kw, reason, details):
    with inproc.serve(tmp_path, '[controller]\nmail_prog = "/nonexistent/mail"\n' + CONF) as s:
        err = refusal(lambda: s.stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(**kw))))
        assert (client.error_reason(err), err.details()) == (reason, details)
        assert s.stub.GetJobs(api_pb2.GetJobsRequest(all_states=True)).jobs == []


def test_undecodable_bytes_and_a_missing_token_name_theirs(served):
    err = refusal(lambda: served.raw("GetJobs", b"\xff\xff\xff"))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert client.error_reason(err) == "SLURM_UNEXPECTED_MSG_ERROR"
    with grpc.insecure_channel(served.address) as ch:      # no token at all
        err = refusal(lambda: api_pb2_grpc.SlurmApiStub(ch).Ping(api_pb2.PingRequest(), timeout=5))
    assert (err.code(), err.details()) == (grpc.StatusCode.UNAUTHENTICATED, "Protocol authentication error")
    assert client.error_reason(err) == "SLURM_PROTOCOL_AUTHENTICATION_ERROR"


def test_api_call_sets_the_reason_on_what_it_raises(served):
    api = client.Api.__new__(client.Api)       # the wrapper over an already signed channel
    api.address, api._channel, api.stub = served.address, served.channel, served.stub
    with pytest.raises(grpc.RpcError) as e:
        api.call("UpdateJob", api_pb2.UpdateJobRequest(job_id=12345, name="x"))
    assert e.value.reason == "ESLURM_INVALID_JOB_ID"


def test_an_error_without_details_has_no_reason():
    class Bare(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.INTERNAL

        def details(self):
            return "boom"

        def trailing_metadata(self):
            return ()
    assert client.error_reason(Bare()) == ""


def _all_errors() -> list[type[errors.SlurmError]]:
    for m in pkgutil.iter_modules(lingjund.service.__path__):
        importlib.import_module(f"lingjund.service.{m.name}")
    found, todo = [], [errors.SlurmError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", _all_errors(), ids=lambda c: c.__name__)
def test_every_service_error_has_a_slurm_name_of_its_own(cls):
    assert cls in status.REASON, f"{cls.__module__}.{cls.__name__} has no entry in status.REASON"
    assert re.fullmatch(r"E?SLURM_[A-Z_]+|E[A-Z]+", status.REASON[cls]), status.REASON[cls]


def test_each_refused_job_of_a_bulk_submission_names_its_reason(served):
    r = served.stub.SubmitJobs(api_pb2.SubmitJobsRequest(jobs=[
        api_pb2.SubmitJobRequest(spec=spec(hold=True)),
        api_pb2.SubmitJobRequest(spec=spec(partition="nosuch")),
        api_pb2.SubmitJobRequest(spec=spec(script="no shebang")),
    ]))
    got = [(x.HasField("job"), x.error, x.reason) for x in r.results]
    assert got == [(True, "", ""),
                   (False, "Invalid partition name specified", "ESLURM_INVALID_PARTITION_NAME"),
                   (False, "Batch script is empty or lacks #!", "EINVAL")]


@pytest.mark.parametrize("n", [5_000, 20_000, 100_000])
def test_an_error_quoting_a_huge_value_still_arrives_with_its_reason(served, n):
    """The message rides in the trailers twice; unbounded, gRPC would answer
    RESOURCE_EXHAUSTED (at random past 8 KiB) instead of the refusal."""
    err = refusal(lambda: served.stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(launcher="x" * n))))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert client.error_reason(err) == "EINVAL"
    assert err.details().startswith("Invalid --launcher argument: xxx") and err.details().endswith("...")
    assert len(err.details()) == status.MAX_MESSAGE_CHARS
