"""Per-job cgroups for real, under a parent cgroup this test owns and removes."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from lingjun_agent.launcher import cgroups

pytestmark = pytest.mark.skipif(not cgroups.available(), reason="needs root and the v1 freezer")


@pytest.fixture
def base():
    b = cgroups.FREEZER / f"lingjun-test-{uuid.uuid4().hex[:8]}"
    yield b
    # whatever a failed test left: empty it, then remove bottom-up
    for d in sorted(b.rglob("*"), key=lambda p: -len(p.parts)) if b.exists() else []:
        if d.is_dir():
            cg = cgroups.JobCgroup(d, 0)
            cgroups.kill(cg, unkillable_s=5)
            cgroups.remove(cg)
    if b.exists():
        os.rmdir(b)


def gone(pids, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in pids):
            return True
        time.sleep(0.05)
    return False


ESCAPES = r"""
setsid sleep 1000 &
( ( env -i sleep 1001 & ) & )
echo $! > /dev/null
sleep 0.3
"""


def test_everything_a_process_born_inside_starts_is_found_and_killed(base):
    cg = cgroups.create("node1@t", 7, base)
    assert cg is not None and cg.path == base / "node1@t" / "job_7"
    assert cgroups.create("node1@t", 7, base) == cg, "create finds an existing one"
    with cgroups.inside(cg):
        p = subprocess.Popen(["bash", "-c", ESCAPES])
    assert os.getpid() not in cgroups.pids(cg), "the caller went back out"
    p.wait(10)                                      # the script exits 0, its children live
    left = cgroups.pids(cg)
    names = sorted(psutil.Process(x).name() for x in left)
    assert names == ["sleep", "sleep"], f"want the setsid and the double-forked sleep, got {names}"
    assert cgroups.jobs("node1@t", base) == [cg]
    assert cgroups.find("node1@t", 7, base) == cg and cgroups.find("node1@t", 8, base) is None
    t = time.monotonic()
    assert cgroups.kill(cg)
    assert gone(left) and cgroups.pids(cg) == []
    assert time.monotonic() - t < 2, "SIGKILL under freeze is quick"
    assert cgroups.remove(cg) and not cg.path.exists()
    cgroups.remove_node("node1@t", base)
    assert not (base / "node1@t").exists()


def test_terminate_gives_the_grace_then_kills(base):
    cg = cgroups.create("n", 1, base)
    trap = "trap 'echo term; sleep 0.2; exit 0' TERM; while true; do sleep 0.05; done"
    stubborn = "trap '' TERM; while true; do sleep 0.05; done"
    with cgroups.inside(cg):
        polite = subprocess.Popen(["bash", "-c", trap], stdout=subprocess.PIPE, text=True)
        deaf = subprocess.Popen(["bash", "-c", stubborn])
    time.sleep(0.2)
    t = time.monotonic()
    assert cgroups.terminate(cg, grace_s=1.0)
    took = time.monotonic() - t
    assert polite.wait(5) == 0 and "term" in polite.stdout.read()
    assert deaf.wait(5) == -9, "ignored SIGTERM: killed after the grace"
    assert 0.9 < took < 3, f"want about the 1 s grace, took {took:.2f} s"
    cgroups.remove(cg)


def test_join_moves_a_started_process_in(base):
    cg = cgroups.create("n", 2, base)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cgroups.join(cg, p.pid)
        assert cgroups.pids(cg) == [p.pid]
        assert cgroups.signal_frozen(cg, 15) == 1
        assert p.wait(5) == -15
    finally:
        p.kill()
    cgroups.remove(cg)


def test_unavailable_without_root_or_freezer(tmp_path):
    assert not cgroups.available(tmp_path / "x"), "no freezer hierarchy there"
    assert cgroups.create("n", 1, tmp_path / "x") is None
