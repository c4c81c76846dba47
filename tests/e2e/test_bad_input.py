"""Bad input: Slurm's words, a non-zero exit, and nothing changed (issue #2, 6)."""
from __future__ import annotations

import re
import time

import pytest

from tests.e2e.conftest import Cluster


def _dump(c) -> dict:
    from lingjund.store.store import Store
    s = Store(str(c.state / "controller" / "lingjund.db"))
    try:
        d = s.dump()
    finally:
        s.close()
    for n in d["nodes"]:
        n.pop("last_seen", None)
    return d


CASES = [
    pytest.param(["sbatch", "--bogus-option", "--wrap", "true"], None, 255,
                 "sbatch: unrecognized option '--bogus-option'\nTry \"sbatch --help\" for more information\n",
                 id="an unknown option is refused by name"),
    pytest.param(["sbatch", "-p", "nosuchpart", "--wrap", "true"], None, 1,
                 "sbatch: error: invalid partition specified: nosuchpart\n"
                 "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
                 id="an unknown partition is refused"),
    pytest.param(["sbatch", "/nonexistent/script.sh"], None, 1,
                 "sbatch: error: Unable to open file /nonexistent/script.sh\n",
                 id="a missing script is refused"),
    pytest.param(["sbatch"], "hostname\n", 1,
                 "sbatch: error: This does not look like a batch script.  The first\n"
                 "sbatch: error: line must start with #! followed by the path to an interpreter.\n"
                 "sbatch: error: For instance: #!/bin/sh\n",
                 id="a script without #! on stdin is refused"),
    pytest.param(["sbatch", "--time=abc", "--wrap", "true"], None, 255,
                 "sbatch: error: Invalid --time specification\n",
                 id="an invalid time limit is refused"),
    pytest.param(["sbatch", "-c", "3", "--wrap", "true"], None, 1,
                 "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
                 id="more CPUs per task than any node has is refused"),
    pytest.param(["scancel", "999999"], None, 1,
                 "scancel: error: Kill job error on job id 999999: Invalid job id specified\n",
                 id="scancel of an unknown job id says so"),
    pytest.param(["scontrol", "show", "job", "999999"], None, 1,
                 "slurm_load_jobs error: Invalid job id specified\n",
                 id="scontrol show job of an unknown id says so"),
]


@pytest.mark.parametrize("argv,stdin,rc,stderr", CASES)
def test_bad_input_is_refused_in_slurms_words(cluster, argv, stdin, rc, stderr):
    before = _dump(cluster)
    p = cluster.run(argv, input=stdin)
    assert (p.returncode, p.stderr, p.stdout) == (rc, stderr, "")
    assert _dump(cluster) == before


@pytest.mark.parametrize("argv,reason", [
    (["-N", "5"], "PartitionNodeLimit"),
    (["--parsable", "--nodes=5"], "PartitionNodeLimit"),
    (["-n", "9"], "PartitionConfig"),
], ids=["sbatch -N 5 on 4 nodes pends with PartitionNodeLimit",
        "sbatch --parsable --nodes=5 prints the id and pends",
        "sbatch -n 9 on 8 CPUs pends with PartitionConfig"])
def test_over_partition_limits_is_accepted_and_pends_as_in_slurm(cluster, argv, reason):
    # Slurm's default EnforcePartLimits=NO (golden err_sbatch_too_many_*, squeue_default_busy).
    p = cluster.run(["sbatch", *argv, "--wrap", "true"])
    pattern = r"(\d+)\n" if "--parsable" in argv else r"Submitted batch job (\d+)\n"
    m = re.fullmatch(pattern, p.stdout)
    assert (p.returncode, p.stderr, bool(m)) == (0, "", True), f"want rc 0 and an id, got {p}"
    jid = int(m.group(1))
    try:
        deadline, got = time.time() + 15, ""
        while time.time() < deadline and got != f"PENDING {reason}":
            got = cluster.squeue(jid, "%T %r")
            time.sleep(0.2)
        assert got == f"PENDING {reason}", f"want 'PENDING {reason}', got {got!r}"
    finally:
        cluster.run(["scancel", str(jid)])


def test_script_without_shebang_in_a_file_is_refused(cluster):
    (cluster.work / "noshebang.sh").write_text("hostname\n")
    before = _dump(cluster)
    p = cluster.run(["sbatch", "noshebang.sh"])
    assert p.returncode == 1 and "This does not look like a batch script" in p.stderr
    assert _dump(cluster) == before


@pytest.mark.parametrize("argv,prefix", [
    (["sbatch", "--wrap", "true"], "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"),
    (["squeue"], "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"),
    (["sinfo"], "Unable to contact slurm controller (connect failure)"),
    (["scancel", "1"], "Unable to contact slurm controller (connect failure)"),
    (["sacct"], "Unable to contact slurm controller (connect failure)"),
], ids=["sbatch", "squeue", "sinfo", "scancel", "sacct"])
def test_commands_say_when_no_controller_runs(tmp_path, argv, prefix):
    c = Cluster(tmp_path)  # never started
    p = c.run(argv, timeout=60)
    assert p.returncode != 0
    assert prefix in p.stderr
    assert "Traceback" not in p.stderr
