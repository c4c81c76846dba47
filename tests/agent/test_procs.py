"""Finding, signalling and killing a job's processes, with real processes.

Every test uses its own made-up node name, so nothing here can reach a
process that the test did not start.
"""
import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from lingjun_agent.launcher.procs import (
    job_processes,
    node_identity,
    running_jobs,
    signal_job,
    terminate_job,
)
from lingjun_agent.launcher.marks import MARK_VAR


@pytest.fixture
def node():
    return f"testnode-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def started():
    """Popen objects the test started; killed (by group) and reaped afterwards."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def spawn(started, node, job_id, script):
    env = dict(os.environ)
    env[MARK_VAR] = f"{node}:{job_id}"
    p = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True)
    started.append(p)
    return p


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


# A tree: bash -> (subshell ignoring TERM -> sleep ignoring TERM), sleep, and a
# grandchild started with an empty environment (found as a descendant only).
TREE = """
(trap '' TERM; sleep 60; true) &
sleep 60 &
(env -i /bin/sleep 61; true) &
wait
"""


def test_terminate_kills_tree_within_grace_and_spares_other_node(node, started):
    other = node + "-other"
    root = spawn(started, node, 42, TREE)
    bystander = spawn(started, other, 42, "sleep 60 & wait")
    # the whole tree: until each subshell has started its sleep (a loaded
    # machine shows a subshell still as bash for a moment)
    def sleeps() -> list[str]:
        return sorted(p.name() for p in job_processes(node, 42))
    assert wait_for(lambda: sleeps().count("sleep") == 3), \
        f"want 3 sleeps in the tree, got {sleeps()}"
    assert wait_for(lambda: len(job_processes(other, 42)) >= 2)
    tree = job_processes(node, 42)

    grace = 0.5
    t0 = time.monotonic()
    asyncio.run(terminate_job(node, 42, grace))
    took = time.monotonic() - t0

    assert job_processes(node, 42) == []
    for p in tree:
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, \
            f"want {p} dead, it is {p.status()}"
    assert grace <= took < grace + 1.0, \
        f"want SIGKILL right after {grace}s of grace, took {took:.2f}s"
    assert root.wait(timeout=2) == -signal.SIGTERM
    assert bystander.poll() is None, "another node's process of the same job died"
    assert len(job_processes(other, 42)) >= 2


def test_terminate_returns_early_when_all_obey_sigterm(node, started):
    spawn(started, node, 7, "sleep 60 & wait")
    assert wait_for(lambda: len(job_processes(node, 7)) == 2)
    t0 = time.monotonic()
    asyncio.run(terminate_job(node, 7, 10.0))
    took = time.monotonic() - t0
    assert job_processes(node, 7) == []
    assert took < 2.0, f"want no wait for the grace period, took {took:.2f}s"


def test_terminate_kills_children_forked_during_grace(node, started):
    # Ignores SIGTERM and keeps forking new short-lived children.
    spawn(started, node, 8, "trap '' TERM; while true; do sleep 0.05; done")
    assert wait_for(lambda: len(job_processes(node, 8)) >= 1)
    asyncio.run(terminate_job(node, 8, 0.3))
    assert job_processes(node, 8) == []


def test_terminate_of_a_job_without_processes_returns_at_once(node):
    t0 = time.monotonic()
    asyncio.run(terminate_job(node, 9, 5.0))
    assert time.monotonic() - t0 < 0.5


def test_terminate_keeps_the_event_loop_serving(node, started):
    spawn(started, node, 10, "trap '' TERM; sleep 60; true")
    assert wait_for(lambda: len(job_processes(node, 10)) == 2)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        t = asyncio.create_task(ticker())
        await terminate_job(node, 10, 0.5)
        t.cancel()
        return ticks

    ticks = asyncio.run(main())
    assert ticks >= 5, f"want the loop to run during the grace period, got {ticks} ticks"


def test_running_jobs_is_per_node_and_exact(node, started):
    spawn(started, node, 1, "sleep 60")
    spawn(started, node, 2, "sleep 60")
    spawn(started, node + "0", 3, "sleep 60")  # "node0" must not match "node"
    assert wait_for(lambda: running_jobs(node) == {1, 2}), \
        f"want {{1, 2}}, got {running_jobs(node)}"
    assert running_jobs(node + "0") == {3}


def test_signal_job_counts_and_delivers(node, started):
    p = spawn(started, node, 5, "trap 'exit 7' USR1; sleep 60 & wait")
    assert wait_for(lambda: len(job_processes(node, 5)) == 2)
    leader = psutil.Process(p.pid)
    assert signal_job(node, 5, signal.SIGSTOP) == 2
    assert wait_for(lambda: leader.status() == psutil.STATUS_STOPPED)
    assert signal_job(node, 5, signal.SIGCONT) == 2
    assert signal_job(node + "x", 5, signal.SIGKILL) == 0
    assert signal_job(node, 5, signal.SIGUSR1, batch_only=True) == 0, \
        "no batch supervisor: batch_only finds no script"
    assert signal_job(node, 5, signal.SIGUSR1) == 2
    assert p.wait(timeout=5) in (7, -signal.SIGUSR1)


def test_the_calling_process_is_never_included(node, monkeypatch):
    # The caller itself carries the marker (as if it ran inside the job).
    env = dict(os.environ)
    env[MARK_VAR] = f"{node}:11"
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys; from lingjun_agent.launcher.procs import job_processes; "
         f"print(len(job_processes({node!r}, 11)))"],
        env=env, capture_output=True, text=True, timeout=30,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.strip() == "0", out.stderr


def test_two_agents_named_alike_in_different_clusters_mark_their_jobs_apart(tmp_path):
    a = node_identity("node1", tmp_path / "clusterA" / "agents" / "node1")
    b = node_identity("node1", tmp_path / "clusterB" / "agents" / "node1")
    assert a != b and a.startswith("node1@") and b.startswith("node1@")
    assert a == node_identity("node1", str(tmp_path / "clusterA" / "agents" / "node1"))


def test_steps_only_signals_step_tasks_and_spares_the_script(node, started):
    """--signal without B: reaches the tasks of steps (SLURM_STEP_ID in their
    environment) and their children, never the batch script."""
    script = spawn(started, node, 9, "sleep 60")
    env = dict(os.environ, **{MARK_VAR: f"{node}:9", "SLURM_STEP_ID": "0"})
    task = subprocess.Popen(["bash", "-c", "sleep 60 & wait"], env=env, start_new_session=True)
    started.append(task)
    assert wait_for(lambda: len(job_processes(node, 9)) >= 3)
    sent = signal_job(node, 9, signal.SIGTERM, steps_only=True)
    assert sent == 2, f"want the task and its child signalled, got {sent}"
    assert task.wait(5) == -signal.SIGTERM
    assert script.poll() is None, "the batch script must not be signalled"
