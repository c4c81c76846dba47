"""`squeue | head -1`: a command whose reader leaves ends quietly, as Slurm's do.

Python prints a BrokenPipeError traceback (twice: again at exit) when the
reader of its stdout goes away; a C command is killed by SIGPIPE and says
nothing. With a held array of 1,001 tasks every listing below is larger than
a pipe's buffer, so each one does write into a closed pipe.
"""
from __future__ import annotations

import subprocess

import pytest

from tests.e2e.conftest import Cluster


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("pipe"), nodes=1)
    c.up()
    try:
        job = c.sbatch("-H", "--array=0-1000", "-o", "/dev/null", "--wrap", "true")
        yield c, job
    finally:
        c.down()


@pytest.mark.parametrize("cmd", [
    ["squeue", "-r"],
    ["squeue", "-r", "--json"],
    ["squeue", "-r", "--yaml"],
    ["scontrol", "show", "job"],
    ["scontrol", "-d", "show", "job"],
    ["sacct", "-e"],
    ["sbatch", "--help"],
    ["srun", "--help"],
], ids=lambda c: " ".join(c))
def test_a_reader_that_leaves_gets_no_traceback(listed, cmd):
    c, _ = listed
    full = c.run(cmd, check=True).stdout
    p = subprocess.Popen(cmd, cwd=c.work, env=c.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    p.stdout.close()                       # as `head -1` does after its line
    err = p.stderr.read()
    rc = p.wait(timeout=60)
    assert first == full.splitlines(keepends=True)[0]
    assert err == "", err
    assert rc in (0, 141), rc              # 141: it wrote after the reader left
