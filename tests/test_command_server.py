"""The command socket's protocol, both ends in one process: a real unix socket,
the real server (lingjun/command_server.py) over a stand-in answer, the real
client (lingjun/command_socket.py). The controller's and an agent's answers
are exercised end to end in tests/e2e/test_command_socket.py."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
import time

import pytest

from lingjun import auth, credential, messages
from lingjun.admission import Admission, Budget
from lingjun.config import LimitsConfig
from lingjun.credential import CredentialServer
from lingjun.command_server import LARGE_REPLY_BYTES, CommandSocketServer, Refusal
from lingjun.command_socket import (CommandApi, ControllerError, LargeReply, LocalApi,
                                    SocketUnavailable, commands_path)
from lingjun.endpoints import ControllerUnreachable
from lingjun.v1 import api_pb2

KEY = auth.ClusterKey.from_bytes(b"k" * 64)


async def _answer(method, request, who):
    if method == "Ping":               # who asked, as the kernel said
        return api_pb2.PingResponse(cluster=f"{who.uid}:{who.gid}", now=2 ** 40)
    if method == "GetJobs":            # as many jobs as asked for, encoded as the controller keeps them
        n = request.job_ids[0] if request.job_ids else 1
        return api_pb2.GetJobsResponse(jobs=[api_pb2.JobInfo(job_id=i + 1, name="j" * 40)
                                             for i in range(n)]).SerializeToString()
    if method == "CancelJobs":
        raise Refusal("NOT_FOUND", "Invalid job id specified")
    if method == "HoldJobs":
        raise OSError("controller gone")
    raise AssertionError(method)


def _serve(tmp_path, client):
    """Run ``client(auth_socket_path)`` in a thread while the server answers."""
    auth_sock = str(tmp_path / "auth.sock")

    async def main():
        server = CommandSocketServer(auth_sock, _answer, 1 << 20)
        await server.start()
        try:
            return await asyncio.get_running_loop().run_in_executor(None, client, auth_sock)
        finally:
            await server.close()
    return asyncio.run(main())


def test_the_command_socket_sits_beside_the_credential_socket():
    assert commands_path("/run/lingjun/auth.sock") == "/run/lingjun/auth.commands.sock"
    assert commands_path("/tmp/sock") == "/tmp/sock.commands"


def test_a_reply_its_refusal_and_an_unreachable_controller(tmp_path):
    def client(auth_sock):
        api = LocalApi(commands_path(auth_sock))
        ping = api.call("Ping", messages.PingRequest())
        with pytest.raises(ControllerError) as refused:
            api.call("CancelJobs", messages.CancelJobsRequest(job_ids=[5]))
        with pytest.raises(ControllerUnreachable):
            api.call("HoldJobs", messages.HoldJobsRequest(job_ids=[5]))
        return ping, refused.value
    ping, refused = _serve(tmp_path, client)
    assert (ping.cluster, ping.now) == (f"{os.getuid()}:{os.getgid()}", 2 ** 40)
    assert (refused.code().name, refused.details()) == ("NOT_FOUND", "Invalid job id specified")


def test_a_large_read_is_sent_to_grpc_and_a_small_one_answered(tmp_path):
    def client(auth_sock):
        api = LocalApi(commands_path(auth_sock))
        small = api.call("GetJobs", messages.GetJobsRequest(job_ids=[3]))
        with pytest.raises(LargeReply):
            api.call("GetJobs", messages.GetJobsRequest(job_ids=[LARGE_REPLY_BYTES // 40]))
        return small
    small = _serve(tmp_path, client)
    assert [j.job_id for j in small.jobs] == [1, 2, 3]


def test_without_a_served_socket_the_command_would_use_grpc(tmp_path):
    with pytest.raises(SocketUnavailable):
        LocalApi(str(tmp_path / "none.commands.sock")).call("Ping", messages.PingRequest())
    api = CommandApi(str(tmp_path / "auth.sock"))
    assert api.local is not None and api._grpc is None    # nothing imported or dialled yet


@pytest.mark.parametrize("payload", [b"\n", b"{}\n", b'{"method": "Ping"}\n', b"\xff\n",
                                     b'{"method": "Ping", "request": {"nope": 1}}\n'])
def test_a_line_that_is_no_request_is_refused(tmp_path, payload):
    def client(auth_sock):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(commands_path(auth_sock))
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            return s.makefile("rb").read()
    assert _serve(tmp_path, client) == (b'{"error":{"code":"INVALID_ARGUMENT",'
                                        b'"message":"Unable to decode the request"}}\n')


# -- what one user may hold (lingjun/admission.py) --------------------------------------
# The suite runs as root, whom the daemon does not limit per user: these
# servers' admissions privilege nobody, so the test's own uid is an ordinary one.

def _admission(**limits) -> Admission:
    return Admission(Budget.of(LimitsConfig(**limits), nofile=65536), frozenset(),
                     logging.getLogger("test.admission"))


def _serve_limited(tmp_path, client, admission, answer=_answer):
    """``_serve`` with ``admission`` at the command socket and a credential
    socket beside it that shares it, as a daemon's two doors do."""
    auth_sock = str(tmp_path / "auth.sock")

    async def main():
        creds = CredentialServer(KEY, auth_sock, 60, admission)
        commands = CommandSocketServer(auth_sock, answer, 1 << 20, admission)
        await creds.start()
        await commands.start()
        try:
            return await asyncio.get_running_loop().run_in_executor(None, client, auth_sock)
        finally:
            await commands.close()
            await creds.close()
    return asyncio.run(main())


def _connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(path)
    return s


def _read_all(s: socket.socket) -> bytes:
    """What the daemon wrote, to its end: the kernel's reset (a refusal
    closed with the request unread) comes after the refusal's line."""
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


BUSY = b'{"error":{"code":"RESOURCE_EXHAUSTED","message":"Rate limit exceeded, please retry momentarily"}}\n'


def test_a_user_over_the_connection_limit_is_answered_busy_at_once_then_served_again(tmp_path, caplog):
    admission = _admission(connections_per_user=3)

    def client(auth_sock):
        path = commands_path(auth_sock)
        idle = [_connect(path) for _ in range(3)]
        t0 = time.monotonic()
        refused = [_read_all(_connect(path)) for _ in range(200)]
        refused_in = time.monotonic() - t0
        with pytest.raises(ControllerError) as busy:      # the command's retries, then its error
            LocalApi(path).call("Ping", messages.PingRequest())
        with pytest.raises(credential.CredentialBusy):     # the credential socket counts them too
            credential.fetch_token(auth_sock)
        held = admission.connections_of(os.getuid())
        idle.pop().close()
        time.sleep(0.2)
        served = LocalApi(path).call("Ping", messages.PingRequest())
        for s in idle:
            s.close()
        return refused, refused_in, busy.value, held, served

    with caplog.at_level(logging.WARNING, "test.admission"):
        refused, refused_in, busy, held, served = _serve_limited(tmp_path, client, admission)
    assert set(refused) == {BUSY} and refused_in < 5, (set(refused), refused_in)
    assert (busy.code().name, busy.details()) == (
        "RESOURCE_EXHAUSTED", "Rate limit exceeded, please retry momentarily")
    assert held == 3
    assert served.cluster == f"{os.getuid()}:{os.getgid()}"
    lines = [r.getMessage() for r in caplog.records]
    assert 1 <= len(lines) <= 3, lines            # not one line per refused connection
    assert lines[0].startswith("refused 1 connections at the command socket of uid")


def test_a_connection_that_says_nothing_is_closed_after_the_first_byte_timeout(tmp_path):
    admission = _admission(first_byte_timeout_s=0.3)

    def client(auth_sock):
        s = _connect(commands_path(auth_sock))
        t0 = time.monotonic()
        answer = _read_all(s)
        return answer, time.monotonic() - t0, admission.open
    answer, took, still_open = _serve_limited(tmp_path, client, admission)
    assert answer == b"" and 0.2 < took < 3, (answer, took)
    assert still_open == 0


def test_a_user_over_the_concurrent_call_limit_is_refused_at_once(tmp_path):
    admission = _admission(requests_per_user=1)
    in_service = threading.Event()

    async def slow(method, request, who):
        in_service.set()
        await asyncio.sleep(0.5)
        return api_pb2.PingResponse(cluster=str(who.uid))

    def client(auth_sock):
        path = commands_path(auth_sock)
        line = b'{"method":"Ping","request":{}}\n'
        first = _connect(path)
        first.sendall(line)
        assert in_service.wait(5)
        second = _connect(path)
        second.sendall(line)
        return _read_all(second), _read_all(first)
    second, first = _serve_limited(tmp_path, client, admission, slow)
    assert second == BUSY
    assert json.loads(first) == {"reply": {"cluster": str(os.getuid())}}


def test_one_users_half_sent_requests_hold_at_most_twice_the_largest_request(tmp_path):
    """Past that a further request of hers is answered busy; bytes of
    requests answered or abandoned are given back."""
    admission = _admission()

    def client(auth_sock):
        path = commands_path(auth_sock)
        part = b'{"method":"Ping","request":{"x":"' + b"y" * (1 << 20)     # no end of line
        begun = []
        for _ in range(3):
            s = _connect(path)
            s.sendall(part)
            begun.append(s)
        time.sleep(0.5)                         # read by the daemon, counted
        over = _connect(path)
        try:
            over.sendall(part + part)
        except OSError:
            pass                               # refused before it was all read
        refused = _read_all(over)
        for s in begun:
            s.close()
        time.sleep(0.5)
        return refused, admission.bytes_of(os.getuid())

    auth_sock = str(tmp_path / "auth.sock")

    async def main():
        commands = CommandSocketServer(auth_sock, _answer, 1 << 20, admission)   # lines to 2 MiB
        await commands.start()
        try:
            return await asyncio.get_running_loop().run_in_executor(None, client, auth_sock)
        finally:
            await commands.close()
    refused, still_held = asyncio.run(main())
    assert refused == BUSY
    assert still_held == 0
