"""The command socket's protocol, both ends in one process: a real unix socket,
the real server (lingjun/command_server.py) over a stand-in answer, the real
client (lingjun/command_socket.py). The controller's and an agent's answers
are exercised end to end in tests/e2e/test_command_socket.py."""
from __future__ import annotations

import asyncio
import os
import socket

import pytest

from lingjun import messages
from lingjun.command_server import LARGE_REPLY_BYTES, CommandSocketServer, Refusal
from lingjun.command_socket import (CommandApi, ControllerError, LargeReply, LocalApi,
                                    SocketUnavailable, commands_path)
from lingjun.endpoints import ControllerUnreachable
from lingjun.v1 import api_pb2


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
