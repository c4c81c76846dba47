"""The commands' common path over the local command socket, on a real local cluster.

sbatch, squeue and scancel reach the controller through the unix socket
beside the credential socket (lingjun/command_socket.py): no gRPC, asyncio,
TLS, JWT or protobuf in the command; the caller is who the kernel says
(SO_PEERCRED), whatever the request claims; a line that is not a request is
refused and reaches nothing. alice is a real account (``useradd``, removed
after) whose commands are real processes of hers, run by a system Python of
her reach (tests/e2e/users.py).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from lingjun.command_socket import commands_path
from tests.e2e import users as u
from tests.e2e.conftest import BIN, Cluster, wait_for

TAG = str(os.getpid() % 100000)
ALICE = f"ljcalice{TAG}"
# What a command must not load on its common path (issue 17): each costs more
# than Slurm's whole command.
HEAVY = ("grpc", "asyncio", "ssl", "_ssl", "jwt", "google")
# Slower to load than the work the command does: dataclasses (with inspect, ast,
# dis, tokenize) 6 ms, typing 2 ms, hostlist 2.6 ms. Type hints do without
# typing; a host list is expanded only where one is given. (socket and json
# are the command's own tools: with them come enum, re, functools, collections.)
SLOW = ("dataclasses", "inspect", "typing", "hostlist", "contextlib")


@pytest.fixture(scope="module")
def root_dir():
    assert os.geteuid() == 0, "making users and running commands as them needs root"
    d = u.world_readable_tmp("lj-cmdsock-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def alice(root_dir):
    user = u.add_user(ALICE, root_dir / "home" / ALICE)
    (root_dir / "home").chmod(0o755)
    try:
        yield user
    finally:
        u.remove_user(ALICE)


NODE9 = '[[nodes]]\nnames = "node9"\ncpus = 2\nmemory_mb = 2000\n'


@pytest.fixture(scope="module")
def cluster(root_dir, alice):
    extra = root_dir / "node9.toml"
    extra.write_text(NODE9)
    c = Cluster(root_dir / "cluster", nodes=2, cpus=2, up_args=("--extra-config", str(extra)))
    c.root.chmod(0o755)
    c.work.chmod(0o777)
    c.up()
    try:
        wait_for("node1 and node2 up", lambda: c.run(["sinfo", "-h", "-N", "-n", "node[1-2]", "-o", "%t"])
                 .stdout.split() == ["idle", "idle"], 30)   # node9 has no agent until its test
        yield c
    finally:
        c.down()


@pytest.fixture(scope="module")
def alice_bin(root_dir):
    return u.make_user_python(root_dir / "python")


def _sock(c: Cluster) -> str:
    return commands_path(c.info()["auth_socket"])


def startup_of(c: Cluster, python: str, command: str, run=None) -> set[str]:
    """What the interpreter's own start-up and the command's console-script
    wrapper load before any of our code: pip's wrapper imports re itself (to
    strip "-script.pyw" from argv[0]); the plain install's does not."""
    wrapper = open(command, encoding="utf-8").read().split("\nfrom ")[0]
    body = "; ".join(line for line in wrapper.splitlines()[1:] if line.startswith("import "))
    return loaded(c, python, "-c", body or "pass", run=run)[1]


def loaded(c: Cluster, python: str, command: str, *args: str, env=None, run=None):
    """(the command's result, the top-level modules it imported), from -X importtime."""
    argv = [python, "-X", "importtime", command, *args]
    p = run(argv) if run else c.run(argv, env=env)
    modules = {line.split("|")[-1].strip().split(".")[0]
               for line in p.stderr.splitlines() if line.startswith("import time:")}
    p.stderr = "".join(line + "\n" for line in p.stderr.splitlines()
                       if not line.startswith("import time:"))
    return p, modules


def ask(path: str, payload: bytes, close_write: bool = True) -> dict:
    """Send raw bytes to the command socket; its answer, decoded."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(40)
        s.connect(path)
        s.sendall(payload)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return json.loads(data)


def everything(c: Cluster) -> str:
    return c.run(["squeue", "-h", "-t", "all", "-o", "%i %T %u %j"], check=True).stdout


def test_the_common_path_loads_no_grpc_asyncio_tls_jwt_or_protobuf(cluster):
    c = cluster
    assert os.path.exists(_sock(c)), "the controller serves the command socket"
    py = sys.executable
    # what this interpreter's own start-up and pip's wrapper load (a dev install's
    # site imports typing; pip's wrapper imports re)
    startup = startup_of(c, py, f"{BIN}/sbatch")
    SLOW_HERE = tuple(set(SLOW) - startup)
    p, mods = loaded(c, py, f"{BIN}/sbatch", "--parsable", "-H", "-J", "light", "--wrap", "true")
    assert p.returncode == 0 and p.stdout.strip().isdigit(), p.stderr
    assert not mods & set(HEAVY + SLOW_HERE), f"sbatch imported {sorted(mods & set(HEAVY + SLOW_HERE))}"
    jid = p.stdout.strip()
    for args in ([], ["-j", jid], ["-u", "root"], ["-o", "%i %T %j"], ["-h", "-t", "all"]):
        q, mods = loaded(c, py, f"{BIN}/squeue", *args)
        assert q.returncode == 0, q.stderr
        assert not mods & set(HEAVY + SLOW_HERE), f"squeue {args} imported {sorted(mods & set(HEAVY + SLOW_HERE))}"
    for command, *args in (["sinfo"], ["scontrol", "ping"], ["scontrol", "show", "job", jid]):
        q, mods = loaded(c, py, f"{BIN}/{command}", *args)
        assert q.returncode == 0 and q.stdout, q.stderr
        # sinfo ranges node[1-2,9] itself; python-hostlist (which loads re and
        # collections) only for names it cannot (slurm._one_prefix_ranges)
        assert not mods & set(HEAVY + SLOW_HERE), f"{command} {args} imported {sorted(mods & set(HEAVY + SLOW_HERE))}"
    q, _ = loaded(c, py, f"{BIN}/squeue", "-h", "-j", jid, "-o", "%i %T %j %r")
    assert q.stdout.split() == [jid, "PENDING", "light", "JobHeldUser"]
    p, mods = loaded(c, py, f"{BIN}/scancel", jid)
    assert (p.returncode, p.stderr) == (0, "")
    assert not mods & set(HEAVY + SLOW_HERE), f"scancel imported {sorted(mods & set(HEAVY + SLOW_HERE))}"
    assert c.state_of(int(jid)) == "CANCELLED"


def test_errors_through_the_socket_are_slurms_words_and_exit_codes(cluster):
    c = cluster
    p, mods = loaded(c, sys.executable, f"{BIN}/squeue", "-j", "999999")
    assert (p.returncode, p.stderr.strip()) == (1, "slurm_load_jobs error: Invalid job id specified")
    assert "grpc" not in mods
    p, mods = loaded(c, sys.executable, f"{BIN}/sbatch", "-p", "nosuch", "--wrap", "true")
    assert p.returncode == 1
    assert p.stderr.splitlines() == ["sbatch: error: invalid partition specified: nosuch",
                                     "sbatch: error: Batch job submission failed: "
                                     "Invalid partition name specified"]
    assert "grpc" not in mods
    p, _ = loaded(c, sys.executable, f"{BIN}/scancel", "999999")
    assert (p.returncode, p.stderr.strip()) == (
        1, "scancel: error: Kill job error on job id 999999: Invalid job id specified")


def test_a_second_user_is_who_the_kernel_says_whatever_the_request_claims(cluster, alice, alice_bin):
    c = cluster
    env = u.user_env(alice, alice_bin, c.address, c.info()["auth_socket"])
    as_alice = lambda argv: u.run_as(alice, argv, env, cwd=c.work)   # noqa: E731
    p, mods = loaded(c, str(alice_bin / "python"), str(alice_bin / "sbatch"), "--parsable", "-H",
                     "--wrap", "true", run=as_alice)
    assert p.returncode == 0, p.stderr
    # the plain install: a venv of the system's python, a wrapper without re
    SLOW_HERE = tuple(set(SLOW) - startup_of(c, str(alice_bin / "python"), str(alice_bin / "sbatch"),
                                             run=as_alice))
    assert not mods & set(HEAVY + SLOW_HERE), \
        f"alice's sbatch imported {sorted(mods & set(HEAVY + SLOW_HERE))}"
    hers = p.stdout.strip()
    assert c.squeue(int(hers), "%u %U") == f"{alice.name} {alice.uid}"

    # A request that names root as the owner, sent by alice's own process: the
    # controller writes in what the kernel said.
    claim = ("import json, os, socket\n"
             "from lingjun import command_socket as c, messages as m\n"
             "req = m.SubmitJobRequest(client_token=os.urandom(8).hex())\n"
             "req.spec.script = '#!/bin/sh\\ntrue\\n'; req.spec.work_dir = os.getcwd()\n"
             "req.spec.uid = 0; req.spec.gid = 0; req.spec.user = 'root'; req.spec.hold = True\n"
             f"print(c.LocalApi({_sock(c)!r}).call('SubmitJob', req).job_id)\n")
    p = as_alice([str(alice_bin / "python"), "-c", claim])
    assert p.returncode == 0, p.stderr
    claimed = p.stdout.strip()
    assert c.squeue(int(claimed), "%u %U") == f"{alice.name} {alice.uid}"

    # root's held job: alice may not cancel it; her own she may.
    roots = str(c.sbatch("-H", "--wrap", "true"))
    p = as_alice([str(alice_bin / "scancel"), roots])
    assert p.returncode == 1
    assert p.stderr.strip() == f"scancel: error: Kill job error on job id {roots}: Access/permission denied"
    assert c.state_of(int(roots)) == "PENDING"
    p = as_alice([str(alice_bin / "scancel"), hers, claimed])
    assert (p.returncode, p.stderr) == (0, "")
    assert {c.state_of(int(hers)), c.state_of(int(claimed))} == {"CANCELLED"}
    c.run(["scancel", roots], check=True)


GARBAGE = [
    pytest.param(b"hello\n", id="not JSON"),
    pytest.param(b"\x00\xff\xfe\x80\n", id="not UTF-8"),
    pytest.param(b"[1, 2, 3]\n", id="JSON but not an object"),
    pytest.param(b'{"method": "SubmitJob"}\n', id="no request"),
    pytest.param(b'{"method": "DropAllJobs", "request": {}}\n', id="no such method"),
    pytest.param(b'{"method": "RunStep", "request": {}}\n', id="a streaming method"),
    pytest.param(b'{"method": "SubmitJob", "request": {"spec": {"min_nodes": "many"}}}\n',
                 id="a number that is text"),
    pytest.param(b'{"method": "SubmitJob", "request": {"spec": {"bogus": 1}}}\n',
                 id="an unknown field"),
    pytest.param(b'{"method": "SubmitJob", "request": {"spec": {"min_nodes": 99999999999}}}\n',
                 id="a number out of its field's range"),
    pytest.param(b'{"method": "CancelJobs", "request": {"job_ids": [1], "extra": 2}, "x": 1}\n',
                 id="an extra member"),
    pytest.param(b"[" * 100000 + b"]" * 100000 + b"\n", id="nesting deep enough to overflow"),
    pytest.param(b'{"method": "SubmitJob", "request": {"spec": ', id="cut short"),
]


@pytest.mark.parametrize("payload", GARBAGE)
def test_garbage_on_the_command_socket_is_refused_and_changes_nothing(cluster, payload):
    c = cluster
    c.sbatch("-H", "--wrap", "true")        # something that could be changed
    before = everything(c)
    answer = ask(_sock(c), payload)
    assert answer == {"error": {"code": "INVALID_ARGUMENT", "message": "Unable to decode the request"}}
    assert everything(c) == before
    p = c.run(["squeue", "-h", "-o", "%i"])
    assert p.returncode == 0, f"the controller still answers: {p.stderr}"


def test_a_request_the_api_refuses_gets_the_apis_words(cluster):
    c = cluster
    before = everything(c)
    req = {"method": "SubmitJob", "request": {"spec": {"script": "#!/bin/sh\n", "work_dir": "rel",
                                                        "batch": True}}}
    answer = ask(_sock(c), json.dumps(req).encode() + b"\n")
    assert answer == {"error": {"code": "INVALID_ARGUMENT",
                                "message": "The working directory must be an absolute path"}}
    assert everything(c) == before


def test_without_a_command_socket_the_commands_fall_back_to_grpc(cluster, tmp_path):
    """A host whose daemon serves credentials only (an older one): same answers, over gRPC."""
    c = cluster
    other = tmp_path / "auth.sock"
    other.symlink_to(c.info()["auth_socket"])       # credentials, but no command socket beside
    env = dict(c.env, LINGJUN_AUTH_SOCKET=str(other))
    p, mods = loaded(c, sys.executable, f"{BIN}/sbatch", "--parsable", "-H", "--wrap", "true", env=env)
    assert p.returncode == 0 and p.stdout.strip().isdigit(), p.stderr
    assert "grpc" in mods
    jid = p.stdout.strip()
    p = c.run(["squeue", "-h", "-j", jid, "-o", "%i %T"], env=env)
    assert p.stdout.split() == [jid, "PENDING"]
    assert c.run(["scancel", jid], env=env).returncode == 0
    assert c.state_of(int(jid)) == "CANCELLED"


def test_an_agent_serving_the_socket_relays_commands_as_the_kernels_caller(cluster, alice, alice_bin,
                                                                          root_dir):
    """A login node: its agent serves credentials and commands, and relays each
    call to the controller with a token minted for the uid the kernel named."""
    c = cluster
    sock = str(root_dir / "node9.sock")
    conf = root_dir / "node9-agent.toml"
    conf.write_text((c.state / "lingjun.toml").read_text()
                    .replace(c.info()["auth_socket"], sock)
                    .replace("[auth]\n", "[auth]\nagent_serves_socket = true\n"))
    log = open(root_dir / "node9.log", "ab")
    agent = subprocess.Popen([sys.executable, "-m", "lingjun_agent.daemon", "-c", str(conf),
                              "--node", "node9", "--state-dir", str(root_dir / "agent-node9"),
                              "--cpus", "2", "--memory-mb", "2000"],
                             stdout=log, stderr=subprocess.STDOUT, env=c.env)
    try:
        deadline = time.time() + 30
        while not os.path.exists(commands_path(sock)) and time.time() < deadline:
            time.sleep(0.1)
        assert os.path.exists(commands_path(sock)), (root_dir / "node9.log").read_text()[-2000:]
        env = u.user_env(alice, alice_bin, "127.0.0.1:1", sock)   # no reachable gRPC address
        as_alice = lambda argv: u.run_as(alice, argv, env, cwd=c.work)   # noqa: E731
        SLOW_HERE = tuple(set(SLOW) - startup_of(c, str(alice_bin / "python"),
                                                 str(alice_bin / "sbatch"), run=as_alice))
        p, mods = loaded(c, str(alice_bin / "python"), str(alice_bin / "sbatch"), "--parsable",
                         "-H", "--wrap", "true", run=as_alice)
        assert p.returncode == 0, p.stderr
        assert not mods & set(HEAVY + SLOW_HERE), f"sbatch imported {sorted(mods & set(HEAVY + SLOW_HERE))}"
        jid = p.stdout.strip()
        assert c.squeue(int(jid), "%u %U %T") == f"{alice.name} {alice.uid} PENDING"
        p = as_alice([str(alice_bin / "squeue"), "-h", "-j", jid, "-o", "%i %u"])
        assert p.stdout.split() == [jid, alice.name], p.stderr
        roots = str(c.sbatch("-H", "--wrap", "true"))
        p = as_alice([str(alice_bin / "scancel"), roots, jid])
        assert p.returncode == 1
        assert p.stderr.strip() == f"scancel: error: Kill job error on job id {roots}: Access/permission denied"
        assert (c.state_of(int(roots)), c.state_of(int(jid))) == ("PENDING", "CANCELLED")
        c.run(["scancel", roots], check=True)
        # A call the controller refuses comes back in its words through the relay.
        p = as_alice([str(alice_bin / "squeue"), "-j", "999999"])
        assert (p.returncode, p.stderr.strip()) == (1, "slurm_load_jobs error: Invalid job id specified")
    finally:
        agent.terminate()
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait(10)
        log.close()


def test_a_read_too_large_for_json_is_asked_again_over_grpc(cluster):
    """Thousands of rows decode faster in protobuf's C code than in JSON: the
    controller says so instead of answering, and squeue asks over gRPC."""
    from lingjun import messages
    from lingjun.command_socket import LocalApi
    from lingjun.command_server import LARGE_REPLY_BYTES
    c = cluster
    n = 3000
    bulk = messages.SubmitJobsRequest()
    for i in range(n):
        job = bulk.jobs.add(client_token=f"bulk-{TAG}-{i}")
        job.spec.script, job.spec.work_dir, job.spec.hold = "#!/bin/sh\ntrue\n", str(c.work), True
        job.spec.name = "bulk"
    reply = LocalApi(_sock(c)).call("SubmitJobs", bulk)
    ids = sorted(r.job.job_id for r in reply.results)
    assert len(ids) == n and all(ids), [r.error for r in reply.results if r.error][:3]
    try:
        p, mods = loaded(c, sys.executable, f"{BIN}/squeue", "-h", "-n", "bulk", "-o", "%i %j %T %u")
        assert p.returncode == 0, p.stderr
        assert len(p.stdout) > LARGE_REPLY_BYTES / 4
        assert sorted(int(line.split()[0]) for line in p.stdout.splitlines()) == ids
        assert {tuple(line.split()[1:]) for line in p.stdout.splitlines()} == {("bulk", "PENDING", "root")}
        assert "grpc" in mods, "the large reply came over gRPC"
        p, mods = loaded(c, sys.executable, f"{BIN}/squeue", "-h", "-j", str(ids[0]), "-o", "%i")
        assert p.stdout.split() == [str(ids[0])] and "grpc" not in mods, "small ones stay on the socket"
    finally:
        c.run(["scancel", "-n", "bulk"], check=True)
