"""lingjun restd without a controller: authentication headers, routing, and
job properties turned into sbatch's options; a refused request never
reaches the controller (its address here answers nothing)."""
from __future__ import annotations

import asyncio
import base64
import json

import pytest

from cli import restd


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
