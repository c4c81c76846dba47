"""The compiled commands and the command runner, on a real local cluster.

``lingjun install-commands DIR`` compiles lingjun/command_client.c; each
command there hands its argv, environment, umask, stdio and working
directory to the command runner (lingjun/command_runner.py, started by
``lingjun up``), whose forked child runs the Python command as the caller.
Most commands here are built with a fallback interpreter that does not
exist (``fast``): one that works went through the runner, and one that the
runner refuses fails with "cannot run /nonexistent/python3". ``slow`` is
built with the suite's interpreter and shows the fallback working.
The other user is a real account (``useradd``, removed after).
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
from datetime import datetime

import psutil
import pytest

from lingjun.command_runner import CallerGone, _caller, runner_path
from tests.e2e import users as u
from tests.e2e.conftest import Cluster, wait_for

TAG = str(os.getpid() % 100000)
BOB = f"ljcrbob{TAG}"
NO_PYTHON = "/nonexistent/python3"


@pytest.fixture(scope="module")
def root_dir():
    assert os.geteuid() == 0, "making users and running commands as them needs root"
    d = u.world_readable_tmp("lj-cmdrun-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def bob(root_dir):
    (root_dir / "home").mkdir(mode=0o755)
    user = u.add_user(BOB, root_dir / "home" / BOB)
    try:
        yield user
    finally:
        u.remove_user(BOB)


@pytest.fixture(scope="module")
def cluster(root_dir):
    c = Cluster(root_dir / "cluster", nodes=2, cpus=2)
    c.root.chmod(0o755)
    c.work.chmod(0o777)
    yield from c.serving()


@pytest.fixture(scope="module")
def bobs_runner(cluster, bob, root_dir):
    """A runner on an interpreter bob can read (the cluster's is under /root,
    whose library bob cannot read: that runner refuses him)."""
    python = u.make_user_python(root_dir / "python") / "python"
    path = str(root_dir / "bob.runner.sock")
    with open(root_dir / "bob-runner.log", "wb") as log:
        p = subprocess.Popen([str(python), "-m", "lingjun.command_runner", "--socket", path],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for("bob's runner listening", lambda: os.path.exists(path), 30)
        yield p, path
    finally:
        p.terminate()
        p.wait(10)


def _bobs_env(c: Cluster, bob, fast, bobs_runner) -> dict[str, str]:
    return dict(u.user_env(bob, fast, c.address, _auth(c)), LINGJUN_RUNNER_SOCKET=bobs_runner[1])


def _install(c: Cluster, where, *extra: str):
    c.run(["lingjun", "install-commands", str(where), *extra], check=True)
    return where


@pytest.fixture(scope="module")
def fast(cluster, root_dir):
    return _install(cluster, root_dir / "fast", "--python", NO_PYTHON)


@pytest.fixture(scope="module")
def slow(cluster, root_dir):
    return _install(cluster, root_dir / "slow")


def _auth(c: Cluster) -> str:
    return c.info()["auth_socket"]


def _runner_pid(c: Cluster) -> int:
    return c.info()["processes"]["command-runner"]["pid"]


def test_install_links_each_quick_command_to_one_client(fast):
    names = sorted(p.name for p in fast.iterdir())
    assert names == sorted(["lingjun-command-client", "sacct", "sacctmgr", "sbatch", "scancel",
                            "scontrol", "sinfo", "sprio", "squeue", "sshare"])
    assert os.readlink(fast / "sbatch") == "lingjun-command-client"
    p = subprocess.run([str(fast / "lingjun-command-client")], capture_output=True, text=True)
    assert p.returncode == 2 and "install it under a command's name" in p.stderr


def test_a_command_runs_as_its_caller_in_the_callers_directory_with_the_callers_environment(
        cluster, bob, fast, bobs_runner):
    c = cluster
    script = bob.home / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH -J mine\nid -un\necho \"$FOO\"\npwd\n")
    os.chown(script, bob.uid, bob.gid)
    script.chmod(0o700)                   # only bob may read it
    env = dict(_bobs_env(c, bob, fast, bobs_runner), FOO="bar baz")
    p = u.run_as(bob, [str(fast / "sbatch"), "--parsable", "-o", "out-%j.txt", "job.sh"], env,
                 cwd=bob.home)
    assert p.returncode == 0, p.stderr
    job = int(p.stdout.strip())
    assert c.squeue(job, "%u %j") == f"{bob.name} mine"
    c.wait_state(job, "COMPLETED")
    out = bob.home / f"out-{job}.txt"
    assert c.wait_file(out, contains=str(bob.home)).splitlines() == [bob.name, "bar baz",
                                                                     str(bob.home)]
    assert out.stat().st_uid == bob.uid


def test_the_caller_reads_only_what_it_may(cluster, bob, fast, bobs_runner, root_dir):
    c = cluster
    secret = root_dir / "secret.sh"
    secret.write_text("#!/bin/sh\ntrue\n")
    secret.chmod(0o600)                   # root's: the runner is root, its child is bob
    env = _bobs_env(c, bob, fast, bobs_runner)
    before = c.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout
    p = u.run_as(bob, [str(fast / "sbatch"), str(secret)], env, cwd=bob.home)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == f"sbatch: error: Unable to open file {secret}\n"
    assert c.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout == before


def test_umask_and_time_zone_are_the_callers(cluster, fast):
    c = cluster
    env = dict(c.env, PATH=f"{fast}:{c.env['PATH']}")
    p = c.run(f"umask 027; {fast}/sbatch --parsable -o umask-%j.out --wrap 'echo $SLURM_UMASK'",
              env=env, check=True)
    job = int(p.stdout.strip())
    c.wait_state(job, "COMPLETED")
    assert c.wait_file(c.work / f"umask-{job}.out", contains="0").strip() == "0027"

    def submitted(tz: str) -> datetime:
        q = c.run([str(fast / "squeue"), "-h", "-t", "all", "-j", str(job), "-o", "%V"],
                  env=dict(env, TZ=tz), check=True)
        return datetime.fromisoformat(q.stdout.strip())
    assert (submitted("Asia/Shanghai") - submitted("UTC")).total_seconds() == 8 * 3600


def test_stdin_stdout_and_exit_codes_are_the_callers(cluster, fast):
    c = cluster
    env = dict(c.env, PATH=f"{fast}:{c.env['PATH']}")
    p = c.run([str(fast / "sbatch"), "--parsable", "-o", "stdin-%j.out"],
              input="#!/bin/sh\necho from stdin\n", env=env, check=True)
    job = int(p.stdout.strip())
    c.wait_state(job, "COMPLETED")
    assert c.wait_file(c.work / f"stdin-{job}.out", contains="from").strip() == "from stdin"
    p = c.run(f"{fast}/squeue -t all | head -1", env=env)
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout.split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES",
                                "NODELIST(REASON)"]
    # the same words, streams and status as the Python commands
    for argv in (["scancel", "99999999"], ["squeue", "--bogus"], ["sbatch", "--bogus"],
                 ["sinfo", "-h", "-o", "%P %D %t"], ["scontrol", "show", "job", "99999999"],
                 ["squeue", "-h", "-t", "all", "-j", str(job), "-o", "%i %T %j"]):
        fast_p = c.run([str(fast / argv[0]), *argv[1:]], env=env)
        python_p = c.run(argv)
        assert (fast_p.returncode, fast_p.stdout, fast_p.stderr) == \
            (python_p.returncode, python_p.stdout, python_p.stderr), argv


def test_a_caller_who_cannot_read_the_runners_interpreter_gets_the_python_command(
        cluster, bob, fast):
    c = cluster            # the cluster's runner runs the suite's interpreter, under /root
    p = u.run_as(bob, [str(fast / "scontrol"), "ping"], u.user_env(bob, fast, c.address, _auth(c)))
    assert p.returncode == 1
    assert f"cannot run {NO_PYTHON}" in p.stderr          # refused, so it fell back


def _runners_children_of(runner_pid: int, uid: int) -> list[psutil.Process]:
    out = []
    for child in psutil.Process(runner_pid).children():
        try:
            if child.uids().real == uid and child.status() != psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out


def test_a_caller_that_goes_away_takes_its_command_with_it(cluster, bob, fast, bobs_runner):
    c = cluster
    runner = bobs_runner[0].pid
    p = u.popen_as(bob, [str(fast / "sbatch"), "--wait", "--wrap", "sleep 120"],
                   _bobs_env(c, bob, fast, bobs_runner))
    try:
        job = p.stdout.readline().split()[-1]            # "Submitted batch job N", then it waits
        assert len(_runners_children_of(runner, bob.uid)) == 1     # the command, as bob
        p.send_signal(signal.SIGINT)       # Ctrl-C reaches the client (its process group)
        p.wait(10)
    finally:
        p.kill()
        p.wait()
    wait_for("bob's sbatch --wait gone", lambda: not _runners_children_of(runner, bob.uid), 10)
    c.run(["scancel", job], check=True)


def test_a_caller_in_another_mount_namespace_gets_the_python_command(cluster, fast, slow):
    c = cluster
    p = c.run(["unshare", "-m", str(fast / "scontrol"), "ping"])
    assert p.returncode == 1
    assert f"cannot run {NO_PYTHON}" in p.stderr          # refused, so it fell back
    p = c.run(["unshare", "-m", str(slow / "scontrol"), "ping"])
    assert p.returncode == 0 and "is UP" in p.stdout, p.stderr


def test_without_a_runner_the_commands_are_python(cluster, slow):
    c = cluster
    env = dict(c.env, LINGJUN_RUNNER_SOCKET=str(c.root / "no-runner.sock"))
    p = c.run([str(slow / "sbatch"), "--parsable", "-H", "--wrap", "true"], env=env, check=True)
    assert c.state_of(int(p.stdout.strip())) == "PENDING"
    p = c.run([str(slow / "scancel"), p.stdout.strip()], env=env)
    assert (p.returncode, p.stderr) == (0, "")


def test_the_runner_is_found_through_the_config_file(cluster, fast, tmp_path):
    c = cluster
    auth = _auth(c)
    conf = tmp_path / "lingjun.toml"
    env = dict(c.env, LINGJUN_CONF=str(conf))
    env.pop("LINGJUN_HOME")
    conf.write_text(f'[controller]\nport = 1\n\n[auth] # where users get tokens\n'
                    f'socket = "{auth}"   # beside it: auth.runner.sock\n')
    p = c.run([str(fast / "scontrol"), "ping"], env=env)
    assert p.returncode == 0 and "is UP" in p.stdout, p.stderr
    # A value the client's small reader is not sure of goes to Python (absent here).
    escaped = auth.replace(".sock", "\\u002esock")
    conf.write_text(f'[auth]\nsocket = "{escaped}"\n')
    p = c.run([str(fast / "scontrol"), "ping"], env=env)
    assert p.returncode == 1 and f"cannot run {NO_PYTHON}" in p.stderr


def _ask_runner(c: Cluster, payload: bytes, fds: list[int] = ()) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(runner_path(_auth(c)))
        socket.send_fds(s, [payload], list(fds)) if fds else s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        return s.recv(256)


@pytest.mark.parametrize("payload", [
    pytest.param(b"hello", id="not a request"),
    pytest.param(b"LJRUN1\xff\xff\xff\xff", id="a length past the limit"),
    pytest.param(b"LJRUN1\x00\x00\x00\x10sbatch\x000\x00", id="cut short"),
])
def test_garbage_on_the_runner_socket_runs_nothing(cluster, fast, payload):
    c = cluster
    before = c.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout
    assert _ask_runner(c, payload) == b"exit 2\n"
    assert c.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout == before
    p = c.run([str(fast / "scontrol"), "ping"])            # and it serves on
    assert p.returncode == 0, p.stderr


def test_a_command_the_runner_does_not_serve_runs_nothing(cluster, tmp_path):
    c = cluster
    marker = tmp_path / "ran"
    body = b"\0".join([b"srun", b"22", b"1", f"--output={marker}".encode(), b"PATH=/bin"]) + b"\0"
    request = b"LJRUN1" + len(body).to_bytes(4, "big") + body
    with open(os.devnull, "rb") as null, open(os.devnull, "wb") as sink:
        cwd = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            answer = _ask_runner(c, request, [null.fileno(), sink.fileno(), sink.fileno(), cwd])
        finally:
            os.close(cwd)
    assert answer == b"exit 2\n"
    assert not marker.exists()


def test_the_runner_stops_with_the_cluster_and_leaves_no_socket(root_dir):
    c = Cluster(root_dir / "cluster2", nodes=1, cpus=1)
    c.root.chmod(0o755)
    c.up()
    path = runner_path(c.info()["auth_socket"])
    pid = _runner_pid(c)
    try:
        assert os.path.exists(path)
    finally:
        c.down()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not os.path.exists(path)


def test_the_caller_is_read_from_its_process_and_a_stranger_is_not_taken_for_it(bob):
    """Groups and resource limits come from the calling process itself (what
    ``newgrp`` or ``ulimit`` gave it), and only while every uid of that pid is
    the caller's: a pid that another user's process took over lends nothing."""
    p = subprocess.Popen(["prlimit", "--nofile=123:456", "sleep", "30"], user=bob.uid,
                         group=bob.gid, extra_groups=[bob.gid, 4], stdin=subprocess.DEVNULL)
    try:
        wait_for("prlimit has exec'd sleep",
                 lambda: psutil.Process(p.pid).name() == "sleep", 10)
        groups, limits = _caller(p.pid, bob.uid, bob.gid)
        assert sorted(groups) == sorted({bob.gid, 4})
        assert dict(limits)[resource.RLIMIT_NOFILE] == (123, 456)
        with pytest.raises(CallerGone):
            _caller(p.pid, bob.uid + 1, bob.gid)
    finally:
        p.kill()
        p.wait()
    with pytest.raises(CallerGone):
        _caller(p.pid, bob.uid, bob.gid)


def test_install_without_a_compiler_says_so_and_writes_nothing(tmp_path):
    where = tmp_path / "bin"
    p = subprocess.run([sys.executable, "-m", "cli.lingjun", "install-commands", str(where),
                        "--cc", "no-such-cc"], capture_output=True, text=True)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == "lingjun: error: no C compiler 'no-such-cc' (set --cc or $CC)\n"
    assert not where.exists()
