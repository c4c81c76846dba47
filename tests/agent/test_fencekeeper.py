"""The node's fence keeper for real: a keeper process, a lease file, jobs in
cgroups (and one found by its marker only), stopped when the lease lapses."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from lingjun_agent.launcher import cgroups, fencekeeper, lease
from lingjun_agent.launcher.marks import MARK_VAR, job_mark, start_ticks

pytestmark = pytest.mark.skipif(not cgroups.available(), reason="needs root and the v1 freezer")

STUBBORN = "trap '' TERM; while true; do sleep 0.05; done"


@pytest.fixture
def node():
    n = f"testnode-{uuid.uuid4().hex[:8]}"
    yield n
    for cg in cgroups.jobs(n):
        cgroups.kill(cg, unkillable_s=5)
        cgroups.remove(cg)
    cgroups.remove_node(n)


def alive(p: subprocess.Popen) -> bool:
    return p.poll() is None


def test_a_lapsed_lease_stops_every_job_of_the_node_within_one_grace(node, tmp_path):
    path = lease.lease_path(tmp_path)
    me = (os.getpid(), start_ticks(os.getpid()))
    lease.write(path, lease.Lease(lease.clock() + 1.0, 1.0, *me))
    jobs = []
    for jid in (1, 2, 3):                    # three jobs that ignore SIGTERM
        cg = cgroups.create(node, jid)
        with cgroups.inside(cg):
            jobs.append(subprocess.Popen(["bash", "-c", STUBBORN]))
    env = dict(os.environ, **{MARK_VAR: job_mark(node, 4)})   # no cgroup: the marker
    marked = subprocess.Popen(["bash", "-c", STUBBORN], env=env, start_new_session=True)
    keeper = subprocess.Popen([sys.executable, "-m", "lingjun_agent.launcher.fencekeeper",
                               str(tmp_path), node, *map(str, me)])
    try:
        t = time.monotonic()
        for p in [*jobs, marked]:
            p.wait(10)
        took = time.monotonic() - t
        assert 1.8 < took < 3.5, f"want lease (1 s) + one grace (1 s) for all, took {took:.2f} s"
        assert [p.returncode for p in [*jobs, marked]] == [-9] * 4
        assert alive(keeper), "its agent (this test) lives: it keeps watching"
        lease.write(path, lease.Lease(lease.clock() + 0.5, 1.0, 0, 0))   # an agent now gone
        keeper.wait(5)
        assert keeper.returncode == 0, "agent gone, lease fenced: it leaves"
        assert cgroups.jobs(node) == [], "and drops the empty cgroups"
    finally:
        if keeper.poll() is None:
            keeper.kill()
        for p in [*jobs, marked]:
            if p.poll() is None:
                p.kill()


def test_a_renewed_lease_stops_nothing_and_ensure_starts_one_keeper(node, tmp_path):
    path = lease.lease_path(tmp_path)
    me = (os.getpid(), start_ticks(os.getpid()))
    lease.write(path, lease.Lease(lease.clock() + 2.0, 1.0, *me))
    cg = cgroups.create(node, 1)
    with cgroups.inside(cg):
        job = subprocess.Popen(["sleep", "30"])
    keeper = fencekeeper.ensure(tmp_path, node)
    try:
        deadline = time.monotonic() + 15
        while fencekeeper._running(tmp_path) != keeper.pid and time.monotonic() < deadline:
            time.sleep(0.05)
            lease.write(path, lease.Lease(lease.clock() + 2.0, 1.0, *me))
        assert fencekeeper.ensure(tmp_path, node) is None, "one keeper per node"
        for _ in range(10):                    # renewed every 0.2 s, ends 2 s out
            time.sleep(0.2)
            lease.write(path, lease.Lease(lease.clock() + 2.0, 1.0, *me))
        assert alive(job), "renewed: not fenced"
    finally:
        fencekeeper.stop(tmp_path)
        keeper.wait(5)
        job.kill()
        job.wait()
