"""Job arrays through the commands on a real 4-node local cluster, as Slurm 22.05 does them.

One cluster for the module, started with --max-array-size 10001 so that a
10,000-task array is allowed (Slurm needs MaxArraySize=10001 for the same).
"""
from __future__ import annotations

import os
import re
import time

import pytest

from tests.e2e.conftest import Cluster

BAD_ARRAY = "sbatch: error: Batch job submission failed: Invalid job array specification\n"


class ArrayCluster(Cluster):
    def up(self) -> None:
        self.run(["lingjun", "up", "--nodes", str(self.nodes), "--cpus", str(self.cpus),
                  "--state-dir", str(self.state), "--port", str(self.port), "--kill-wait", "2",
                  "--heartbeat-timeout", str(self.heartbeat_timeout),
                  "--max-array-size", "10001"], check=True, timeout=90)

    def lines(self, *args: str) -> list[str]:
        return self.run(["squeue", "-h", *args]).stdout.splitlines()

    def wait_lines(self, args: list[str], want: list[str], timeout: float = 15) -> bool:
        deadline = time.time() + timeout
        got: list[str] = []
        while time.time() < deadline:
            got = self.lines(*args)
            if got == want:
                return True
            time.sleep(0.1)
        raise AssertionError(f"squeue {' '.join(args)}: want {want}, got {got}")

    def sacct(self, job: int | str) -> list[str]:
        return self.run(["sacct", "-j", str(job), "--parsable2", "--noheader",
                         "-o", "JobID,JobName,State,ExitCode,NodeList"]).stdout.splitlines()

    def wait_sacct(self, job: int | str, want: list[str], timeout: float = 30) -> list[str]:
        deadline = time.time() + timeout
        got: list[str] = []
        while time.time() < deadline:
            got = self.sacct(job)
            if got == want:
                return got
            time.sleep(0.2)
        raise AssertionError(f"sacct -j {job}: want {want}, got {got} after {timeout}s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ArrayCluster(tmp_path_factory.mktemp("arrays"))
    yield from c.serving()


@pytest.fixture
def blocker(cluster):
    """A job holding every node exclusively, so arrays stay pending while we look."""
    gate = cluster.work / f"gate-{time.monotonic_ns()}"
    jid = cluster.sbatch("-N", "4", "--exclusive", "-o", "/dev/null", "--wrap",
                         f"while [ ! -e {gate} ]; do sleep 0.1; done")
    cluster.wait_state(jid, "RUNNING")
    try:
        yield jid
    finally:
        gate.touch()
        cluster.wait_state(jid, "COMPLETED")


def test_tasks_see_slurms_array_variables_and_write_A_a_files(cluster):
    a = cluster.sbatch("--array=5-6", "-o", "arr-%A_%a.out", "--wrap",
                       "env | grep ^SLURM_ARRAY | sort; echo SLURM_JOB_ID=$SLURM_JOB_ID")
    deadline = time.time() + 30
    rows: list[str] = []
    while time.time() < deadline:
        rows = cluster.sacct(a)
        if [r.split("|")[2] for r in rows] == ["COMPLETED"] * 4:
            break
        time.sleep(0.2)
    assert [r.split("|")[:3] for r in rows] == [
        [f"{a}_5", "wrap", "COMPLETED"], [f"{a}_5.batch", "batch", "COMPLETED"],
        [f"{a}_6", "wrap", "COMPLETED"], [f"{a}_6.batch", "batch", "COMPLETED"]], rows
    ids = {}
    for task in (5, 6):
        text = cluster.wait_file(cluster.work / f"arr-{a}_{task}.out", contains="SLURM_JOB_ID=")
        env = dict(line.split("=", 1) for line in text.splitlines())
        ids[task] = int(env.pop("SLURM_JOB_ID"))
        assert env == {"SLURM_ARRAY_JOB_ID": str(a), "SLURM_ARRAY_TASK_COUNT": "2",
                       "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MAX": "6",
                       "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_STEP": "1"}, text
    # as in Slurm (golden env/batch_array_task_all.out): the task split off first gets
    # a new job id, the last one keeps the array's
    assert ids[6] == a and ids[5] > a, ids


def test_pending_array_folds_unfolds_and_cancels_task_by_task(cluster, blocker):
    a = cluster.sbatch("--array=1-3", "-J", "arr", "-o", "/dev/null", "--wrap", "true")
    assert cluster.lines("-j", str(a), "-o", "%i %T") == [f"{a}_[1-3] PENDING"]
    assert cluster.lines("-r", "-j", str(a), "-o", "%i %T") == \
        [f"{a}_1 PENDING", f"{a}_2 PENDING", f"{a}_3 PENDING"]
    # the blocker holds every node: Resources once a pass has looked at the array
    assert cluster.wait_lines(["-j", f"{a}_2", "-o", "%i %T %r"], [f"{a}_2 PENDING Resources"])
    assert f"JobId={a} ArrayJobId={a} ArrayTaskId=1-3 JobName=arr" in \
        cluster.run(["scontrol", "show", "job", str(a)]).stdout

    p = cluster.run(["scancel", f"{a}_2"])
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert cluster.lines("-r", "-j", str(a), "-o", "%i %T") == [f"{a}_1 PENDING", f"{a}_3 PENDING"]
    assert cluster.lines("-j", str(a), "-o", "%i") == [f"{a}_[1,3]"]

    p = cluster.run(["scancel", str(a)])
    assert (p.returncode, p.stderr) == (0, "")
    assert cluster.lines("-j", str(a), "-o", "%i %T") == []
    uid = os.getuid()
    assert cluster.sacct(a) == [f"{a}_[1-3]|arr|CANCELLED by {uid}|0:0|None assigned"]


def test_ten_thousand_tasks_are_one_quick_submission(cluster, blocker):
    t0 = time.monotonic()
    a = cluster.sbatch("--array=1-10000", "-o", "/dev/null", "--wrap", "true")
    took = time.monotonic() - t0
    assert took < 5, f"sbatch --array=1-10000 took {took:.1f}s"
    assert cluster.wait_lines(["-j", str(a), "-o", "%i %T %r"],
                              [f"{a}_[1-10000] PENDING Resources"])
    p = cluster.run(["scancel", str(a)])
    assert p.returncode == 0, p.stderr
    assert cluster.lines("-j", str(a), "-o", "%i") == []


def test_throttle_of_one_never_runs_two_tasks_at_once(cluster):
    a = cluster.sbatch("--array=1-4%1", "-o", "/dev/null", "--wrap", "sleep 0.4")
    most, folded, reasons = 0, set(), set()
    deadline = time.time() + 60
    while time.time() < deadline:
        rows = cluster.lines("-j", str(a), "-o", "%i|%t|%r")
        if not rows:
            break
        most = max(most, sum(1 for r in rows if r.split("|")[1] == "R"))
        for r in rows:
            i, st, reason = r.split("|")
            if st == "PD":
                folded.add(i)
                reasons.add(reason)
        time.sleep(0.05)
    assert most == 1, f"want exactly one task running at a time, saw {most}"
    assert any(re.fullmatch(rf"{a}_\[[0-9,-]+%1\]", i) for i in folded), folded
    assert "JobArrayTaskLimit" in reasons, reasons
    states = [r.split("|")[2] for r in cluster.sacct(a) if ".batch" not in r.split("|")[0]]
    assert states == ["COMPLETED"] * 4, cluster.sacct(a)


def test_scancel_a_running_task_then_the_whole_array(cluster):
    a = cluster.sbatch("--array=1-3", "-J", "runarr", "-o", "/dev/null", "--wrap", "sleep 60")
    deadline = time.time() + 30
    while time.time() < deadline and \
            cluster.lines("-j", str(a), "-o", "%t") != ["R", "R", "R"]:
        time.sleep(0.1)
    # in task order, though the last task kept the array's id (as squeue sorts)
    assert cluster.lines("-j", str(a), "-o", "%i %t") == [f"{a}_1 R", f"{a}_2 R", f"{a}_3 R"]
    assert cluster.run(["scancel", f"{a}_2"]).returncode == 0
    deadline = time.time() + 30
    while time.time() < deadline and len(cluster.lines("-j", str(a), "-o", "%i")) != 2:
        time.sleep(0.1)
    assert cluster.lines("-j", str(a), "-o", "%i %t") == [f"{a}_1 R", f"{a}_3 R"]
    assert cluster.run(["scancel", "--name=runarr"]).returncode == 0
    uid = os.getuid()
    want = []
    for task in (1, 2, 3):
        want += [f"{a}_{task}|runarr|CANCELLED by {uid}", f"{a}_{task}.batch|batch|CANCELLED"]
    deadline = time.time() + 30
    got = []
    while time.time() < deadline:
        got = ["|".join(r.split("|")[:3]) for r in cluster.sacct(a)]
        if got == want:
            break
        time.sleep(0.2)
    assert got == want


@pytest.mark.parametrize("spec", ["1-10001", "abc", "3-1", "1-5:0", "1%x"],
                         ids=["an index at MaxArraySize", "not a number", "a range backwards",
                              "a zero step", "a throttle that is not a number"])
def test_bad_array_specs_are_refused_and_create_nothing(cluster, spec):
    before = cluster.lines("-t", "all", "-o", "%A")
    p = cluster.run(["sbatch", f"--array={spec}", "--wrap", "true"])
    assert (p.returncode, p.stdout, p.stderr) == (1, "", BAD_ARRAY)
    assert cluster.lines("-t", "all", "-o", "%A") == before


def test_scontrol_show_config_reports_max_array_size(cluster):
    out = cluster.run(["scontrol", "show", "config"]).stdout
    assert [l for l in out.splitlines() if l.startswith("MaxArraySize")] == \
        ["MaxArraySize            = 10001"], out
