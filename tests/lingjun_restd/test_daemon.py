"""lingjun restd without a controller: authentication headers, routing, and
job properties turned into sbatch's options; a refused request never
reaches the controller (its address here answers nothing)."""
from __future__ import annotations

import asyncio
import base64
import json
import os

import pytest

from lingjun_restd import daemon as restd


def token_for(uid: int) -> str:
    body = base64.urlsafe_b64encode(json.dumps({"uid": uid, "gid": 0}).encode()).decode().rstrip("=")
    return f"e30.{body}.sig"


class Api:
    """restd.RestApi, each request answered on a loop of its own."""

    def __init__(self):
        self.api = restd.RestApi("127.0.0.1:9", ca_file="")       # nothing listens there

    def handle(self, *args, **kw):
        async def one():
            try:
                return await self.api.handle(*args, **kw)
            finally:
                await self.api.close()
        return asyncio.run(one())


@pytest.fixture
def api():
    return Api()


def errors(answer) -> tuple[int, list]:
    status, _, body = answer
    return status, json.loads(body)["errors"]


def test_no_token_is_401_in_slurms_words(api):
    assert errors(api.handle("GET", "/slurm/v0.0.38/jobs", {}, b"")) == (
        401, [{"error": "Protocol authentication error", "errno": 1007}])


def test_a_user_name_that_is_not_the_tokens_is_401(api):
    headers = {"X-SLURM-USER-NAME": "nobody", "X-SLURM-USER-TOKEN": token_for(0)}
    assert errors(api.handle("GET", "/slurm/v0.0.38/jobs", headers, b""))[0] == 401


def test_an_unknown_path_is_slurmrestds_404(api):
    status, ctype, body = api.handle("GET", "/slurm/v0.0.38/frobnicate", {}, b"")
    assert (status, ctype) == (404, "text/plain") and body.startswith("Unable find requested URL")


def test_an_unknown_job_property_is_refused_before_any_call(api):
    headers = {"X-SLURM-USER-TOKEN": token_for(0)}
    body = json.dumps({"script": "#!/bin/sh\ntrue\n", "job": {"frobs": 3}}).encode()
    assert errors(api.handle("POST", "/slurm/v0.0.38/job/submit", headers, body)) == (
        500, [{"error": "Unsupported job property: frobs", "errno": 22}])


def test_bad_job_options_are_refused_in_sbatchs_words_before_any_call(api):
    headers = {"X-SLURM-USER-TOKEN": token_for(0)}
    body = json.dumps({"script": "#!/bin/sh\ntrue\n", "job": {"nodes": "zero"}}).encode()
    assert errors(api.handle("POST", "/slurm/v0.0.38/job/submit", headers, body)) == (
        500, [{"error": '"zero" is not a valid node count', "errno": -1}])


def test_job_properties_become_sbatch_options():
    argv, env, cwd = restd.submit_argv({"name": "x", "nodes": "2", "time_limit": 10, "hold": True,
                                        "partition": "gpu", "current_working_directory": "/w",
                                        "environment": {"A": "1"}})
    assert sorted(argv) == sorted(["--job-name=x", "--nodes=2", "--time=10", "--hold",
                                   "--partition=gpu", "--chdir=/w"])
    assert (env, cwd) == ({"A": "1"}, "/w")


def test_run_as_root_it_refuses_in_slurmrestds_words(capsys):
    assert os.geteuid() == 0, "the suite runs as root"
    assert restd.main(["unix:/nonexistent/restd.sock"]) == 1
    assert capsys.readouterr().err == "lingjun restd: fatal: lingjun restd should not be run as the root user.\n"


@pytest.mark.parametrize("body, want", [
    (b'{"script": "#!/bin/sh\\n", "job": {"environment": [1]}}', 400),
    (b'{"script": "#!/bin/sh\\n", "job": {"time_limit": "abc"}}', 400),
    (b"[" * 100_000, 400),
    (b'{"script": "\\ud800"}', 400),
    (b'{"script": ', 400),
    (b'{"script": "#!/bin/sh\\n", "job": []}', 400),
], ids=["environment [1]", "time_limit abc", "100,000 nested [", "a lone surrogate", "bad JSON",
        "job a list"])
def test_a_malformed_submission_is_400_failure_during_parsing_before_any_call(api, body, want):
    headers = {"X-SLURM-USER-TOKEN": token_for(0)}
    status, errors_ = errors(api.handle("POST", "/slurm/v0.0.38/job/submit", headers, body))
    assert status == want and errors_[0]["error_number"] in (9001, 9002), errors_


def test_a_job_id_no_job_can_have_is_404_before_any_call(api):
    headers = {"X-SLURM-USER-TOKEN": token_for(0)}
    status, errors_ = errors(api.handle("GET", f"/slurm/v0.0.38/job/{10**23}", headers, b""))
    assert (status, errors_[0]["error"]) == (404, "Invalid job id specified")


def test_over_a_unix_socket_a_token_of_another_uid_is_401(api):
    headers = {"X-SLURM-USER-TOKEN": token_for(1000)}
    assert errors(api.handle("GET", "/slurm/v0.0.38/jobs", headers, b"", peer_uid=1001)) == (
        401, [{"error": "Protocol authentication error", "errno": 1007}])
