"""One user cannot starve the others at the controller's unix doors, on a real local cluster.

mallory, an ordinary account (``useradd``), opens 1,500 connections to the
command socket, each starting a request and never finishing it (a slow
request: it holds its connection until the daemon's read timeout), and
1,500 to the credential socket, never reading her tokens. Before the
doors had limits every one of them was a descriptor of the controller's
(2 x 11,000 took all its 20,000: root's squeue then failed), and each
was logged. Now (lingjun/admission.py) she holds at most her
``connections_per_user``, the rest are answered "busy" at once, the
refusals cost the log a line per ten seconds, and meanwhile bob's and
root's squeue and sbatch are answered within a second; mallory's own
squeue says in one line that she is over her limit and ends.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from lingjun.command_socket import commands_path
from tests.e2e import users as u
from tests.e2e.conftest import Cluster, wait_for

TAG = str(os.getpid() % 100000)
MALLORY, BOB = f"ljdlmal{TAG}", f"ljdlbob{TAG}"
FLOOD = 1500                 # connections to each socket
PER_USER = 128               # [limits] connections_per_user's default (tests/test_admission.py)
ANSWERED_WITHIN_S = 1.0
WAVE_S = 12                  # longer than the refusal log's interval

# Run as mallory by the system's Python: only the standard library.
FLOOD_SCRIPT = r'''
import json, socket, sys, time
commands, credentials, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
summary = {"busy": 0, "closed": 0, "open": 0}


def outcome(s):
    try:
        data = s.recv(4096)
    except BlockingIOError:
        return "open"
    except OSError:
        data = b""
    return "busy" if b"RESOURCE_EXHAUSTED" in data else "closed"


held = []
for path, first in ((commands, b'{"method":"GetJobs","request":'), (credentials, None)):
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)               # blocking: waits while the daemon's backlog is full
        s.settimeout(10)
        held.append(s)
        if first:
            try:
                s.sendall(first)      # a request begun and never finished
            except OSError:           # refused before it was read
                s.setblocking(False)
                summary[outcome(s)] += 1
                continue
            s.setblocking(False)
            held[-1] = (s, "command")
time.sleep(1.0)
for s in held:
    if isinstance(s, tuple):
        summary[outcome(s[0])] += 1
print(json.dumps(summary), flush=True)
# a second wave while the others' commands run: a connection to each socket
# every 20 ms for WAVE_S seconds, each closed at once, every one over her limit
deadline = time.monotonic() + float(sys.argv[4])
tried = 0
while time.monotonic() < deadline:
    for path in (commands, credentials):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            tried += 1
        except OSError:
            pass
        s.close()
    time.sleep(0.02)
print(json.dumps({"tried": tried}), flush=True)
time.sleep(300)             # hold everything until the test ends this
'''


@pytest.fixture(scope="module")
def root_dir():
    assert os.geteuid() == 0, "making users and running commands as them needs root"
    d = u.world_readable_tmp("lj-doors-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def people(root_dir):
    made = []
    try:
        for name in (MALLORY, BOB):
            made.append(u.add_user(name, root_dir / "home" / name))
        (root_dir / "home").chmod(0o755)
        yield made
    finally:
        for user in made:
            u.remove_user(user.name)


@pytest.fixture(scope="module")
def user_bin(root_dir):
    return u.make_user_python(root_dir / "python")


@pytest.fixture(scope="module")
def cluster(root_dir, people):
    c = Cluster(root_dir / "cluster", nodes=1, cpus=2)
    c.root.chmod(0o755)
    c.work.chmod(0o777)
    yield from c.serving()


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _timed(run) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    p = run()
    return p, time.monotonic() - t0


def test_one_users_flood_leaves_others_answered_and_the_controller_bounded(cluster, people, user_bin,
                                                                          root_dir):
    mallory, bob = people
    info = cluster.info()
    auth_socket = info["auth_socket"]
    pid = info["processes"]["lingjund"]["pid"]
    log = Path(info["state_dir"]) / "logs" / "lingjund.log"
    script = root_dir / "flood.py"
    script.write_text(FLOOD_SCRIPT)
    script.chmod(0o644)
    env = {name: u.user_env(user, user_bin, cluster.address, Path(auth_socket))
           for name, user in ((MALLORY, mallory), (BOB, bob))}
    work = root_dir / "bobwork"
    work.mkdir()
    os.chown(work, bob.uid, bob.gid)

    def bob_runs(*argv: str) -> subprocess.CompletedProcess:
        return u.run_as(bob, [str(user_bin / argv[0]), *argv[1:]], env[BOB], cwd=work)

    # warm: each command once, so the page cache holds what they import
    assert bob_runs("squeue").returncode == 0
    assert cluster.run(["squeue"]).returncode == 0
    before_fds = _descriptors(pid)
    before_lines = len(log.read_text().splitlines())

    flood = u.popen_as(mallory, [u.SYSTEM_PYTHON, str(script), commands_path(auth_socket),
                                 auth_socket, str(FLOOD), str(WAVE_S)], env[MALLORY])
    try:
        summary = json.loads(flood.stdout.readline() or "{}")
        assert summary, f"the flood did not run: {flood.stderr.read()}"
        held_fds = _descriptors(pid)
        answered = {
            "bob's squeue": _timed(lambda: bob_runs("squeue")),
            "bob's sbatch": _timed(lambda: bob_runs("sbatch", "--wrap", "true")),
            "root's squeue": _timed(lambda: cluster.run(["squeue"])),
            "root's sbatch": _timed(lambda: cluster.run(["sbatch", "--wrap", "true"])),
        }
        mallorys, mallory_took = _timed(lambda: u.run_as(
            mallory, [str(user_bin / "squeue")], env[MALLORY], cwd=mallory.home))
        wave = json.loads(flood.stdout.readline() or "{}")
        assert wave.get("tried", 0) > 500, f"the second wave did not run: {wave}"
        time.sleep(0.5)
        after_lines = log.read_text().splitlines()
    finally:
        flood.kill()
        flood.wait()

    assert summary["open"] <= PER_USER and summary["busy"] >= FLOOD - PER_USER - 50, summary
    assert held_fds - before_fds <= PER_USER + 32, (
        f"the controller held {held_fds - before_fds} more descriptors during one user's flood "
        f"(want at most her {PER_USER} and a few): {summary}")
    for what, (p, took) in answered.items():
        assert p.returncode == 0, f"{what}: rc={p.returncode} {p.stderr}"
        assert took < ANSWERED_WITHIN_S, f"{what} took {took:.2f}s during mallory's flood"
    assert mallorys.returncode == 1 and mallory_took < 10, (mallorys, mallory_took)
    assert mallorys.stderr.splitlines() == [
        "slurm_load_jobs error: Rate limit exceeded, please retry momentarily"], \
        mallorys.stderr
    about_her = [line for line in after_lines[before_lines:] if f"uid {mallory.uid}" in line]
    # each kind of refusal at most once per 10 s: a first line and one more
    assert len(about_her) <= 2 * 4, (
        f"the controller's log grew by {len(about_her)} lines about mallory's flood:\n"
        + "\n".join(about_her[:20]))
    wait_for("mallory's connections closed",
             lambda: _descriptors(pid) <= before_fds + 8, 40)
