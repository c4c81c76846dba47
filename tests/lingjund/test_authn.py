"""Every SlurmApi call is authenticated, and the token, not the request, says who calls.

A real server on port 0 (its own loop in a thread) and real gRPC clients:
some sign their calls with the cluster's key (as the credential socket would
for them), some with another key, some not at all.
"""
from __future__ import annotations

import logging
import pwd
import socket
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lingjun import auth
from lingjun.admission import Admission, Budget
from lingjun.client import error_reason
from lingjun.config import LimitsConfig
from lingjun.v1 import api_pb2, api_pb2_grpc
from tests.lingjund import inproc
from tests.signing import SigningInterceptor, signed_channel, random_key

CONF = """
[[nodes]]
names = "node[1-2]"
cpus = 2
memory_mb = 2000
[[partitions]]
name = "debug"
nodes = "ALL"
"""
NOBODY = 65534
NOBODY_NAME = pwd.getpwuid(NOBODY).pw_name


@pytest.fixture
def served(tmp_path):
    """(address, cluster key, store) of a controller serving on port 0."""
    with inproc.serve(tmp_path, CONF) as s:
        yield s.address, s.key, s.store


def spec(**kw) -> api_pb2.JobSpec:
    base = dict(name="t", script="#!/bin/sh\ntrue\n", work_dir="/tmp", user="root", uid=0, gid=0,
                group="root", batch=True, min_nodes=2)   # 2 nodes that never register: it pends
    base.update(kw)
    return api_pb2.JobSpec(**base)


UNARY_CALLS = [
    pytest.param("SubmitJob", api_pb2.SubmitJobRequest(spec=spec()), id="sbatch"),
    pytest.param("GetJobs", api_pb2.GetJobsRequest(), id="squeue"),
    pytest.param("CancelJobs", api_pb2.CancelJobsRequest(job_ids=[1], requester_uid=0), id="scancel"),
    pytest.param("UpdateNode", api_pb2.UpdateNodeRequest(names=["node1"], state="DRAIN", reason="x"),
                 id="scontrol update node"),
    pytest.param("Ping", api_pb2.PingRequest(), id="ping"),
]


def _refused(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.UNAUTHENTICATED, auth.AUTH_ERROR)
    return e.value


@pytest.mark.parametrize("method,request_", UNARY_CALLS)
@pytest.mark.parametrize("how", ["no token", "token of another cluster", "expired token", "garbage token"])
def test_a_call_without_a_valid_token_is_refused_and_changes_nothing(served, method, request_, how):
    address, key, store = served
    submitted = api_pb2_grpc.SlurmApiStub(signed_channel(address, key)).SubmitJob(
        api_pb2.SubmitJobRequest(spec=spec()))
    assert submitted.job_id == 1
    before = store.dump()
    if how == "no token":
        ch = grpc.insecure_channel(address)
        md = ()
    elif how == "token of another cluster":
        ch = signed_channel(address, random_key())
        md = ()
    else:
        ch = grpc.insecure_channel(address)
        token = (auth.mint_token(key, 0, 0, ttl_s=5, now=time.time() - 60) if how == "expired token"
                 else "a.b.c")
        md = ((auth.TOKEN_METADATA, token),)
    _refused(lambda: getattr(api_pb2_grpc.SlurmApiStub(ch), method)(request_, metadata=md, timeout=10))
    assert store.dump() == before
    ch.close()


def test_streams_without_a_token_are_refused_before_anything_happens(served):
    address, _, store = served
    before = store.dump()
    stub = api_pb2_grpc.SlurmApiStub(grpc.insecure_channel(address))
    _refused(lambda: list(stub.RunStep(api_pb2.RunStepRequest(job_id=1, argv=["true"]), timeout=10)))
    _refused(lambda: list(stub.Allocate(iter([api_pb2.AllocationRequest(spec=spec(batch=False))]),
                                        timeout=10)))
    # sacct's stream, whose pages the transport sends as the history readers encoded them
    _refused(lambda: list(stub.GetAccounting(api_pb2.GetJobsRequest(), timeout=10)))
    assert store.dump() == before


def test_health_needs_no_token(served):
    address, _, _ = served
    with grpc.insecure_channel(address) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_a_job_belongs_to_the_token_not_to_the_uid_the_request_claims(served):
    address, key, store = served
    stub = api_pb2_grpc.SlurmApiStub(signed_channel(address, key, uid=NOBODY, gid=NOBODY))
    jid = stub.SubmitJob(api_pb2.SubmitJobRequest(spec=spec(user="root", uid=0, gid=0, group="root"))).job_id
    job = store.job(jid)
    assert (job.uid, job.user) == (NOBODY, NOBODY_NAME)
    info = stub.GetJobs(api_pb2.GetJobsRequest(job_ids=[jid])).jobs[0]
    assert (info.user, info.uid, info.gid) == (NOBODY_NAME, NOBODY, NOBODY)


def test_requester_fields_are_the_tokens(served):
    address, key, store = served
    as_nobody = api_pb2_grpc.SlurmApiStub(signed_channel(address, key, uid=NOBODY, gid=NOBODY))
    jid = as_nobody.SubmitJob(api_pb2.SubmitJobRequest(spec=spec())).job_id
    as_nobody.CancelJobs(api_pb2.CancelJobsRequest(job_ids=[jid], requester_uid=0))
    assert store.job(jid).cancelled_by == str(NOBODY)
    as_root = api_pb2_grpc.SlurmApiStub(signed_channel(address, key, uid=0, gid=0))
    as_root.UpdateNode(api_pb2.UpdateNodeRequest(names=["node1"], state="DRAIN", reason="fan",
                                                 requester_uid=NOBODY, requester="somebody-else"))
    assert store.node("node1").reason_user == "root"


def test_an_allocation_stream_belongs_to_the_token(served):
    address, key, store = served
    ch = grpc.intercept_channel(grpc.insecure_channel(address), SigningInterceptor(key, NOBODY, NOBODY))
    stub = api_pb2_grpc.SlurmApiStub(ch)
    done = threading.Event()

    def requests():
        yield api_pb2.AllocationRequest(spec=spec(batch=False, uid=0, user="root"))
        done.wait(10)

    events = stub.Allocate(requests(), timeout=10)
    first = next(events)
    assert first.WhichOneof("event") == "queued"
    job = store.job(first.queued.job_id)
    assert (job.uid, job.user) == (NOBODY, NOBODY_NAME)
    done.set()
    events.cancel()
    ch.close()


# -- a token is good only from the uid it names (loopback peers) ------------------------

def _connected_as(uid: int, port: int, host: str = "127.0.0.1"):
    """A child process of ``uid`` holding a loopback connection to ``port``:
    (pid, its port, the pipe end whose closing lets it go)."""
    import encodings.idna  # noqa: F401  (connect() needs it; the stdlib is root's alone)
    import os
    import socket as _socket
    up_r, up_w = os.pipe()          # child -> parent: its port
    go_r, go_w = os.pipe()          # parent -> child: EOF when done
    pid = os.fork()
    if pid == 0:
        try:
            os.close(up_r)
            os.close(go_w)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            c = _socket.create_connection((host, port))
            os.write(up_w, f"{c.getsockname()[1]}\n".encode())
            os.close(up_w)
            os.read(go_r, 1)        # hold the connection until the parent lets go
        finally:
            os._exit(0)
    os.close(up_w)
    os.close(go_r)
    text = os.read(up_r, 64)
    os.close(up_r)
    assert text, "the child could not connect"
    return pid, int(text.split()[0]), go_w


def test_a_loopback_token_must_come_from_the_uid_it_names():
    import os
    import socket as _socket
    from lingjund.transport.authn import peer_mismatch
    server = _socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    pid, client_port, go = _connected_as(NOBODY, port)
    try:
        peer = f"ipv4:127.0.0.1:{client_port}"
        assert peer_mismatch(peer, auth.Identity(NOBODY, NOBODY), port) is None
        assert peer_mismatch(peer, auth.Identity(0, 0), port) == \
            f"a token for uid 0 presented by a process of uid {NOBODY}"
        assert peer_mismatch(peer.replace("ipv4:127.0.0.1", "ipv6:[::ffff:127.0.0.1]"),
                             auth.Identity(1000, 1000), port) == \
            f"a token for uid 1000 presented by a process of uid {NOBODY}"
        # root's process may present anyone's token; remote and unix peers: the token alone
        own = _socket.create_connection(("127.0.0.1", port))
        assert peer_mismatch(f"ipv4:127.0.0.1:{own.getsockname()[1]}", auth.Identity(NOBODY, NOBODY),
                             port) is None
        own.close()
        assert peer_mismatch("ipv4:10.1.2.3:5555", auth.Identity(0, 0), port) is None
        assert peer_mismatch("unix:/run/x.sock", auth.Identity(0, 0), port) is None
        assert "connection gone" in peer_mismatch("ipv4:127.0.0.1:1", auth.Identity(0, 0), port)
    finally:
        os.close(go)
        os.waitpid(pid, 0)
        server.close()


def test_tokens_live_minutes_by_default():
    from lingjun.config import AuthConfig
    ttl = AuthConfig().token_ttl_s
    assert 60 <= ttl <= 300
    import jwt
    claims = jwt.decode(auth.mint_token(auth.ClusterKey.from_bytes(b"k" * 64), 1, 1, ttl, now=1000.0),
                        options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == ttl


def test_a_token_must_come_from_its_uid_on_this_hosts_own_address_too():
    """A caller on the controller's host that dials its external address is still on this host."""
    import os
    import socket as _socket
    import psutil
    from lingjund.transport.authn import peer_mismatch
    own = [a.address for e in psutil.net_if_addrs().values() for a in e
           if a.family == _socket.AF_INET and not a.address.startswith("127.")]
    if not own:
        pytest.skip("this host has no address but loopback")
    server = _socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen()
    port = server.getsockname()[1]
    pid, client_port, go = _connected_as(NOBODY, port, own[0])
    try:
        assert peer_mismatch(f"ipv4:{own[0]}:{client_port}", auth.Identity(0, 0), port) == \
            f"a token for uid 0 presented by a process of uid {NOBODY}"
    finally:
        os.close(go)
        os.waitpid(pid, 0)
        server.close()


def test_a_user_over_the_stream_limit_is_refused_in_slurms_words_and_others_are_not(tmp_path):
    """[limits] streams_per_user counts the token's user: nobody's fourth
    stream ends at once with RESOURCE_EXHAUSTED, while another user's stream
    and nobody's own unary calls are served; a stream that ends gives its
    place back."""
    def admitted(stream) -> bool:
        """A WatchJobs stream with nothing to report waits to its deadline once admitted."""
        with pytest.raises(grpc.RpcError) as e:
            next(stream)
        return e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    with inproc.serve(tmp_path, CONF + "[limits]\nstreams_per_user = 3\n") as s:
        nobody = api_pb2_grpc.SlurmApiStub(signed_channel(s.address, s.key, uid=NOBODY))
        other = api_pb2_grpc.SlurmApiStub(signed_channel(s.address, s.key, uid=NOBODY - 1))
        held = [nobody.WatchJobs(api_pb2.WatchRequest(), timeout=60) for _ in range(3)]
        time.sleep(1.0)              # the three are in the server's hands
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            next(nobody.WatchJobs(api_pb2.WatchRequest(), timeout=30))
        assert (e.value.code(), e.value.details()) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED, "Rate limit exceeded, please retry momentarily")
        assert time.monotonic() - t0 < 2
        assert nobody.Ping(api_pb2.PingRequest(), timeout=5).cluster
        assert admitted(other.WatchJobs(api_pb2.WatchRequest(), timeout=1))
        held.pop().cancel()
        time.sleep(0.5)
        assert admitted(nobody.WatchJobs(api_pb2.WatchRequest(), timeout=1))
        for stream in held:
            stream.cancel()


def test_calls_in_progress_at_the_command_socket_count_against_the_same_user_on_grpc(tmp_path):
    """One user's calls in progress are counted at every door together: with
    nobody's requests_per_user taken by calls at the command socket, nobody's
    gRPC call is refused at once in Slurm's words, another user's is served,
    and nobody's is served again once one of those calls ends."""
    doors = Admission(Budget.of(LimitsConfig(requests_per_user=2), nofile=65536), frozenset({0}),
                      logging.getLogger("test.admission"))
    with inproc.serve(tmp_path, CONF, admission=doors) as s:
        nobody = api_pb2_grpc.SlurmApiStub(signed_channel(s.address, s.key, uid=NOBODY))
        other = api_pb2_grpc.SlurmApiStub(signed_channel(s.address, s.key, uid=NOBODY - 1))
        assert [doors.begin(NOBODY), doors.begin(NOBODY)] == [None, None]   # the command socket's
        with pytest.raises(grpc.RpcError) as e:
            nobody.GetJobs(api_pb2.GetJobsRequest(), timeout=5)
        assert (e.value.code(), e.value.details()) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED, "Rate limit exceeded, please retry momentarily")
        assert error_reason(e.value) == "SLURMCTLD_COMMUNICATIONS_BACKOFF"
        assert other.GetJobs(api_pb2.GetJobsRequest(), timeout=5) is not None
        doors.end(NOBODY)
        assert nobody.GetJobs(api_pb2.GetJobsRequest(), timeout=5) is not None
        assert doors.calls_of(NOBODY) == 1, "the gRPC call gave its place back"


def test_grpc_connections_past_the_cap_are_closed_at_once_and_calls_go_on_after(tmp_path):
    """gRPC cannot tell whose a connection is before its first call: past
    [limits] grpc_connections core closes new ones at once (the descriptors
    stay bounded), and once those connections go, calls are served again."""
    with inproc.serve(tmp_path, CONF + "[limits]\ngrpc_connections = 4\n") as s:
        host, port = s.address.rsplit(":", 1)
        silent = [socket.create_connection((host, int(port))) for _ in range(12)]
        time.sleep(1.0)

        def closed(sock: socket.socket) -> bool:
            sock.setblocking(False)
            try:
                while data := sock.recv(65536):   # the server's HTTP/2 settings, if any
                    del data
                return True
            except BlockingIOError:
                return False
            except OSError:
                return True
        shut = sum(closed(sock) for sock in silent)
        for sock in silent:
            sock.close()
        assert shut >= 12 - 4 - 1, f"{shut} of 12 connections closed by a server capped at 4"
        # core counts a closed connection out only once it has read the close:
        # a new one made at once may still be turned away; within seconds it is served
        stub = api_pb2_grpc.SlurmApiStub(signed_channel(s.address, s.key, uid=NOBODY))
        deadline = time.monotonic() + 15
        while True:
            try:
                assert stub.Ping(api_pb2.PingRequest(), timeout=10, wait_for_ready=True).cluster
                break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
