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
sbatch's own option table (cli/sbatch.py), so REST and sbatch accept and
refuse alike. Errors come back as slurmrestd answers them: HTTP 500 and
``errors: [{error, errno}]`` (or the ``description, error_number, error,
source`` form where slurmrestd uses it), with Slurm's words and number.

The HTTP server is the standard library's (``http.server``, a thread per
request): the API is read-mostly and its clients few (portals, dashboards,
scripts); each thread spends its time waiting on the controller's gRPC
reply, which releases the GIL. No framework is installed for it.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import pwd
import signal
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import grpc

from cli import formats_json
from cli.common import CommandError
from lingjun import auth, client, slurm
from lingjun.endpoints import RPC_TIMEOUT_S, controller_address, tls_ca
from lingjun.v1 import api_pb2, api_pb2_grpc

PROG = "lingjun restd"
PREFIX = "/slurm/v0.0.38/"
OPENAPI = Path(__file__).with_name("openapi_v0.0.38.json")
MAX_BODY = 16 * 1024 * 1024

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

# v0.0.38 job properties -> the sbatch option each one is (None: the value is
# the option's argument; a callable: the argument made from the value).
_FLAG = object()


def _minutes(v: Any) -> str:
    return str(int(v))


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


def _token_uid(token: str) -> int | None:
    """The uid a token claims (not verified here: the controller verifies it)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return int(claims["uid"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None


def caller_token(headers: dict[str, str]) -> str:
    """The user's token from slurmrestd's headers; RestError 401 without one,
    or when X-SLURM-USER-NAME names someone else than the token."""
    token = headers.get("x-slurm-user-token", "")
    name = headers.get("x-slurm-user-name", "")
    if not token:
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
        text = how(value) if callable(how) else str(value)
        argv.append(f"{option}={text}")
    env = job.get("environment") or {}
    if isinstance(env, list):        # ["NAME=value", ...] (v0.0.36's form) is taken too
        env = dict(e.split("=", 1) for e in env if "=" in e)
    if not isinstance(env, dict):
        raise RestError(500, [error_entry("Invalid environment", 22)])
    cwd = str(job.get("current_working_directory") or "/tmp")
    return argv, {str(k): str(v) for k, v in env.items()}, cwd


class RestApi:
    """The endpoints, as functions of (method, path, query, headers, body) ->
    (HTTP status, document). One gRPC channel to the controller; each call
    carries its caller's token."""

    def __init__(self, address: str | None = None, ca_file: str | None = None):
        self.address = address or controller_address()
        options = [("grpc.max_receive_message_length", 256 * 1024 * 1024), ("grpc.enable_retries", 0)]
        ca_file = tls_ca() if ca_file is None else ca_file
        if ca_file:
            creds = grpc.ssl_channel_credentials(root_certificates=Path(ca_file).read_bytes())
            self.channel = grpc.secure_channel(self.address, creds, options=options)
        else:
            self.channel = grpc.insecure_channel(self.address, options=options)
        self.stub = api_pb2_grpc.SlurmApiStub(self.channel)
        self._cluster = ""

    # -- calls --------------------------------------------------------------------
    def _call(self, token: str, method: str, request, source: str = ""):
        try:
            return getattr(self.stub, method)(request, timeout=RPC_TIMEOUT_S,
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

    def _cluster_name(self, token: str) -> str:
        if not self._cluster:
            self._cluster = self._call(token, "Ping", api_pb2.PingRequest()).cluster
        return self._cluster

    @staticmethod
    def _doc(**body) -> dict:
        return {"meta": formats_json.meta(), "errors": [], **body}

    # -- endpoints ----------------------------------------------------------------
    def ping(self, token: str, query: dict) -> dict:
        r = self._call(token, "Ping", api_pb2.PingRequest())
        return self._doc(pings=[{"hostname": r.controller_host.split(".")[0], "ping": "UP",
                                 "status": 0, "mode": "primary"}])

    def diag(self, token: str, query: dict) -> dict:
        r = self._call(token, "Ping", api_pb2.PingRequest())
        jobs = self._call(token, "GetJobs", api_pb2.GetJobsRequest(all_states=True)).jobs
        count = {s: 0 for s in (slurm.PENDING, slurm.RUNNING, slurm.COMPLETED, slurm.CANCELLED,
                                slurm.FAILED)}
        for j in jobs:
            if j.state in count:
                count[j.state] += 1
        return self._doc(statistics={
            "parts_packed": 1, "req_time": r.now, "req_time_start": r.now,
            "server_thread_count": threading.active_count(), "agent_queue_size": 0,
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

    def jobs(self, token: str, query: dict) -> dict:
        reply = self._call(token, "GetJobs", api_pb2.GetJobsRequest(all_states=True))
        return formats_json.squeue_document(reply.jobs, self._cluster_name(token))

    @staticmethod
    def _job_id(text: str, source: str) -> int:
        try:
            job_id = int(text)
            if job_id > 0:
                return job_id
        except ValueError:
            pass
        raise RestError(500, [{"description": f"Unable to find JobId={text}", "error_number": 2017,
                               "error": "Invalid job id specified", "source": source}])

    def job(self, token: str, query: dict, job_id: str) -> dict:
        jid = self._job_id(job_id, "slurm_load_job")
        missing = RestError(500, [{"description": f"Unable to find JobId={jid}", "error_number": 2017,
                                   "error": "Invalid job id specified", "source": "slurm_load_job"}])
        try:
            reply = self._call(token, "GetJobs", api_pb2.GetJobsRequest(job_ids=[jid], all_states=True))
        except RestError as e:
            raise missing if e.errors[0].get("errno") == 2017 else e from None
        jobs = [j for j in reply.jobs if j.job_id == jid or j.array_job_id == jid]
        if not jobs:
            raise missing
        return formats_json.squeue_document(jobs, self._cluster_name(token))

    def cancel(self, token: str, query: dict, job_id: str) -> dict:
        jid = self._job_id(job_id, "slurm_kill_job")
        sig = (query.get("signal") or [""])[0]
        signum = 0
        if sig:
            try:
                signum = int(sig) if sig.isdigit() else int(signal.Signals(
                    sig if sig.startswith("SIG") else "SIG" + sig))
            except (KeyError, ValueError):
                raise RestError(500, [error_entry("Invalid signal", 22)]) from None
        def refused(text: str) -> RestError:
            return RestError(500, [{
                "description": f"unable to kill JobId={jid} with signal {signum or 9}: {text}",
                "error_number": ERRNO_BY_TEXT.get(text, -1), "error": text, "source": "slurm_kill_job"}])
        try:
            reply = self._call(token, "CancelJobs", api_pb2.CancelJobsRequest(job_ids=[jid], signal=signum))
        except RestError as e:
            raise (refused(e.errors[0]["error"]) if e.status == 500 else e) from None
        for r in reply.results:
            if not r.ok:
                raise refused(r.error)
        return self._doc()

    def submit(self, token: str, query: dict, body: Any) -> dict:
        from cli import sbatch      # its option table: the only parser of job options
        if not isinstance(body, dict):
            raise RestError(500, [error_entry("Unable to parse query", 22)])
        script = body.get("script")
        if not script:
            raise RestError(500, [{"error_code": 2009, "error": "Job script not specified"}])
        job = body.get("job") or {}
        if body.get("jobs"):
            raise RestError(500, [error_entry("Requested operation not supported on this system")])
        if not isinstance(job, dict):
            raise RestError(500, [error_entry("Unable to parse query", 22)])
        argv, env, cwd = submit_argv(job)
        args = job.get("argv") or []
        try:
            parsed = sbatch.parse_args([*argv], str(script), env, cwd)
        except CommandError as e:
            text = str(e).split("\n")[0]
            for prefix in ("sbatch: error: Batch job submission failed: ", "sbatch: error: "):
                if text.startswith(prefix):
                    text = text[len(prefix):]
                    break
            raise RestError(500, [error_entry(text)]) from None
        req = parsed.request
        req.spec.argv.extend(str(a) for a in args[1:])
        # who submits is the token's user (the controller writes it in); these
        # are placeholders the controller overwrites
        reply = self._call(token, "SubmitJob", _protobuf(req))
        return self._doc(job_id=reply.job_id, step_id="BATCH", job_submit_user_msg="")

    def nodes(self, token: str, query: dict) -> dict:
        nodes = self._call(token, "GetNodes", api_pb2.GetNodesRequest()).nodes
        return self._doc(nodes=[formats_json.node_dict(n) for n in
                                sorted(nodes, key=lambda n: slurm.natural_key(n.name))])

    def node(self, token: str, query: dict, name: str) -> dict:
        nodes = [n for n in self._call(token, "GetNodes", api_pb2.GetNodesRequest()).nodes
                 if n.name == name]
        if not nodes:
            raise RestError(500, [error_entry("Invalid node name specified")])
        return self._doc(nodes=[formats_json.node_dict(nodes[0])])

    def partitions(self, token: str, query: dict, name: str | None = None) -> dict:
        parts = self._call(token, "GetPartitions", api_pb2.GetPartitionsRequest()).partitions
        if name is not None:
            parts = [p for p in parts if p.name == name]
            if not parts:
                raise RestError(500, [error_entry("Invalid partition name specified")])
        return self._doc(partitions=[formats_json.partition_dict(p) for p in parts])

    # -- routing --------------------------------------------------------------------
    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, str, str]:
        """(HTTP status, content type, body) for one request."""
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
            if method == "POST":
                try:
                    data = json.loads(body.decode() or "null")
                except (UnicodeDecodeError, json.JSONDecodeError):
                    raise RestError(500, [error_entry("Unable to parse query", 22)]) from None
                doc = fn(token, query, data, *args)
            else:
                doc = fn(token, query, *args)
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


def _protobuf(request):
    from lingjun import messages
    return messages.to_protobuf(request) if isinstance(request, messages.Message) else request


# -- the HTTP server ---------------------------------------------------------------------


def _handler(api: RestApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "lingjun-restd"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.send_error(413)
                return
            body = self.rfile.read(length) if length else b""
            status, ctype, text = api.handle(self.command, self.path, dict(self.headers.items()), body)
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve

        def address_string(self) -> str:     # a unix socket's peer has no host
            return self.client_address[0] if isinstance(self.client_address, tuple) else "unix"

        def log_message(self, fmt: str, *args) -> None:
            sys.stderr.write(f"{PROG}: {self.address_string()} {fmt % args}\n")

    return Handler


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        conn, _ = super().get_request()
        return conn, ("unix", 0)


def make_server(listen: str, api: RestApi) -> socketserver.BaseServer:
    """A server on ``HOST:PORT`` or ``unix:/PATH`` (slurmrestd's two forms)."""
    handler = _handler(api)
    if listen.startswith("unix:"):
        path = listen[len("unix:"):]
        if os.path.exists(path):
            os.unlink(path)
        server = UnixHTTPServer(path, handler)
        os.chmod(path, 0o666)        # every user may call; who they are is their token
        return server
    host, _, port = listen.rpartition(":")
    server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Slurm's REST API (slurmrestd v0.0.38) for Lingjun")
    p.add_argument("listen", nargs="*", default=["127.0.0.1:6820"],
                   help="HOST:PORT or unix:/PATH (default 127.0.0.1:6820, slurmrestd's port)")
    p.add_argument("--controller", help="the controller's address (default: as the commands find it)")
    args = p.parse_args(argv)
    try:
        api = RestApi(args.controller)
    except client.ControllerUnreachable as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    servers = [make_server(listen, api) for listen in args.listen]
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print(f"{PROG}: listening on {', '.join(args.listen)}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=servers[0].shutdown).start())
    try:
        servers[0].serve_forever()
    except KeyboardInterrupt:
        pass
    for s in servers:
        s.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
