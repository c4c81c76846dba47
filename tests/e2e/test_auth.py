"""Who gets in, end to end: agents prove the cluster key, users are who the kernel says.

A real local cluster of two nodes, with a third node (node9) in the
configuration that no legitimate agent serves: the tests bring their own
agents and raw gRPC streams to it.
"""
from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import pytest

from lingjun import auth
from lingjun.v1 import agent_pb2, agent_pb2_grpc, api_pb2, api_pb2_grpc
from tests.e2e.conftest import Cluster, _free_port

NODE9 = '[[nodes]]\nnames = "node9"\ncpus = 2\nmemory_mb = 2000\n'
NOBODY = 65534


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("auth")
    extra = root / "node9.toml"
    extra.write_text(NODE9)
    # The credential socket in a directory every user may enter (pytest's tmp is root's alone).
    sockdir = tempfile.mkdtemp(prefix="lingjun-e2e-auth-")
    os.chmod(sockdir, 0o755)
    c = Cluster(root, nodes=2)
    c.sockdir = sockdir
    c.run(["lingjun", "up", "--nodes", "2", "--cpus", "2", "--state-dir", str(c.state), "--port", str(c.port),
           "--kill-wait", "2", "--extra-config", str(extra), "--auth-socket", f"{sockdir}/auth.sock"],
          check=True, timeout=90)
    try:
        yield c
    finally:
        c.down()
        shutil.rmtree(sockdir, ignore_errors=True)


def _log(c: Cluster, name: str) -> str:
    return (c.state / "logs" / f"{name}.log").read_text(errors="replace")


def _wait_log(c: Cluster, name: str, words: str, timeout: float = 15) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = _log(c, name)
        if words in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{name}.log: want {words!r} within {timeout}s, got:\n{_log(c, name)[-2000:]}")


def _node_state(c: Cluster, node: str) -> str:
    return c.run(["sinfo", "-h", "-N", "-n", node, "-o", "%t"]).stdout.strip()


def _agent(c: Cluster, conf: Path, node: str, log: Path) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "lingjun_agent.daemon", "-c", str(conf), "--node", node,
                                 "--state-dir", str(c.root / f"agent-{node}"), "--cpus", "2",
                                 "--memory-mb", "2000"], stdout=f, stderr=subprocess.STDOUT, env=c.env)


def _stop(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(10)


def test_an_agent_with_a_wrong_key_is_refused_logged_and_never_sent_work(cluster):
    c = cluster
    wrong = c.root / "wrong.key"
    auth.write_key(wrong)
    conf = c.state / "lingjun.toml"
    wrong_conf = c.root / "wrong.toml"
    wrong_conf.write_text(conf.read_text().replace(str(c.state / "cluster.key"), str(wrong)))
    marker = c.work / "ran-on-node9"
    jid = c.sbatch("-w", "node9", "--wrap", f"touch {marker}")
    rogue_log = c.root / "rogue.log"
    rogue = _agent(c, wrong_conf, "node9", rogue_log)
    try:
        # The agent, checking the controller's proof first, refuses it: each side
        # sees the other does not hold its key, and nothing goes further.
        hung_up = "(node 'node9'): it hung up without proving the cluster key"
        text = _wait_log(c, "lingjund", hung_up)
        assert "refused agent stream from ipv4:127.0.0.1:" in text
        time.sleep(2.5)                   # it retries (reconnect_max_s=2): still refused
        assert _log(c, "lingjund").count(hung_up) >= 2
        assert "did not prove it holds the cluster key" in rogue_log.read_text()
        assert "node=node9 registered" not in _log(c, "lingjund")
        assert _node_state(c, "node9") in ("unk", "unk*"), "node9 left UNKNOWN"
        assert c.state_of(jid) == "PENDING"
        assert not marker.exists()
    finally:
        _stop(rogue)
    # The same agent with the cluster's key joins, and the job it was never sent runs now.
    # It also serves credentials for its node's users (as on a login node).
    node_sock = f"{c.sockdir}/node9.sock"
    good_conf = c.root / "good.toml"
    good_conf.write_text(conf.read_text().replace(f"{c.sockdir}/auth.sock", node_sock)
                         .replace("[auth]\n", "[auth]\nagent_serves_socket = true\n"))
    good = _agent(c, good_conf, "node9", c.root / "good.log")
    try:
        c.wait_state(jid, "COMPLETED", timeout=30)
        assert marker.exists()
        p = c.run(["squeue", "-h", "-j", str(jid), "-t", "all", "-o", "%T"],
                  env=dict(c.env, LINGJUN_AUTH_SOCKET=node_sock))
        assert (p.returncode, p.stdout.strip()) == (0, "COMPLETED"), p.stderr
    finally:
        _stop(good)


async def _stream(address: str, node: str = "node9"):
    ch = grpc.aio.insecure_channel(address)
    call = agent_pb2_grpc.AgentServiceStub(ch).Connect()
    await call.write(agent_pb2.AgentMessage(auth_hello=agent_pb2.AuthHello(
        node_name=node, nonce=auth.new_nonce())))
    first = await call.read()
    assert first.WhichOneof("msg") == "auth_challenge", f"want a challenge first, got {first}"
    return ch, call, first.auth_challenge.nonce


async def _refused_after(call, *msgs) -> None:
    """Send ``msgs``; the controller must end the stream UNAUTHENTICATED without a word."""
    try:
        for m in msgs:
            await call.write(m)     # fails once the controller has ended the stream
        got = await call.read()
        raise AssertionError(f"want UNAUTHENTICATED, got a message: {got}")
    except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
        pass
    assert (await call.code(), await call.details()) == (grpc.StatusCode.UNAUTHENTICATED, auth.AUTH_ERROR)


def _proof(key, nonce, node="node9", time_ms=None):
    t = int(time.time() * 1000) if time_ms is None else time_ms
    return agent_pb2.AgentMessage(auth_proof=agent_pb2.AuthProof(
        node_name=node, nonce=nonce, time_ms=t, mac=auth.proof_mac(key, nonce, node, t)))


def _register(node="node9"):
    return agent_pb2.AgentMessage(register=agent_pb2.Register(node_name=node))


def test_replayed_missing_and_stale_handshakes_are_refused_and_logged(cluster):
    c = cluster
    key = auth.ClusterKey.load(c.state / "cluster.key")   # the eavesdropper saw a real proof
    start = len(_log(c, "lingjund"))

    async def go():
        ch, call, nonce = await _stream(c.address)
        captured = _proof(key, nonce)
        await call.write(captured)        # the genuine handshake, then the agent goes away
        call.cancel()
        await ch.close()
        ch, call, _ = await _stream(c.address)
        await _refused_after(call, captured, _register())     # replayed on a new stream
        await ch.close()
        ch, call, _ = await _stream(c.address)
        await _refused_after(call, _register())               # no proof at all
        await ch.close()
        ch, call, nonce = await _stream(c.address)
        stale = _proof(key, nonce, time_ms=int((time.time() - 3600) * 1000))
        await _refused_after(call, stale, _register())        # a clock an hour behind
        await ch.close()

    asyncio.run(go())
    text = _log(c, "lingjund")[start:]
    assert "the proof answers another challenge (replayed handshake)" in text
    assert "sent register before proving the cluster key" in text
    assert "clock skew" in text
    assert "registered" not in text, f"a refused stream registered a node:\n{text}"


# -- the agent's side: only a controller that proves the key is obeyed ---------------

def _agent_to(c: Cluster, address: str, node: str, log: Path) -> subprocess.Popen:
    """An agent with the cluster's own key and config, told to use ``address`` as its controller."""
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "lingjun_agent.daemon", "-c", str(c.state / "lingjun.toml"),
                                 "--node", node, "--controller", address,
                                 "--state-dir", str(c.root / f"agent-{node}-{log.stem}"), "--cpus", "2",
                                 "--memory-mb", "2000"], stdout=f, stderr=subprocess.STDOUT, env=c.env)


def _wait_text(path: Path, words: str, timeout: float = 15) -> str:
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if words in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{path.name}: want {words!r} within {timeout}s, got:\n{text[-2000:]}")


REFUSES_CONTROLLER = "did not prove it holds the cluster key"


def test_an_agent_refuses_a_real_controller_started_with_another_key(cluster):
    c = cluster
    other = c.root / "other-cluster"
    other.mkdir()
    auth.write_key(other / "cluster.key")
    port = _free_port()
    conf = other / "lingjun.toml"
    conf.write_text(NODE9 + f'[controller]\nlisten = "127.0.0.1:{port}"\nstate_dir = "{other / "state"}"\n'
                    f'[auth]\nkey_file = "{other / "cluster.key"}"\nsocket = "{other / "auth.sock"}"\n')
    ctl_log = other / "lingjund.log"
    with open(ctl_log, "ab") as f:
        ctl = subprocess.Popen([sys.executable, "-m", "lingjund.daemon", "-c", str(conf)], env=c.env,
                               stdout=f, stderr=subprocess.STDOUT)
    agent_log = other / "node9.log"
    try:
        _wait_text(ctl_log, "listening on")
        agent = _agent_to(c, f"127.0.0.1:{port}", "node9", agent_log)
        try:
            text = _wait_text(agent_log, REFUSES_CONTROLLER)
            assert f"controller at 127.0.0.1:{port} did not prove it holds the cluster key (wrong " \
                   f"controller MAC" in text
            # the other controller saw an agent hang up on it, and registered nothing
            _wait_text(ctl_log, "(node 'node9'): it hung up without proving the cluster key")
            time.sleep(2.5)                   # the agent retries (reconnect_max_s=2): still refused
            assert agent_log.read_text().count(REFUSES_CONTROLLER) >= 2
            assert "registered" not in agent_log.read_text() + ctl_log.read_text()
        finally:
            _stop(agent)
    finally:
        _stop(ctl)


class _Impostor(agent_pb2_grpc.AgentServiceServicer):
    """A controller without the key that accepts any agent at once and sends it work
    unasked: the challenge (its MAC a guess), a welcome and a batch job, then waits."""

    def __init__(self, marker: Path):
        self.marker = marker

    def Connect(self, request_iterator, context):
        threading.Thread(target=lambda: [None for _ in request_iterator], daemon=True).start()
        yield agent_pb2.ControllerMessage(auth_challenge=agent_pb2.AuthChallenge(
            nonce=auth.new_nonce(), controller_mac=b"\0" * 32))
        yield agent_pb2.ControllerMessage(register_reply=agent_pb2.RegisterReply(
            accepted=True, heartbeat_interval_s=5))
        yield agent_pb2.ControllerMessage(launch_batch=agent_pb2.LaunchBatch(
            job_id=4242, script=f"#!/bin/sh\ntouch {self.marker}\n", environment={"PATH": "/usr/bin:/bin"},
            work_dir="/tmp", stdout_path="/dev/null", uid=0, gid=0, user="root"))
        deadline = time.time() + 20
        while context.is_active() and time.time() < deadline:
            time.sleep(0.1)


def test_an_agent_runs_nothing_an_impostor_controller_sends(cluster):
    from concurrent import futures
    c = cluster
    marker = c.root / "impostor-ran-this"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    agent_pb2_grpc.add_AgentServiceServicer_to_server(_Impostor(marker), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    log = c.root / "impostor-agent.log"
    agent = _agent_to(c, f"127.0.0.1:{port}", "node9", log)
    try:
        text = _wait_text(log, REFUSES_CONTROLLER)
        time.sleep(1.0)                   # time enough to have started a script, had it obeyed
        text = log.read_text()
        assert not marker.exists(), "the agent ran a job an impostor controller sent"
        assert "registered" not in text and "job=4242" not in text, text
    finally:
        _stop(agent)
        server.stop(0)


def test_sbatch_makes_the_callers_job_whatever_the_client_claims(cluster):
    c = cluster
    # An sbatch whose idea of its user is a lie: the job is still the caller's (root's).
    lying = ("import sys, lingjun.slurm as slurm\n"
             "slurm.current_user = lambda: ('alice', 4242, 4242, 'alice')\n"
             "from cli import sbatch\n"
             "sys.exit(sbatch.main(['--parsable', '--hold', '--wrap', 'true']))\n")
    p = c.run([sys.executable, "-c", lying], check=True)
    jid = int(p.stdout.strip().split(";")[0])
    assert c.squeue(jid, "%u %U") == "root 0"
    c.run(["scancel", str(jid)], check=True)


def _token_as(uid: int, gid: int, socket_path: str) -> str:
    """A credential asked for by a process that is ``uid`` (a forked child that drops to it)."""
    from lingjun import credential
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.write(w, credential.fetch_token(socket_path).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode()


def test_a_users_job_is_theirs_by_the_kernels_word(cluster):
    c = cluster
    token = _token_as(NOBODY, NOBODY, f"{c.sockdir}/auth.sock")
    assert token, "nobody got no credential from the socket"
    spec = api_pb2.JobSpec(name="claims-root", script="#!/bin/sh\ntrue\n", work_dir="/tmp", hold=True,
                           batch=True, user="root", uid=0, gid=0, group="root")
    with grpc.insecure_channel(c.address) as ch:
        r = api_pb2_grpc.SlurmApiStub(ch).SubmitJob(api_pb2.SubmitJobRequest(spec=spec), timeout=10,
                                                    metadata=((auth.TOKEN_METADATA, token),))
    name = pwd.getpwuid(NOBODY).pw_name
    assert c.squeue(r.job_id, "%u %U") == f"{name} {NOBODY}"
    c.run(["scancel", str(r.job_id)], check=True)


def test_commands_inside_a_job_use_the_nodes_credential_socket(cluster):
    """The submit host's socket path means nothing on a node: the agent gives the job its own."""
    c = cluster
    out = c.work / "inside.out"
    jid = c.sbatch("--export=ALL,LINGJUN_AUTH_SOCKET=/nonexistent/auth.sock", "-o", str(out),
                   "--wrap", 'echo "$LINGJUN_AUTH_SOCKET"; squeue -h -j "$SLURM_JOB_ID" -o %T')
    c.wait_state(jid, ("COMPLETED", "FAILED"), timeout=30)
    assert out.read_text().split() == [f"{c.sockdir}/auth.sock", "RUNNING"]


def test_a_command_without_a_credential_fails_in_slurms_words(cluster):
    c = cluster
    env = dict(c.env, LINGJUN_AUTH_SOCKET=str(c.root / "no-such.sock"))
    before = c.run(["squeue", "-h", "-t", "all", "-o", "%i"], check=True).stdout
    p = c.run(["sbatch", "--wrap", "true"], env=env)
    assert p.returncode != 0
    assert "sbatch: error: Batch job submission failed: Protocol authentication error" in p.stderr
    assert "cannot get a credential from" in p.stderr
    p = c.run(["squeue"], env=env)
    assert p.returncode != 0 and "Protocol authentication error" in p.stderr
    assert c.run(["squeue", "-h", "-t", "all", "-o", "%i"], check=True).stdout == before


# -- TLS --------------------------------------------------------------------------------

def _self_signed(where: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lingjund test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    return cert_path, key_path


def test_an_agent_joins_and_runs_a_job_over_tls(tmp_path):
    c = Cluster(tmp_path, nodes=1)
    cert, key = _self_signed(tmp_path)
    c.run(["lingjun", "up", "--nodes", "1", "--cpus", "2", "--state-dir", str(c.state), "--port", str(c.port),
           "--kill-wait", "2", "--tls-cert", str(cert), "--tls-key", str(key)], check=True, timeout=90)
    try:
        assert _node_state(c, "node1") == "idle"
        jid = c.sbatch("--wrap", "echo over-tls")
        c.wait_state(jid, "COMPLETED", timeout=30)
        # The port speaks TLS only: a plaintext client with a valid token does not get through.
        token = auth.mint_token(auth.ClusterKey.load(c.state / "cluster.key"), 0, 0, 60)
        with grpc.insecure_channel(c.address) as ch:
            with pytest.raises(grpc.RpcError) as e:
                api_pb2_grpc.SlurmApiStub(ch).Ping(api_pb2.PingRequest(), timeout=3,
                                                   metadata=((auth.TOKEN_METADATA, token),))
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        c.down()
