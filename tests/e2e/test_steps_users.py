"""srun, sbatch and salloc run by ordinary users, and steps that outlive the
controller and the agent.

alice and bob are real accounts (``useradd``, removed after); their commands
are real processes of theirs, run by a system Python of their reach
(tests/e2e/users.py). The cluster runs as root, as in production: its agents
start every task through the step supervisor as the task's user.
"""
from __future__ import annotations

import os
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e import users as u
from tests.e2e.conftest import Cluster

pytestmark = pytest.mark.long     # a minute or more: started first (tests/conftest.py)

TAG = str(os.getpid() % 100000)
ALICE, BOB = f"ljsalice{TAG}", f"ljsbob{TAG}"
COUNT_20 = "for i in $(seq 1 20); do echo $i; sleep 0.3; done"
TWENTY = "".join(f"{i}\n" for i in range(1, 21))


@pytest.fixture(scope="module")
def root_dir():
    assert os.geteuid() == 0, "making users and running jobs as them needs root"
    d = u.world_readable_tmp("lj-steps-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def bin_dir(root_dir):
    return u.make_user_python(root_dir / "python")


@pytest.fixture(scope="module")
def people(root_dir):
    made = {}
    try:
        for name in (ALICE, BOB):
            made[name] = u.add_user(name, root_dir / "home" / name)
        (root_dir / "home").chmod(0o755)
        yield made[ALICE], made[BOB]
    finally:
        for name in made:
            u.remove_user(name)


@pytest.fixture(scope="module")
def cluster(root_dir, people):
    c = Cluster(root_dir / "cluster", nodes=2, cpus=2)
    c.root.chmod(0o755)
    c.work.chmod(0o755)
    yield from c.serving()


class As:
    """Commands as one user against one cluster."""

    def __init__(self, c: Cluster, user: u.User, bin_dir: Path):
        self.c, self.user, self.bin = c, user, bin_dir
        self.env = u.user_env(user, bin_dir, c.address, c.state / "auth.sock")

    def argv(self, cmd: str, *args: str) -> list[str]:
        return [str(self.bin / cmd), *args]

    def run(self, cmd: str, *args: str, timeout: float = 60) -> "u.subprocess.CompletedProcess":
        return u.run_as(self.user, self.argv(cmd, *args), self.env, timeout=timeout)

    def start(self, cmd: str, *args: str):
        return u.popen_as(self.user, self.argv(cmd, *args), self.env)


@pytest.fixture(scope="module")
def alice(cluster, people, bin_dir):
    return As(cluster, people[0], bin_dir)


def test_alice_cannot_read_through_bobs_directory_with_srun_chdir(alice, people):
    bob = people[1]
    private = bob.home / "private"
    private.mkdir()
    (private / "secret.txt").write_text("bob's secret\n")
    os.chown(private, bob.uid, bob.gid)
    os.chown(private / "secret.txt", bob.uid, bob.gid)
    private.chmod(0o700)
    (private / "secret.txt").chmod(0o644)   # readable, but only through the directory

    p = alice.run("srun", f"--chdir={private}", "cat", "secret.txt")
    assert "bob's secret" not in p.stdout + p.stderr
    assert (f"slurmstepd: error: couldn't chdir to `{private}': Permission denied: "
            "going to /tmp instead") in p.stderr, p.stderr
    assert "cat: secret.txt: No such file or directory" in p.stderr, p.stderr
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)


def test_tasks_run_as_the_user_in_their_own_directory(alice):
    p = alice.run("srun", "-N2", "-n2", "-l", "sh", "-c", "id -un; pwd")
    assert p.returncode == 0, p.stderr
    lines = sorted(p.stdout.splitlines())
    home = str(alice.user.home)
    assert lines == sorted([f"0: {ALICE}", f"0: {home}", f"1: {ALICE}", f"1: {home}"]), p.stdout


def _wait_line(proc, want: str, timeout: float = 30) -> list[str]:
    """Read proc's stdout until the line ``want``; the lines read."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        got.append(line)
        if line.strip() == want:
            return got
    raise AssertionError(f"no line {want!r} within {timeout}s; got {got!r}")


@pytest.mark.parametrize("daemon", ["lingjund", "node1"],
                         ids=["across a controller kill -9 and restart",
                              "across an agent kill -9 and restart"])
def test_a_running_step_survives_and_srun_prints_everything_once(alice, cluster, daemon):
    # Two tasks, one per node, so that node1's agent holds one of them.
    p = alice.start("srun", "-N2", "-l", "bash", "-c", COUNT_20)
    seen = _wait_line(p, "0: 3")
    cluster.kill9(daemon)
    time.sleep(0.5)
    cluster.restart(daemon)
    out, err = p.communicate(timeout=90)
    lines = ("".join(seen) + out).splitlines()
    for rank in (0, 1):
        mine = "".join(line.split(": ", 1)[1] + "\n" for line in lines
                       if line.startswith(f"{rank}: "))
        assert mine == TWENTY, (rank, lines, err)
    assert len(lines) == 40, lines
    assert p.returncode == 0, err
    cluster.wait_nodes_up()


def test_a_step_that_ends_while_its_agent_is_down_is_reported_when_it_returns(alice, cluster):
    p = alice.start("srun", "-N2", "-l", "bash", "-c",
                    "for i in 1 2 3 4 5; do echo $i; sleep 0.3; done; exit 3")
    seen = _wait_line(p, "0: 1")
    cluster.kill9("node1")
    time.sleep(3)              # the tasks end meanwhile; their supervisor keeps the result
    cluster.restart("node1")
    out, err = p.communicate(timeout=60)
    lines = ("".join(seen) + out).splitlines()
    for rank in (0, 1):
        assert [x.split(": ", 1)[1] for x in lines if x.startswith(f"{rank}: ")] == \
            ["1", "2", "3", "4", "5"], (lines, err)
    assert p.returncode == 3, err
    assert err.count("Exited with exit code 3") == 2, err
    cluster.wait_nodes_up()


def test_a_step_of_a_batch_job_survives_a_controller_restart(alice, cluster):
    out = alice.user.home / "batch-step.out"
    p = alice.run("sbatch", "--parsable", "-N2", "-o", str(out), "--wrap",
                  f"srun -l bash -c '{COUNT_20}'")
    assert p.returncode == 0, p.stderr
    job = int(p.stdout.strip())
    cluster.wait_file(out, timeout=30, contains="0: 3\n")
    cluster.kill9("lingjund")
    time.sleep(0.5)
    cluster.restart("lingjund")
    assert cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=90) == \
        "COMPLETED", out.read_text()
    lines = out.read_text().splitlines()
    for rank in (0, 1):
        assert [x.split(": ", 1)[1] for x in lines if x.startswith(f"{rank}: ")] == \
            [str(i) for i in range(1, 21)], lines
    cluster.wait_nodes_up()


def test_50_user_sruns_after_3_controller_restarts_all_succeed(alice, cluster):
    for _ in range(3):
        cluster.kill9("lingjund")
        cluster.restart("lingjund")
        cluster.wait_nodes_up(60)

    def one(_):
        return alice.run("srun", "/bin/true", timeout=120)
    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(one, range(50)))
    bad = [(r.returncode, r.stderr[-300:]) for r in results if r.returncode != 0]
    assert bad == [], f"{len(bad)} of 50 failed: {bad[:3]}"


def test_sbatch_and_salloc_as_a_user_after_an_agent_reconnect(alice, cluster):
    cluster.kill9("node1")
    cluster.restart("node1")
    cluster.wait_nodes_up(60)
    out = alice.user.home / "sb.out"
    p = alice.run("sbatch", "--parsable", "-N2", "-o", str(out), "--wrap",
                  "id -un; srun -l id -un")
    assert p.returncode == 0, p.stderr
    job = int(p.stdout.strip())
    assert cluster.wait_state(job, ("COMPLETED", "FAILED"), timeout=60) == "COMPLETED", \
        out.read_text() if out.exists() else ""
    lines = out.read_text().splitlines()
    assert lines[0] == ALICE and sorted(lines[1:]) == [f"0: {ALICE}", f"1: {ALICE}"], lines
    p = alice.run("salloc", "-N2", "srun", "-l", "id", "-un")
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == [f"0: {ALICE}", f"1: {ALICE}"], p.stdout


@pytest.fixture(scope="module")
def quick(root_dir, people, bin_dir):
    """A cluster with a 4 s heartbeat timeout, for pauses longer than it."""
    c = Cluster(root_dir / "quick", nodes=1, cpus=2, heartbeat_timeout=4)
    c.root.chmod(0o755)
    c.work.chmod(0o755)
    c.up()
    try:
        c.wait_nodes_up()
        yield As(c, people[0], bin_dir)
    finally:
        c.down()


def _last_job(c: Cluster) -> int:
    out = c.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout.split()
    return max(int(j) for j in out)


def _job_end(c: Cluster, job: int) -> str:
    return c.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"),
                        timeout=60)


@pytest.mark.parametrize("kill_tasks", [False, True],
                         ids=["paused past the timeout: fenced (NODE_FAIL) or complete, all output",
                              "its tasks SIGKILLed meanwhile: the job ends failed, never COMPLETED"])
def test_a_controller_paused_past_the_heartbeat_timeout_reports_the_step_honestly(
        quick, kill_tasks):
    c = quick.c
    p = quick.start("srun", "bash", "-c", COUNT_20)
    seen = _wait_line(p, "3")
    job = _last_job(c)
    pid = c.pid_of("lingjund")
    os.kill(pid, signal.SIGSTOP)
    try:
        if kill_tasks:
            for proc in c.job_processes(job):
                proc.kill()
        time.sleep(c.heartbeat_timeout + 3)
    finally:
        os.kill(pid, signal.SIGCONT)
    out, err = p.communicate(timeout=90)
    state = _job_end(c, job)
    if p.returncode == 0:
        assert "".join(seen) + out == TWENTY, (seen, out, err)
        assert state == "COMPLETED", (state, err)
        assert not kill_tasks, "srun said 0 for a step whose tasks were killed"
    else:
        # A pause past the timeout lets every agent's lease lapse: the agents
        # fence the step (lingjun_agent/launcher/lease.py) and the job ends
        # NODE_FAIL; a step the user's tasks lost ends FAILED or CANCELLED.
        assert state in ("FAILED", "CANCELLED", "NODE_FAIL"), (state, p.returncode, err)
    if kill_tasks:
        assert p.returncode == 128 + 9, (p.returncode, err)
        assert state in ("FAILED", "CANCELLED", "NODE_FAIL"), state
    sacct = c.run(["sacct", "-n", "-P", "-j", str(job), "-o", "JobID,State,ExitCode"]).stdout
    if state != "COMPLETED":
        assert f"{job}|COMPLETED" not in sacct, sacct


def test_a_step_whose_node_is_lost_never_ends_completed(quick):
    c = quick.c
    p = quick.start("srun", "bash", "-c", "for i in $(seq 1 100); do echo $i; sleep 0.3; done")
    _wait_line(p, "3")
    job = _last_job(c)
    c.kill9("node1")
    try:
        out, err = p.communicate(timeout=60)
        state = _job_end(c, job)
        assert p.returncode != 0, (out, err)
        assert "node lost" in err or f"Force Terminated job {job}" in err, err
        assert state in ("NODE_FAIL", "FAILED", "CANCELLED"), state
    finally:
        c.restart("node1")        # the returning agent ends what the job left behind
        c.wait_nodes_up(60)
        deadline = time.monotonic() + 20
        while c.job_processes(job) and time.monotonic() < deadline:
            time.sleep(0.2)
        for proc in c.job_processes(job):
            proc.kill()
