"""Steps under the step supervisor (launcher/steps.py, launcher/taskd.py):
started without a fork of the caller, found again by a new agent, relayed
from any offset, killed at once; the working directory entered as the user.
Real processes; the agent's part (this test) runs as root, as on a node."""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from lingjun_agent.launcher import steps
from lingjun_agent.launcher.forkserver import ForkServer
from lingjun_agent.launcher.procs import job_processes

PATH = "/usr/local/bin:/usr/bin:/bin"
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def node():
    n = f"testnode-{uuid.uuid4().hex[:8]}"
    yield n
    for p in job_processes(n, 1):
        p.kill()


@pytest.fixture(params=["afresh", "forked"])
def forks(request, tmp_path):
    """How the supervisor starts: a fresh interpreter, or forked from a forkserver."""
    if request.param == "afresh":
        yield None
        return
    server = ForkServer(tmp_path / "forkserver.log")
    yield server
    server.close()


def spec(node, argv, ntasks=1, uid=None, gid=None, work_dir="/tmp", **kw) -> steps.StepSpec:
    return steps.StepSpec(job_id=1, step_id=0, node=node, argv=tuple(argv),
                          env={"PATH": PATH}, work_dir=work_dir,
                          uid=os.getuid() if uid is None else uid,
                          gid=os.getgid() if gid is None else gid,
                          tasks=tuple(steps.TaskSpec(rank=r, env={"RANK": str(r)}, **kw)
                                      for r in range(ntasks)))


def follow(h: steps.StepHandle, timeout: float = 20) -> tuple[dict, dict]:
    """Read until every exit: text per (rank, stream), exit per rank."""
    text: dict = {}
    exits: dict = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunks, ended = h.read()
        for rank, stream, _, data in chunks:
            text[(rank, stream)] = text.get((rank, stream), "") + data.decode()
        exits.update(ended)
        if h.done():
            return text, exits
        time.sleep(0.02)
    raise AssertionError(f"step did not end; got {text} {exits}")


def test_tasks_run_with_their_ranks_and_exits(node, tmp_path, forks):
    h = steps.start_step(tmp_path, spec(node, ["sh", "-c", 'echo "r$RANK"; exit $RANK'], 3), forks)
    text, exits = follow(h)
    assert {k: v for k, v in text.items() if k[1] == 1} == {(0, 1): "r0\n", (1, 1): "r1\n",
                                                           (2, 1): "r2\n"}
    assert {r: (e.exit_code, e.signal) for r, e in exits.items()} == {0: (0, 0), 1: (1, 0),
                                                                    2: (2, 0)}


def test_a_new_agent_finds_a_running_step_and_relays_from_any_offset(node, tmp_path, forks):
    h = steps.start_step(tmp_path, spec(node, ["sh", "-c", "echo one; sleep 0.6; echo two"]), forks)
    del h    # the agent that started it is gone
    [again] = steps.recover_steps(tmp_path)
    assert again.running()
    again.resume_from({(0, 1): len("one\n")})   # the controller already has "one\n"
    text, exits = follow(again)
    assert text[(0, 1)] == "two\n" and (exits[0].exit_code, exits[0].signal) == (0, 0)
    again.resume_from({})                        # or from the start, after a restart
    text, exits = follow(again)
    assert text[(0, 1)] == "one\ntwo\n" and 0 in exits
    steps.forget_step(again)
    assert steps.recover_steps(tmp_path) == []


def test_kill_ends_every_task_at_once_and_says_signal_9(node, tmp_path, forks):
    h = steps.start_step(tmp_path, spec(node, ["sh", "-c", "sleep 30 & sleep 30; echo no"], 2), forks)
    steps.wait_started(h)
    t0 = time.monotonic()
    h.kill()
    text, exits = follow(h)
    assert time.monotonic() - t0 < 3
    assert {r: (e.exit_code, e.signal) for r, e in exits.items()} == {0: (0, 9), 1: (0, 9)}
    assert job_processes(node, 1) == []


def test_a_lost_supervisor_leaves_lost_exits(node, tmp_path):
    h = steps.start_step(tmp_path, spec(node, ["sleep", "30"]))
    steps.wait_started(h)
    os.kill(h.supervisor_pid(), 9)
    steps.reap(h)
    for p in job_processes(node, 1):
        p.kill()
    _, exits = follow(h)
    assert (exits[0].signal, exits[0].error) == (9, "lost: step supervisor vanished")


@pytest.fixture
def root_only():
    assert os.geteuid() == 0, "needs root to switch users"
    d = Path(tempfile.mkdtemp(prefix="steps-", dir="/tmp"))
    private = d / "private"
    private.mkdir(mode=0o700)
    (private / "secret").write_text("root's secret\n")
    (private / "secret").chmod(0o644)
    yield private
    shutil.rmtree(d)


def test_the_working_directory_is_entered_as_the_user(node, tmp_path, forks, root_only):
    h = steps.start_step(tmp_path, spec(node, ["cat", "secret"], uid=NOBODY.pw_uid,
                                        gid=NOBODY.pw_gid, work_dir=str(root_only)), forks)
    text, exits = follow(h)
    assert text.get((0, 1), "") == ""
    assert text[(0, 2)] == (f"slurmstepd: error: couldn't chdir to `{root_only}': Permission "
                            "denied: going to /tmp instead\n"
                            "cat: secret: No such file or directory\n")
    assert exits[0].exit_code == 1


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("forked", [False, True], ids=["afresh", "forked"])
def test_the_agent_starts_a_users_step_without_forking_itself(tmp_path, forked):
    """gRPC's fork handlers crashed users' tasks when the threaded agent
    fork()ed them: the agent's process must only vfork (to exec the
    supervisor, or the forkserver that forks it); the user switch happens
    in the supervisor."""
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from lingjun_agent.launcher import steps
        from lingjun_agent.launcher.forkserver import ForkServer
        forks = ForkServer({str(tmp_path / 'fs.log')!r}) if {forked!r} else None
        h = steps.start_step(Path({str(tmp_path / 'state')!r}), steps.StepSpec(
            job_id=1, step_id=0, node="nofork-{os.getpid()}", argv=("true",),
            env={{"PATH": "/usr/bin:/bin"}}, work_dir="/tmp", uid={NOBODY.pw_uid},
            gid={NOBODY.pw_gid}, tasks=(steps.TaskSpec(rank=0),)), forks)
        print(os.getpid())
    """)
    trace = tmp_path / "trace"
    p = subprocess.run(["strace", "-f", "-e", "trace=clone,clone3,fork,vfork", "-o", str(trace),
                        sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=str(Path(__file__).resolve().parents[2]))
    assert p.returncode == 0, p.stderr
    me = p.stdout.strip().splitlines()[-1]
    mine = [line for line in trace.read_text().splitlines() if line.startswith(me + " ")
            and ("clone" in line or "fork(" in line)]
    forks = [line for line in mine if "vfork" not in line and "CLONE_VM" not in line]
    assert forks == [], f"the agent's process forked: {forks}"
    assert any("vfork" in line or "CLONE_VFORK" in line for line in mine), mine
