"""The controller's disk fills up: submissions are refused in Slurm's words, reads go on,
and once space returns the controller takes submissions again by itself.

The controller's state directory is a small real tmpfs (mounted for the test,
we run as root), filled with a file until the kernel says ENOSPC, then freed.
"""
from __future__ import annotations

import errno
import os
import subprocess

import pytest

from tests.e2e.conftest import Cluster

# Big enough that its row needs pages the database's files do not have yet.
SCRIPT = "#!/bin/sh\n# " + "x" * 300_000 + "\ntrue\n"


def _fill(path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"\0" * 65536
    try:
        while True:
            os.write(fd, chunk)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    try:
        while True:
            os.write(fd, b"\0")      # the last bytes of the last page
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)


@pytest.fixture
def small_disk(tmp_path):
    assert os.geteuid() == 0, "mounting a tmpfs needs root"
    c = Cluster(tmp_path, nodes=1)
    ctl = c.state / "controller"
    ctl.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(ctl)], check=True)
    try:
        c.up()
        try:
            c.wait_nodes_up()
            yield c, ctl
        finally:
            c.down()
    finally:
        subprocess.run(["umount", "-l", str(ctl)], check=False)


def test_a_full_disk_refuses_submissions_in_slurms_words_and_recovers(small_disk):
    c, ctl = small_disk
    jobs = ["squeue", "-h", "-t", "all", "-o", "%i %T"]
    before = c.run(jobs, check=True).stdout
    filler = ctl / "filler"
    _fill(filler)
    p = c.run(["sbatch", "-o", "/dev/null"], input=SCRIPT)
    assert (p.returncode, p.stdout, p.stderr) == (
        1, "", "sbatch: error: Batch job submission failed: No space left on device\n")
    # reads go on, and nothing was written
    assert c.run(jobs, check=True).stdout == before
    p = c.run(["sinfo", "-h", "-N", "-o", "%N %t"])
    assert (p.returncode, p.stdout.strip()) == (0, "node1 idle")
    # space returns: the next submission goes through, and its job runs
    filler.unlink()
    job = c.sbatch("-o", "/dev/null", input=SCRIPT)
    c.wait_state(job, "COMPLETED", timeout=30)
