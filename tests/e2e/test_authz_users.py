"""Real users on a real local cluster: who may do what, and jobs run as their owner.

Creates three users with ``useradd``: alice, bob and an operator (``lingjun
up --operator``, that is ``[authz] operators``). Their names carry this
process's pid, so that parallel runs do not collide, and they are removed
afterwards, even on failure.

The commands run as those users as real processes with the user's groups,
gid and uid (as ``runuser`` does), through a venv of the system's
``/usr/bin/python3`` that runs this tree (``tests/e2e/users.py``): the
suite's own interpreter lives below /root, which other users cannot enter.
(They were once forked from the test process and switched ids there; a
fork of a process holding gRPC's threads can hang in the child, and did.)
What the controller sees: a connection from a process of that uid whose
request says so. The jobs themselves are started by the agent (root) as
their owner; their scripts use only /bin/sh and coreutils.
"""
from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster
from tests.e2e.users import make_user_python

TAG = str(os.getpid() % 100000)
ALICE, BOB, OPER, GROUP = f"ljalice{TAG}", f"ljbob{TAG}", f"ljop{TAG}", f"ljgrp{TAG}"


def _useradd(name: str, *extra: str) -> None:
    subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", *extra, name], check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def users():
    assert os.geteuid() == 0, "creating users and running jobs as them needs root"
    made: list[str] = []
    try:
        subprocess.run(["groupadd", GROUP], check=True, capture_output=True)
        for name in (ALICE, BOB, OPER):
            _useradd(name, "-G", GROUP) if name == ALICE else _useradd(name)
            made.append(name)
        yield {n: pwd.getpwnam(n) for n in made}
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", GROUP], capture_output=True)


@pytest.fixture(scope="module")
def cluster(users):
    # Not below pytest's tmp dir: that is root's alone, and the jobs' users must
    # reach their scripts and work dirs.
    root = Path(tempfile.mkdtemp(prefix="lj-authz-", dir="/tmp"))
    root.chmod(0o755)
    c = Cluster(root, nodes=2, cpus=2)
    c.user_bin = make_user_python(root / "python")
    c.run(["lingjun", "up", "--nodes", "2", "--cpus", "2", "--state-dir", str(c.state),
           "--port", str(c.port), "--kill-wait", "1", "--operator", OPER],
          check=True, timeout=90)
    for name, pw in users.items():
        d = c.work / name
        d.mkdir()
        os.chown(d, pw.pw_uid, pw.pw_gid)
    c.work.chmod(0o755)
    try:
        c.wait_nodes_up()
        yield c
    finally:
        c.down()
        shutil.rmtree(root, ignore_errors=True)


def as_user(c: Cluster, user: str, command: str, *args: str, umask: int = 0o022):
    """Run ``command`` (sbatch, scancel, scontrol...) as ``user``; (rc, stdout, stderr)."""
    argv = [str(c.user_bin / command), *args]
    return _run_as(c, user, argv, umask=umask)


def _run_as(c: Cluster, user: str, argv: list[str], umask: int = 0o022,
            extra_env: dict[str, str] | None = None):
    pw = pwd.getpwnam(user)
    env = dict(PATH=f"{c.user_bin}:/usr/bin:/bin", HOME=str(c.work / user), USER=user,
               LOGNAME=user, LANG="C.UTF-8", LINGJUN_CONTROLLER=c.address,
               LINGJUN_AUTH_SOCKET=str(c.state / "auth.sock"), **(extra_env or {}))
    p = subprocess.Popen(argv, env=env, cwd=str(c.work / user), user=pw.pw_uid,
                         group=pw.pw_gid, extra_groups=os.getgrouplist(user, pw.pw_gid),
                         umask=umask, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"{argv} as {user} did not end within 60 s\n"
                             f"stdout:\n{out}\nstderr:\n{err}") from None
    return p.returncode, out, err


def sbatch(c: Cluster, user: str, *args: str, umask: int = 0o022) -> int:
    rc, out, err = as_user(c, user, "sbatch", "--parsable", *args, umask=umask)
    assert rc == 0, f"sbatch as {user}: rc {rc}\n{err}"
    return int(out.strip())


def test_alices_job_runs_as_alice_with_her_groups_and_umask(cluster, users):
    jid = sbatch(cluster, ALICE, "--wrap", "id; touch made-by-job", umask=0o027)
    assert cluster.wait_state(jid, ("COMPLETED", "FAILED"), timeout=30) == "COMPLETED"
    out = cluster.work / ALICE / f"slurm-{jid}.out"
    text = cluster.wait_file(out, contains="uid=")
    a = users[ALICE]
    want = (f"uid={a.pw_uid}({ALICE}) gid={a.pw_gid}({grp.getgrgid(a.pw_gid).gr_name}) "
            f"groups=")
    assert text.startswith(want), f"want {want!r}..., got {text!r}"
    assert f"({GROUP})" in text, f"want the supplementary group {GROUP} in {text!r}"
    for f in (out, cluster.work / ALICE / "made-by-job"):
        st = f.stat()
        assert (st.st_uid, oct(st.st_mode & 0o777)) == (a.pw_uid, oct(0o640)), f


def test_alice_cannot_cancel_bobs_job_root_and_the_operator_can(cluster):
    first = sbatch(cluster, BOB, "--hold", "--wrap", "true")
    second = sbatch(cluster, BOB, "--hold", "--wrap", "true")
    rc, out, err = as_user(cluster, ALICE, "scancel", str(first))
    assert (rc, err) == (1, f"scancel: error: Kill job error on job id {first}: "
                            f"Access/permission denied\n")
    assert cluster.state_of(first) == "PENDING"
    rc, _, err = as_user(cluster, OPER, "scancel", str(first))
    assert (rc, err) == (0, "")
    root = cluster.run(["scancel", str(second)])
    assert (root.returncode, root.stderr) == (0, "")
    for jid in (first, second):
        assert cluster.wait_state(jid, "CANCELLED", timeout=10)


def test_alice_sees_bobs_job_but_cannot_release_or_update_it(cluster):
    jid = sbatch(cluster, BOB, "--hold", "--wrap", "true")
    rc, out, _ = as_user(cluster, ALICE, "squeue", "-h", "-j", str(jid), "-o", "%i %u %T")
    assert (rc, out) == (0, f"{jid} {BOB} PENDING\n")          # squeue shows everyone's jobs
    rc, _, err = as_user(cluster, ALICE, "scontrol", "release", str(jid))
    assert (rc, err) == (1, f"Access/permission denied for job {jid}\n")
    rc, _, err = as_user(cluster, ALICE, "scontrol", "update", f"JobId={jid}", "Comment=mine")
    assert (rc, err) == (1, f"Access/permission denied for job {jid}\n")
    assert cluster.squeue(jid, "%T %r") == "PENDING JobHeldUser"
    cluster.run(["scancel", str(jid)], check=True)


def test_only_the_operator_drains_a_node(cluster):
    rc, _, err = as_user(cluster, ALICE, "scontrol", "update", "NodeName=node1", "State=DRAIN",
                         "Reason=alice-was-here")
    assert (rc, err) == (1, "slurm_update error: Invalid user id\n")
    assert cluster.run(["sinfo", "-h", "-n", "node1", "-o", "%t"]).stdout.strip() == "idle"
    rc, _, err = as_user(cluster, OPER, "scontrol", "update", "NodeName=node1", "State=DRAIN",
                         "Reason=maintenance")
    assert (rc, err) == (0, "")
    assert cluster.run(["sinfo", "-h", "-n", "node1", "-o", "%t"]).stdout.strip() == "drain"
    rc, _, err = as_user(cluster, OPER, "scontrol", "update", "NodeName=node1", "State=RESUME")
    assert (rc, err) == (0, "")


def test_alice_cannot_read_bobs_script_bob_can(cluster):
    jid = sbatch(cluster, BOB, "--hold", "--wrap", "echo bobs-secret")
    rc, out, err = as_user(cluster, ALICE, "scontrol", "write", "batch_script", str(jid), "-")
    assert (rc, out, err) == (1, "", "job script retrieval failed: Access/permission denied\n")
    assert not (cluster.work / ALICE / f"slurm-{jid}.sh").exists()
    rc, out, err = as_user(cluster, BOB, "scontrol", "write", "batch_script", str(jid))
    assert (rc, out) == (0, f"batch script for job {jid} written to slurm-{jid}.sh\n"), err
    assert "echo bobs-secret" in (cluster.work / BOB / f"slurm-{jid}.sh").read_text()
    cluster.run(["scancel", str(jid)], check=True)


def test_alice_cannot_read_bobs_job_output_bob_and_the_operator_can(cluster):
    """lingjun logs relays the output file from the batch node's agent, which
    reads it as root: the controller must refuse whoever does not own the job."""
    jid = sbatch(cluster, BOB, "--wrap", "echo bobs-output")
    assert cluster.wait_state(jid, ("COMPLETED", "FAILED"), timeout=30) == "COMPLETED"
    rc, out, err = as_user(cluster, ALICE, "lingjun", "logs", str(jid))
    assert (rc, out, err) == (1, "", "lingjun logs: error: Access/permission denied\n")
    rc, out, err = as_user(cluster, ALICE, "lingjun", "logs", "-f", str(jid))
    assert (rc, out, err) == (1, "", "lingjun logs: error: Access/permission denied\n")
    for user in (BOB, OPER):
        rc, out, err = as_user(cluster, user, "lingjun", "logs", str(jid))
        assert (rc, out, err) == (0, "bobs-output\n", ""), user


def test_output_where_alice_may_not_write_fails_by_her_own_rights(cluster):
    secret = cluster.root / "root-only"
    secret.mkdir(mode=0o700, exist_ok=True)
    link = cluster.work / ALICE / "sneaky"
    link.symlink_to(secret)                                 # a symlink does not lend root's rights
    for target in (f"{secret}/out.txt", f"{link}/out.txt", "../../root-only/out.txt"):
        jid = sbatch(cluster, ALICE, "-o", target, "--wrap", "echo leaked")
        assert cluster.wait_state(jid, ("COMPLETED", "FAILED"), timeout=30) == "FAILED", target
    assert list(secret.iterdir()) == []


def test_only_the_operator_reconfigures(cluster):
    rc, out, err = as_user(cluster, ALICE, "scontrol", "reconfigure")
    assert (rc, out, err) == (1, "", "slurm_reconfigure error: Invalid user id\n")
    rc, out, err = as_user(cluster, OPER, "scontrol", "reconfigure")
    assert (rc, out, err) == (0, "", "")


def test_a_negative_nice_is_the_operators_alone(cluster):
    def jobs() -> str:
        return cluster.run(["squeue", "-h", "-t", "all", "-o", "%i %y"]).stdout

    before = jobs()
    rc, out, err = as_user(cluster, ALICE, "sbatch", "--nice=-1000", "--wrap", "true")
    # the anchor's Slurm 22.05 says so to a user's sbatch --nice=-5
    assert (rc, out, err) == (1, "", "sbatch: error: Batch job submission failed: Invalid --nice value\n")
    assert jobs() == before
    jid = sbatch(cluster, ALICE, "--hold", "--nice=10", "--wrap", "true")
    rc, _, err = as_user(cluster, ALICE, "scontrol", "update", f"JobId={jid}", "Nice=-5")
    assert (rc, err) == (1, f"Access/permission denied for job {jid}\n")
    assert cluster.squeue(jid, "%y") == "10"
    rc, _, err = as_user(cluster, ALICE, "scontrol", "update", f"JobId={jid}", "Nice=5")
    assert (rc, err) == (0, "")                      # lowering her own job's priority is hers
    rc, _, err = as_user(cluster, OPER, "scontrol", "update", f"JobId={jid}", "Nice=-5")
    assert (rc, err) == (0, "")
    assert cluster.squeue(jid, "%y") == "-5"
    op = sbatch(cluster, OPER, "--hold", "--nice=-1000", "--wrap", "true")
    assert cluster.squeue(op, "%y") == "-1000"
    cluster.run(["scancel", str(jid), str(op)], check=True)


def _python_as(c: Cluster, user: str, code: str, **env: str) -> tuple[int, str]:
    """Run Python ``code`` as ``user`` with the user's interpreter; (0, what it printed) or
    (1, "CODE: details") for a refused gRPC call."""
    wrapper = ("import grpc, sys\n"
               "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) +
               "except grpc.RpcError as e:\n"
               "    print(f'{e.code().name}: {e.details()}', end=''); sys.exit(1)\n")
    rc, out, err = _run_as(c, user, [str(c.user_bin / "python"), "-c", wrapper], extra_env=env)
    assert rc in (0, 1), err
    return rc, out


def test_a_leaked_token_is_refused_from_any_other_user(cluster):
    """bob holds a token alice's process got (leaked through her job's environment, say):
    presented from bob's process it is refused, and alice's job stays as it was."""
    from lingjun import auth
    jid = sbatch(cluster, ALICE, "--hold", "--wrap", "true")
    sock = str(cluster.state / "auth.sock")
    code, token = _python_as(cluster, ALICE, "from lingjun import credential\n"
                                             f"print(credential.fetch_token({sock!r}), end='')")
    assert code == 0 and token, token
    cancel = ("import os\n"
              "from lingjun import auth\n"
              "from lingjun.v1 import api_pb2, api_pb2_grpc\n"
              f"with grpc.insecure_channel({cluster.address!r}) as ch:\n"
              "    reply = api_pb2_grpc.SlurmApiStub(ch).CancelJobs(\n"
              f"        api_pb2.CancelJobsRequest(job_ids=[{jid}]), timeout=10,\n"
              "        metadata=((auth.TOKEN_METADATA, os.environ['LEAKED_TOKEN']),))\n"
              "print('ok' if all(r.ok for r in reply.results) else reply, end='')")
    assert _python_as(cluster, BOB, cancel, LEAKED_TOKEN=token) == \
        (1, f"UNAUTHENTICATED: {auth.AUTH_ERROR}")
    assert cluster.squeue(jid, "%T %r") == "PENDING JobHeldUser"
    log = (cluster.state / "logs" / "lingjund.log").read_text()
    bob = pwd.getpwnam(BOB).pw_uid
    assert f"a token for uid {pwd.getpwnam(ALICE).pw_uid} presented by a process of uid {bob}" in log
    # the same token in alice's own hands still works
    assert _python_as(cluster, ALICE, cancel, LEAKED_TOKEN=token) == (0, "ok")
    cluster.wait_state(jid, "CANCELLED", timeout=10)


def test_alices_job_writes_its_checkpoint_dir_past_the_private_state(cluster):
    """The controller's state dir is root's alone (0700); a job's checkpoint dir is not in it."""
    jid = sbatch(cluster, ALICE, "--wrap",
                 'echo step1 > "$LINGJUN_CHECKPOINT_DIR/ckpt" && touch "$LINGJUN_HEARTBEAT_FILE" '
                 '&& cat "$LINGJUN_CHECKPOINT_DIR/ckpt"')
    assert cluster.wait_state(jid, ("COMPLETED", "FAILED"), timeout=30) == "COMPLETED", \
        (cluster.work / ALICE / f"slurm-{jid}.out").read_text()
    assert cluster.wait_file(cluster.work / ALICE / f"slurm-{jid}.out", contains="step1")
