"""lingjun restd: Slurm's REST API as slurmrestd 22.05 speaks it, in front of lingjund.

    lingjun restd [--listen HOST:PORT | unix:/PATH]...

Endpoints (``/slurm/v0.0.38/``): ``ping``, ``diag``, ``jobs``, ``job/{id}``
(GET, DELETE), ``job/submit`` (POST), ``nodes``, ``node/{name}``,
``partitions``, ``partition/{name}``; and ``/openapi/v3`` (slurmrestd's own
OpenAPI document, cut to the paths served here), so that a client generated
from it works unchanged.

A process of its own, as Slurm's slurmrestd is, not a door of the
controller: HTTP parsing and JSON encoding never run on the controller's
event loop, a portal's burst of requests cannot slow a scheduling pass, it
can run on a login node or several, and it holds no key. Each request's
``X-SLURM-USER-TOKEN`` (a user's token, ``scontrol token`` prints one as
``SLURM_JWT=...``) travels as that call's gRPC token, so the controller
authenticates and authorizes a REST call exactly as the same user's
command; ``X-SLURM-USER-NAME``, when given, must name the token's user.

Bodies are the documents of the commands' ``--json`` writers
(cli/formats_json.py: ``jobs`` is ``squeue --json``'s, ``nodes`` and
``partitions`` are ``sinfo --json``'s halves), laid out as json-c writes
them. A submission's job properties become sbatch's options and go through
sbatch's own option table (lingjun/sbatch_options.py), so REST and sbatch accept and
refuse alike. Errors come back as slurmrestd answers them: HTTP 500 and
``errors: [{error, errno}]`` (or the ``description, error_number, error,
source`` form where slurmrestd uses it), with Slurm's words and number.

The HTTP server is aiohttp's, hardened as every listener of the project is
(lingjun/httpdoor.py): one asyncio loop, the controller called with grpc.aio
on the same loop, no thread per connection; bounded request lines, headers
and bodies; first-byte, head and body timeouts; connections and requests in
flight bounded overall and per client (per peer uid on a unix socket; over
TCP per token user and per peer: the socket's owner for a client on this
host, else the address), one more answered 503 at once. Every
malformed request (bad JSON, wrong types, a lone surrogate, a job id no job
can have, a bad Content-Length) gets slurmrestd's error document with a 4xx
code (400 "Failure during parsing", as slurmrestd maps ESLURM_REST_FAIL_PARSING),
never a traceback or a dropped connection.

*Who may use a token.* As slurmrestd, it refuses to run as root or as the
controller's user (``[controller] user``, Slurm's SlurmUser): a root
process may present any user's token to the controller, so a root restd
would act on a token that leaked to someone else. On a unix socket the
kernel names the caller (SO_PEERCRED), and a token whose uid is not the
caller's is refused (401), as the controller refuses such a token from a
process on its own host. Over TCP the token alone decides.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import os
import pwd
import signal
import sys
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import grpc
from aiohttp import web

from cli import formats_json
from cli.common import CommandError
from lingjun import auth, client, httpdoor, slurm
from lingjun.endpoints import RPC_TIMEOUT_S, controller_address, tls_ca
from lingjun.v1 import api_pb2, api_pb2_grpc

PROG = "lingjun restd"
log = logging.getLogger("lingjun.restd")
PREFIX = "/slurm/v0.0.38/"
OPENAPI = Path(__file__).with_name("openapi_v0.0.38.json")
MAX_BODY = 16 * 1024 * 1024
MAX_JOB_ID = 0xFFFFFFFF      # job ids are uint32, as Slurm's
LIMITS = httpdoor.Limits(max_connections=1024, max_connections_per_peer=64, max_requests=256,
                         max_requests_per_client=16, first_byte_s=10.0, head_s=10.0, body_s=30.0,
                         max_line=8190, max_headers=100, max_body=MAX_BODY)

# Slurm's error numbers (slurm_errno.h) by their words (slurm_strerror), for
# the errors our controller answers in those words.
ERRNO_BY_TEXT = {
    "Invalid partition name specified": 2000, "Access/permission denied": 2002,
    "Requested nodes not in this partition": 2004,
    "More processors requested than permitted": 2005, "Node count specification invalid": 2006,
    "Job script not specified": 2009, "Invalid user id": 2010,
    "Requested node configuration is not available": 2014, "Requested nodes are busy": 2016,
    "Invalid job id specified": 2017, "Invalid node name specified": 2018,
    "Job/step already completing or completed": 2021, "Job is pending execution": 2024,
    "Invalid node state specified": 2028, "Invalid feature specification": 2029,
    "Requested operation not supported on this system": 2036,
    "Requested operation is presently disabled": 2037, "Job dependency problem": 2038,
    "Only batch jobs are accepted or processed": 2039, "Memory required by task is not available": 2044,
    "Invalid account or account/partition combination specified": 2045,
    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)": 2050,
    "Requested time limit is invalid (missing or exceeds some limit)": 2051,
    "Invalid time specified": 2054, "Invalid qos specification": 2066,
    "Invalid generic resource (gres) specification": 2072, "Job is no longer pending execution": 2073,
    "Invalid job array specification": 2081, "Job is not running": 2085,
    "Protocol authentication error": 1007, "Invalid argument": 22,
    "Unable to contact slurm controller (connect failure)": 1001,
}
AUTH_ERRNO = 1007            # SLURM_PROTOCOL_AUTHENTICATION_ERROR
CONNECT_ERRNO = 1001         # SLURM_COMMUNICATIONS_CONNECTION_ERROR
PARSING_ERRNO = 9001         # ESLURM_REST_FAIL_PARSING: slurmrestd answers it 400
PARSING_ERROR = "Failure during parsing"
JOBS_DESC_ERRNO = 9002       # ESLURM_REST_INVALID_JOBS_DESC: 400 too
JOBS_DESC_ERROR = "Jobs description entry not found, empty or not dictionary or list"
INVALID_JOB_ID = 2017

# v0.0.38 job properties -> the sbatch option each one is (None: the value is
# the option's argument; a callable: the argument made from the value).
_FLAG = object()


def _minutes(v: Any) -> str:
    """A time in minutes (a number, or its digits as a string: slurmrestd converts)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"expected an integer number of minutes, got {type(v).__name__}")
    try:
        return str(int(v))
    except (ValueError, OverflowError):
        raise ValueError(f"expected an integer number of minutes, got {_shown(v)}") from None


def _shown(v: Any) -> str:
    return ascii(v)[:60]


JOB_PROPERTIES: dict[str, tuple[str, Any]] = {
    "account": ("--account", None), "array": ("--array", None), "comment": ("--comment", None),
    "constraints": ("--constraint", None), "cpus_per_task": ("--cpus-per-task", None),
    "current_working_directory": ("--chdir", None), "dependency": ("--dependency", None),
    "exclusive": ("--exclusive", None), "gres": ("--gres", None), "gpus": ("--gpus", None),
    "gpus_per_node": ("--gpus-per-node", None), "gpus_per_task": ("--gpus-per-task", None),
    "hold": ("--hold", _FLAG), "mail_type": ("--mail-type", None), "mail_user": ("--mail-user", None),
    "memory_per_cpu": ("--mem-per-cpu", None), "memory_per_node": ("--mem", None),
    "name": ("--job-name", None), "nice": ("--nice", None), "nodes": ("--nodes", None),
    "partition": ("--partition", None), "qos": ("--qos", None), "signal": ("--signal", None),
    "standard_error": ("--error", None), "standard_input": ("--input", None),
    "standard_output": ("--output", None), "tasks": ("--ntasks", None),
    "tasks_per_node": ("--ntasks-per-node", None), "time_limit": ("--time", _minutes),
    "time_minimum": ("--time-min", _minutes), "wckey": ("--wckey", None),
    "begin_time": ("--begin", None), "deadline": ("--deadline", None),
}
# properties that say nothing a job here could use differently
IGNORED_PROPERTIES = {"environment", "argv", "get_user_environment", "requeue"}


class RestError(Exception):
    """An answer that is an error document (HTTP ``status``)."""

    def __init__(self, status: int, errors: list[dict]):
        super().__init__(errors[0].get("error", "") if errors else "")
        self.status, self.errors = status, errors


def error_entry(text: str, errno: int | None = None) -> dict:
    return {"error": text, "errno": ERRNO_BY_TEXT.get(text, -1) if errno is None else errno}


def parsing_error(description: str, source: str = "job/submit", status: int = 400,
                  errno: int = PARSING_ERRNO, error: str = PARSING_ERROR) -> RestError:
    """slurmrestd's answer to a request it cannot parse (resp_error's form)."""
    return RestError(status, [{"description": description, "error_number": errno,
                               "error": error, "source": source}])


def error_document(status: int, text: str) -> web.Response:
    """slurmrestd's error document for a refusal at the HTTP level (``httpdoor.Answers``)."""
    errno = PARSING_ERRNO if status < 500 else -1
    error = PARSING_ERROR if status in (400, 408, 413, 431) else (
        "Resource temporarily unavailable" if status == 503 else "Unspecified error")
    doc = {"meta": formats_json.meta(), "errors": [
        {"description": text, "error_number": 11 if status == 503 else errno, "error": error,
         "source": "slurmrestd"}]}
    return web.Response(status=status, text=formats_json.dump_json(doc), content_type="application/json")


class SlurmrestdAnswers:
    def error(self, status: int, text: str) -> web.Response:
        return error_document(status, text)


def _token_uid(token: str) -> int | None:
    """The uid a token claims (not verified here: the controller verifies it)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        uid = int(claims["uid"])
    except (IndexError, ValueError, KeyError, TypeError, OverflowError, RecursionError):
        return None
    return uid if 0 <= uid < 2**32 else None


def caller_token(headers: dict[str, str]) -> str:
    """The user's token from slurmrestd's headers; RestError 401 without one,
    or when X-SLURM-USER-NAME names someone else than the token."""
    token = headers.get("x-slurm-user-token", "")
    name = headers.get("x-slurm-user-name", "")
    if not token or not token.isascii() or not token.isprintable():
        raise RestError(401, [error_entry("Protocol authentication error", AUTH_ERRNO)])
    uid = _token_uid(token)
    if uid is None:
        raise RestError(401, [error_entry("Protocol authentication error", AUTH_ERRNO)])
    if name:
        try:
            owner = pwd.getpwuid(uid).pw_name
        except KeyError:
            owner = str(uid)
        if name != owner:
            raise RestError(401, [error_entry("Protocol authentication error", AUTH_ERRNO)])
    return token


def submit_argv(job: dict) -> tuple[list[str], dict[str, str], str]:
    """(sbatch options, the job's environment, its working directory) from v0.0.38 job properties."""
    argv: list[str] = []
    for key, value in job.items():
        if key in IGNORED_PROPERTIES:
            continue
        if key not in JOB_PROPERTIES:
            raise RestError(500, [error_entry(f"Unsupported job property: {key}", 22)])
        option, how = JOB_PROPERTIES[key]
        if how is _FLAG:
            if value:
                argv.append(option)
            continue
        if value is None:
            continue
        if not isinstance(value, (str, int, float, bool)):
            raise parsing_error(f"job property {key}: expected a string or a number, "
                                f"got {type(value).__name__}")
        try:
            text = how(value) if callable(how) else str(value)
        except ValueError as e:
            raise parsing_error(f"job property {key}: {e}") from None
        argv.append(f"{option}={text}")
    return argv, _environment(job.get("environment")), _text(job.get("current_working_directory") or "/tmp",
                                                             "current_working_directory")


def _text(value: Any, key: str) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise parsing_error(f"job property {key}: expected a string, got {type(value).__name__}")
    return str(value)


def _environment(env: Any) -> dict[str, str]:
    """{NAME: value} (or v0.0.36's ["NAME=value", ...]) -> {NAME: value}; 400 for anything else."""
    if env is None:
        return {}
    if isinstance(env, list):
        if not all(isinstance(e, str) for e in env):
            raise parsing_error("job property environment: expected strings NAME=value")
        return dict(e.split("=", 1) for e in env if "=" in e)
    if not isinstance(env, dict):
        raise parsing_error(f"job property environment: expected a dictionary, got {type(env).__name__}")
    out = {}
    for k, v in env.items():
        if isinstance(v, (dict, list)) or v is None:
            raise parsing_error(f"job property environment: {_shown(k)} is not a string")
        out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


class RestApi:
    """The endpoints, as coroutines of (method, path, query, headers, body) ->
    (HTTP status, document). One grpc.aio channel to the controller, opened on
    the serving loop at the first call; each call carries its caller's token."""

    def __init__(self, address: str | None = None, ca_file: str | None = None):
        self.address = address or controller_address()
        self.ca_file = tls_ca() if ca_file is None else ca_file
        self.channel: grpc.aio.Channel | None = None
        self._stub: api_pb2_grpc.SlurmApiStub | None = None
        self._cluster = ""

    @property
    def stub(self) -> api_pb2_grpc.SlurmApiStub:
        if self._stub is None:
            options = [("grpc.max_receive_message_length", 256 * 1024 * 1024), ("grpc.enable_retries", 0)]
            if self.ca_file:
                creds = grpc.ssl_channel_credentials(root_certificates=Path(self.ca_file).read_bytes())
                self.channel = grpc.aio.secure_channel(self.address, creds, options=options)
            else:
                self.channel = grpc.aio.insecure_channel(self.address, options=options)
            self._stub = api_pb2_grpc.SlurmApiStub(self.channel)
        return self._stub

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()
            self.channel, self._stub = None, None

    # -- calls --------------------------------------------------------------------
    async def _call(self, token: str, method: str, request, source: str = ""):
        try:
            return await getattr(self.stub, method)(request, timeout=RPC_TIMEOUT_S,
                                                    metadata=[(auth.TOKEN_METADATA, token)])
        except grpc.RpcError as e:
            code = e.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise RestError(500, [error_entry(
                    "Unable to contact slurm controller (connect failure)", CONNECT_ERRNO)]) from None
            if code == grpc.StatusCode.UNAUTHENTICATED:
                raise RestError(401, [error_entry("Protocol authentication error", AUTH_ERRNO)]) from None
            text = e.details() or "Unspecified error"
            raise RestError(500, [error_entry(text)]) from None

    async def _cluster_name(self, token: str) -> str:
        if not self._cluster:
            self._cluster = (await self._call(token, "Ping", api_pb2.PingRequest())).cluster
        return self._cluster

    @staticmethod
    def _doc(**body) -> dict:
        return {"meta": formats_json.meta(), "errors": [], **body}

    # -- endpoints ----------------------------------------------------------------
    async def ping(self, token: str, query: dict) -> dict:
        r = await self._call(token, "Ping", api_pb2.PingRequest())
        return self._doc(pings=[{"hostname": r.controller_host.split(".")[0], "ping": "UP",
                                 "status": 0, "mode": "primary"}])

    async def diag(self, token: str, query: dict) -> dict:
        r = await self._call(token, "Ping", api_pb2.PingRequest())
        jobs = (await self._call(token, "GetJobs", api_pb2.GetJobsRequest(all_states=True))).jobs
        count = {s: 0 for s in (slurm.PENDING, slurm.RUNNING, slurm.COMPLETED, slurm.CANCELLED,
                                slurm.FAILED)}
        for j in jobs:
            if j.state in count:
                count[j.state] += 1
        return self._doc(statistics={
            "parts_packed": 1, "req_time": r.now, "req_time_start": r.now,
            "server_thread_count": 1, "agent_queue_size": 0,
            "agent_count": 0, "agent_thread_count": 0, "dbd_agent_queue_size": 0,
            "gettimeofday_latency": 0, "schedule_cycle_max": 0, "schedule_cycle_last": 0,
            "schedule_cycle_total": 0, "schedule_cycle_mean": 0, "schedule_cycle_mean_depth": 0,
            "schedule_cycle_per_minute": 0, "schedule_queue_length": count[slurm.PENDING],
            "jobs_submitted": len(jobs), "jobs_started": count[slurm.RUNNING] + count[slurm.COMPLETED],
            "jobs_completed": count[slurm.COMPLETED], "jobs_canceled": count[slurm.CANCELLED],
            "jobs_failed": count[slurm.FAILED], "jobs_pending": count[slurm.PENDING],
            "jobs_running": count[slurm.RUNNING], "job_states_ts": r.now,
            "bf_backfilled_jobs": 0, "bf_last_backfilled_jobs": 0, "bf_backfilled_het_jobs": 0,
            "bf_cycle_counter": 0, "bf_cycle_mean": 0, "bf_depth_mean": 0, "bf_depth_mean_try": 0,
            "bf_cycle_last": 0, "bf_cycle_max": 0, "bf_queue_len": 0, "bf_queue_len_mean": 0,
            "bf_table_size": 0, "bf_table_size_mean": 0, "bf_when_last_cycle": 0, "bf_active": False,
            "rpcs_by_message_type": [], "rpcs_by_user": []})

    async def jobs(self, token: str, query: dict) -> dict:
        reply = await self._call(token, "GetJobs", api_pb2.GetJobsRequest(all_states=True))
        return formats_json.squeue_document(reply.jobs, await self._cluster_name(token))

    @staticmethod
    def _job_id(text: str, source: str) -> int:
        """A job id of the path; what no job can have (not digits, 0, over
        uint32) is slurmrestd's 404 for ESLURM_INVALID_JOB_ID."""
        if text.isascii() and text.isdigit() and len(text) <= 10 and 0 < int(text) <= MAX_JOB_ID:
            return int(text)
        raise RestError(404, [{"description": f"Unable to find JobId={_shown(text)[1:-1]}",
                               "error_number": INVALID_JOB_ID, "error": "Invalid job id specified",
                               "source": source}])

    async def job(self, token: str, query: dict, job_id: str) -> dict:
        jid = self._job_id(job_id, "slurm_load_job")
        missing = RestError(500, [{"description": f"Unable to find JobId={jid}", "error_number": 2017,
                                   "error": "Invalid job id specified", "source": "slurm_load_job"}])
        try:
            reply = await self._call(token, "GetJobs", api_pb2.GetJobsRequest(job_ids=[jid], all_states=True))
        except RestError as e:
            raise missing if e.errors[0].get("errno") == 2017 else e from None
        jobs = [j for j in reply.jobs if j.job_id == jid or j.array_job_id == jid]
        if not jobs:
            raise missing
        return formats_json.squeue_document(jobs, await self._cluster_name(token))

    async def cancel(self, token: str, query: dict, job_id: str) -> dict:
        jid = self._job_id(job_id, "slurm_kill_job")
        sig = (query.get("signal") or [""])[0]
        signum = 0
        if sig:
            try:
                signum = int(sig) if sig.isascii() and sig.isdigit() and len(sig) < 4 else int(
                    signal.Signals[sig if sig.startswith("SIG") else "SIG" + sig])
            except (KeyError, ValueError):
                signum = -1
            if not 0 < signum < signal.NSIG:
                raise parsing_error("Unable to parse signal", "slurm_kill_job", 422, 9000,
                                    "Query empty or not RFC7320 compliant")
        def refused(text: str) -> RestError:
            return RestError(500, [{
                "description": f"unable to kill JobId={jid} with signal {signum or 9}: {text}",
                "error_number": ERRNO_BY_TEXT.get(text, -1), "error": text, "source": "slurm_kill_job"}])
        try:
            reply = await self._call(token, "CancelJobs", api_pb2.CancelJobsRequest(job_ids=[jid], signal=signum))
        except RestError as e:
            raise (refused(e.errors[0]["error"]) if e.status == 500 else e) from None
        for r in reply.results:
            if not r.ok:
                raise refused(r.error)
        return self._doc()

    async def submit(self, token: str, query: dict, body: Any) -> dict:
        from lingjun import sbatch_options  # here: only a submission reads job options
        if not isinstance(body, dict):
            raise parsing_error("the body is not a dictionary", errno=JOBS_DESC_ERRNO, error=JOBS_DESC_ERROR)
        script = body.get("script")
        if not script:
            raise RestError(500, [{"error_code": 2009, "error": "Job script not specified"}])
        if not isinstance(script, str):
            raise parsing_error(f"script: expected a string, got {type(script).__name__}")
        job = body.get("job")
        job = {} if job is None else job
        if body.get("jobs"):
            raise RestError(500, [error_entry("Requested operation not supported on this system")])
        if not isinstance(job, dict):
            raise parsing_error("job: not a dictionary", errno=JOBS_DESC_ERRNO, error=JOBS_DESC_ERROR)
        argv, env, cwd = submit_argv(job)
        args = job.get("argv")
        args = [] if args is None else args
        if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
            raise parsing_error("job property argv: expected a list of strings")
        try:
            parsed = sbatch_options.parse_args([*argv], script, env, cwd)
        except (ValueError, OverflowError) as e:
            raise parsing_error(f"job properties: {_shown(str(e))[1:-1]}") from None
        except CommandError as e:
            text = str(e).split("\n")[0]
            for prefix in ("sbatch: error: Batch job submission failed: ", "sbatch: error: "):
                if text.startswith(prefix):
                    text = text[len(prefix):]
                    break
            raise RestError(500, [error_entry(text)]) from None
        try:
            req = _protobuf(parsed.request)
            req.spec.argv.extend(str(a) for a in args[1:])
        except (ValueError, TypeError, OverflowError) as e:     # a value out of the message's range
            raise parsing_error(f"job properties: {_shown(str(e))[1:-1]}") from None
        # who submits is the token's user (the controller writes it in)
        reply = await self._call(token, "SubmitJob", req)
        return self._doc(job_id=reply.job_id, step_id="BATCH", job_submit_user_msg="")

    async def nodes(self, token: str, query: dict) -> dict:
        nodes = (await self._call(token, "GetNodes", api_pb2.GetNodesRequest())).nodes
        return self._doc(nodes=[formats_json.node_dict(n) for n in
                                sorted(nodes, key=lambda n: slurm.natural_key(n.name))])

    async def node(self, token: str, query: dict, name: str) -> dict:
        nodes = [n for n in (await self._call(token, "GetNodes", api_pb2.GetNodesRequest())).nodes
                 if n.name == name]
        if not nodes:
            raise RestError(500, [error_entry("Invalid node name specified")])
        return self._doc(nodes=[formats_json.node_dict(nodes[0])])

    async def partitions(self, token: str, query: dict, name: str | None = None) -> dict:
        parts = (await self._call(token, "GetPartitions", api_pb2.GetPartitionsRequest())).partitions
        if name is not None:
            parts = [p for p in parts if p.name == name]
            if not parts:
                raise RestError(500, [error_entry("Invalid partition name specified")])
        return self._doc(partitions=[formats_json.partition_dict(p) for p in parts])

    # -- routing --------------------------------------------------------------------
    async def handle(self, method: str, target: str, headers: dict[str, str], body: bytes,
                     peer_uid: int | None = None) -> tuple[int, str, str]:
        """(HTTP status, content type, body) for one request. ``peer_uid``: the
        caller's uid when the kernel says it (a unix socket): the token must be its."""
        url = urlsplit(target)
        path, query = url.path, parse_qs(url.query)
        if method == "GET" and path in ("/openapi/v3", "/openapi", "/openapi.json"):
            return 200, "application/json", OPENAPI.read_text()
        route = self._route(method, path)
        if route is None:
            return 404, "text/plain", "Unable find requested URL. Please view /openapi/v3 for API reference."
        fn, args = route
        try:
            token = caller_token({k.lower(): v for k, v in headers.items()})
            if peer_uid is not None and _token_uid(token) != peer_uid:
                raise RestError(401, [error_entry("Protocol authentication error", AUTH_ERRNO)])
            if method == "POST":
                doc = await fn(token, query, parse_body(body), *args)
            else:
                doc = await fn(token, query, *args)
            return 200, "application/json", formats_json.dump_json(doc)
        except RestError as e:
            return e.status, "application/json", formats_json.dump_json(
                {"meta": formats_json.meta(), "errors": e.errors})

    def _route(self, method: str, path: str) -> tuple[Callable, tuple] | None:
        if not path.startswith(PREFIX):
            return None
        parts = path[len(PREFIX):].strip("/").split("/")
        table: dict[tuple[str, str], Callable] = {
            ("GET", "ping"): self.ping, ("GET", "diag"): self.diag, ("GET", "jobs"): self.jobs,
            ("GET", "nodes"): self.nodes, ("GET", "partitions"): self.partitions,
        }
        if len(parts) == 1 and (method, parts[0]) in table:
            return table[(method, parts[0])], ()
        if len(parts) == 2:
            kind, arg = parts
            if kind == "job" and arg == "submit" and method == "POST":
                return self.submit, ()
            if kind == "job" and method == "GET":
                return self.job, (arg,)
            if kind == "job" and method == "DELETE":
                return self.cancel, (arg,)
            if kind == "node" and method == "GET":
                return self.node, (arg,)
            if kind == "partition" and method == "GET":
                return self.partitions, (arg,)
        return None


def parse_body(body: bytes) -> Any:
    """A request's JSON; slurmrestd's 400 for what is not JSON, nests too deep,
    or holds text that is not Unicode (a lone surrogate)."""
    try:
        data = json.loads(body.decode("utf-8") or "null")
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except (UnicodeError, ValueError, RecursionError) as e:
        raise parsing_error(f"the body is not JSON: {_shown(str(e).splitlines()[0] if str(e) else type(e).__name__)[1:-1]}",
                            "parse_http") from None
    return data


def _protobuf(request):
    from lingjun import messages  # here: only a request in the socket's messages is converted
    return messages.to_protobuf(request) if isinstance(request, messages.Message) else request


# -- the HTTP server ---------------------------------------------------------------------


class RestServer:
    """aiohttp's server (lingjun/httpdoor.py) in front of ``RestApi``: reads each
    body within the limits, counts each request against its peer (and, over
    TCP, its token's user), hands it to the API."""

    def __init__(self, api: RestApi, limits: httpdoor.Limits = LIMITS):
        self.api, self.limits = api, limits
        self.gate = httpdoor.Gate(limits, PROG)
        self.sites: list[httpdoor.Site] = []

    async def start(self, where: str) -> int:
        site = httpdoor.Site(httpdoor.Listener(self.serve, self.gate, SlurmrestdAnswers()))
        port = await site.start(where)
        self.sites.append(site)
        return port

    async def close(self) -> None:
        for site in self.sites:
            await site.close()
        self.sites.clear()

    async def serve(self, request: web.BaseRequest) -> web.StreamResponse:
        conn = request.protocol
        peer = conn.peer if isinstance(conn, httpdoor.Connection) else "?"
        peer_uid = conn.unix_uid if isinstance(conn, httpdoor.Connection) else None
        clients = [peer]
        if peer_uid is None:        # TCP: the peer, and the user the token names
            uid = _token_uid(request.headers.get("X-SLURM-USER-TOKEN", ""))
            if uid is not None:
                clients.append(f"user:{uid}")
        try:
            self.gate.enter(*clients)
        except httpdoor.Busy as e:
            self.gate.refusals.note(str(e).split(" from ")[0], peer)
            return _closing(error_document(503, "busy"))
        try:
            try:
                body = await httpdoor.read_body(request, self.limits)
            except httpdoor.BodyRefused as e:
                self.gate.refusals.note(str(e), peer)
                return _closing(error_document(e.status, str(e)))
            try:
                status, ctype, text = await self.api.handle(
                    request.method, request.raw_path, dict(request.headers), body, peer_uid)
            except Exception:    # noqa: BLE001 - a bug answers 500 in slurmrestd's form, not a dropped connection
                log.exception("%s %s from %s failed", request.method, ascii(request.raw_path), peer)
                return error_document(500, "internal error")
            if status >= 400:
                self.gate.refusals.note(f"answered {status}", peer)
            return web.Response(status=status, text=text, content_type=ctype)
        finally:
            self.gate.leave(*clients)


def _closing(resp: web.Response) -> web.Response:
    resp.force_close()
    return resp


def refuse_identity(controller_user: str) -> str | None:
    """slurmrestd's refusal to run as root or as SlurmUser, in its words; None when fine."""
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        return f"{PROG} should not be run as the root user."
    if gid == 0:
        return f"{PROG} should not be run with the root group."
    if controller_user:
        try:
            pw = pwd.getpwnam(controller_user)
        except KeyError:
            return None
        if pw.pw_uid == uid:
            return f"{PROG} should not be run as SlurmUser ({controller_user}, [controller] user)"
        if pw.pw_gid == gid:
            return f"{PROG} should not be run with SlurmUser's group."
    return None


def _controller_user() -> str:
    """``[controller] user`` of the config file the commands read ("" without one)."""
    from lingjun import config  # here: only at start-up, to refuse the controller's user
    from lingjun.endpoints import SYSTEM_CONF  # here: only at start-up, with config
    path = os.environ.get("LINGJUN_CONF") or (SYSTEM_CONF if os.path.exists(SYSTEM_CONF) else "")
    if not path:
        return ""
    return config.load(path).controller.user


async def _serve(api: RestApi, listens: list[str]) -> None:
    server = RestServer(api)
    try:
        for where in listens:
            await server.start(where)
        print(f"{PROG}: listening on {', '.join(listens)}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await server.close()
        await api.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Slurm's REST API (slurmrestd v0.0.38) for Lingjun")
    p.add_argument("listen", nargs="*", default=["127.0.0.1:6820"],
                   help="HOST:PORT or unix:/PATH (default 127.0.0.1:6820, slurmrestd's port)")
    p.add_argument("--controller", help="the controller's address (default: as the commands find it)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"{PROG}: %(message)s")
    try:
        refusal = refuse_identity(_controller_user())
    except Exception as e:  # noqa: BLE001 - a config it cannot read: its own words
        print(f"{PROG}: fatal: {e}", file=sys.stderr)
        return 1
    if refusal:
        print(f"{PROG}: fatal: {refusal}", file=sys.stderr)
        return 1
    for where in args.listen:
        if not where.startswith("unix:"):
            try:
                httpdoor.parse_address(where)
            except ValueError as e:
                print(f"{PROG}: error: {e}", file=sys.stderr)
                return 1
    try:
        api = RestApi(args.controller)
    except client.ControllerUnreachable as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    try:
        asyncio.run(_serve(api, args.listen))
    except OSError as e:
        print(f"{PROG}: error: cannot listen: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
