"""Scontrol write batch_script JOB [FILE] against a fake controller."""
from __future__ import annotations

import io
import os

import grpc
import pytest

from cli import scontrol
from lingjun.v1 import api_pb2
from tests.cli.fakes import RpcFailure


class Api:
    def __init__(self, reply=None, error=None):
        self.reply, self.error, self.requests = reply, error, []

    def call(self, method, request, **kw):
        assert method == "GetBatchScript"
        self.requests.append(request)
        if self.error:
            raise self.error
        return self.reply


def run(argv, api):
    out, err = io.StringIO(), io.StringIO()
    rc = scontrol.main(argv, api=api, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


SCRIPT = "#!/bin/sh\necho hi\n"


def test_written_to_slurm_JOB_sh_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    api = Api(api_pb2.GetBatchScriptResponse(script=SCRIPT, job_id=7))
    assert run(["write", "batch_script", "7"], api) == (
        0, "batch script for job 7 written to slurm-7.sh\n", "")
    assert (tmp_path / "slurm-7.sh").read_text() == SCRIPT
    assert (api.requests[0].job_id, api.requests[0].requester_uid) == (7, os.getuid())


def test_dash_writes_to_stdout_and_b_abbreviates_batch_script():
    api = Api(api_pb2.GetBatchScriptResponse(script=SCRIPT, job_id=7))
    assert run(["write", "b", "7", "-"], api) == (0, SCRIPT, "")


@pytest.mark.parametrize("error,words", [
    (RpcFailure(grpc.StatusCode.PERMISSION_DENIED, "Access/permission denied"),
     "job script retrieval failed: Access/permission denied\n"),
    (RpcFailure(grpc.StatusCode.NOT_FOUND, "Invalid job id specified"),
     "job script retrieval failed: Invalid job id specified\n"),
], ids=["another user's job", "no such job"])
def test_a_refusal_writes_no_file(tmp_path, monkeypatch, error, words):
    monkeypatch.chdir(tmp_path)
    assert run(["write", "batch_script", "7"], Api(error=error)) == (1, "", words)
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_cannot_be_opened(tmp_path):
    api = Api(api_pb2.GetBatchScriptResponse(script=SCRIPT, job_id=7))
    target = str(tmp_path / "no" / "such" / "dir.sh")
    assert run(["write", "batch_script", "7", target], api) == (
        1, "", f"failed to open file `{target}`: No such file or directory\n")


@pytest.mark.parametrize("argv,words", [
    (["write"], "scontrol: error: too few arguments for keyword:write\n"),
    (["write", "batch_script"], "scontrol: error: too few arguments for keyword:write\n"),
    (["write", "config"], "scontrol: error: invalid write argument:config\n"),
    (["write", "batch_script", "x1"], "job script retrieval failed: Invalid job id specified\n"),
], ids=["nothing to write", "no job", "write config is not there", "not a job id"])
def test_usage_errors_ask_nothing(argv, words):
    api = Api()
    assert run(argv, api) == (1, "", words)
    assert api.requests == []
