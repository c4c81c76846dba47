"""A command talks to one cluster: the controller's address and the credential
socket (and the command socket beside it) always come from the same place.

Two local clusters share one ``LINGJUN_HOME``: the second ``lingjun up``
rewrites ``local.json`` while the first still runs, and says so. A workflow
that pinned the first with ``LINGJUN_CONTROLLER`` keeps reaching the first:
its ``sbatch`` lands there (not in the second through the second's command
socket), its ``sacct`` is answered (not "Protocol authentication error"
from a token of the other cluster's key), and the second is untouched.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster


@pytest.fixture(scope="module")
def two_clusters():
    root = Path(tempfile.mkdtemp(prefix="lj-onecluster-"))
    first, second = Cluster(root / "a", nodes=1), Cluster(root / "b", nodes=1)
    home = str(root / "home")
    for c in (first, second):
        c.env["LINGJUN_HOME"] = home
    first.up()
    try:
        up = second.run(["lingjun", "up", "--nodes", "1", "--cpus", "2", "--state-dir",
                         str(second.state), "--port", str(second.port), "--kill-wait", "2"],
                        timeout=90)
        try:
            assert up.returncode == 0, up
            first.wait_nodes_up()
            second.wait_nodes_up()
            yield first, second, up
        finally:
            second.down()
    finally:
        first.down()
        shutil.rmtree(root, ignore_errors=True)


def test_up_says_when_it_repoints_a_running_clusters_users(two_clusters):
    first, _, up = two_clusters
    assert (f"lingjun: warning: the local cluster in {first.state} ({first.address}) still runs"
            in up.stderr), up.stderr
    assert f"commands with LINGJUN_CONTROLLER={first.address} still reach that one" in up.stderr


def test_a_pinned_controller_is_the_one_every_command_reaches(two_clusters):
    first, second, _ = two_clusters
    pinned = first.env
    assert pinned["LINGJUN_CONTROLLER"] == first.address and "LINGJUN_AUTH_SOCKET" not in pinned
    job = first.sbatch("-H", "-o", "/dev/null", "--wrap", "true")     # pinned: first.env
    assert first.run(["squeue", "-h", "-j", str(job), "-o", "%T"], env=pinned).stdout == "PENDING\n"
    # the second cluster (what local.json names now) never saw it
    other = second.run(["squeue", "-h", "-o", "%i"])
    assert other.returncode == 0 and str(job) not in other.stdout.split(), other
    acct = first.run(["sacct", "-n", "-X", "-j", str(job), "--parsable2", "-o", "JobID,State"],
                     env=pinned)
    assert (acct.returncode, acct.stderr) == (0, ""), acct
    assert acct.stdout == f"{job}|PENDING\n"
    first.run(["scancel", str(job)], env=pinned, check=True)
    assert first.run(["squeue", "-h", "-j", str(job), "-o", "%T"], env=pinned).stdout in ("", "CANCELLED\n")


def test_a_controller_no_file_names_is_never_reached_through_another_clusters_socket(two_clusters):
    """Told an address that neither local.json nor a running cluster's record
    names, a command takes no socket from them: the system's (absent here)."""
    first, second, _ = two_clusters
    stray = {**first.env, "LINGJUN_CONTROLLER": "127.0.0.1:1"}
    p = first.run(["squeue", "-h"], env=stray, timeout=60)
    assert p.returncode == 1 and p.stdout == "", p
    assert "slurm_load_jobs error: Unable to contact slurm controller" in p.stderr, p.stderr
