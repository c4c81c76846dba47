"""Job dependencies, begin times and deadlines through the real commands.

One real cluster (4 nodes x 2 CPUs) for the whole file; each test uses its
own gate files so the tests do not wait on one another.
"""
from __future__ import annotations

import re
import time

import pytest


def show(cluster, job_id: int) -> str:
    return cluster.run(["scontrol", "show", "job", str(job_id)], check=True).stdout


def field(text: str, name: str) -> str:
    m = re.search(rf"(?:^|\s){re.escape(name)}=(\S*)", text)
    assert m, f"no {name}= in:\n{text}"
    return m.group(1)


def wait_reason(cluster, job_id: int, reason: str, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    seen = ""
    while time.time() < deadline:
        seen = cluster.squeue(job_id, "%T %r")
        if seen == f"PENDING {reason}":
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job_id}: want 'PENDING {reason}', got {seen!r}")


def gate(cluster, name: str):
    """A job body that waits for a file, so the test decides when it ends."""
    path = cluster.work / name
    return path, f"while [ ! -e {path} ]; do sleep 0.1; done"


def test_afterok_chain_runs_in_order(cluster):
    log = cluster.work / "chain.log"
    go, wait = gate(cluster, "chain.go")
    a = cluster.sbatch("-J", "a", "--wrap", f"{wait}; echo a >> {log}")
    b = cluster.sbatch("-J", "b", f"--dependency=afterok:{a}", "--wrap", f"echo b >> {log}")
    c = cluster.sbatch("-J", "c", "-d", f"afterok:{b}", "--wrap", f"echo c >> {log}")
    cluster.wait_state(a, "RUNNING")
    wait_reason(cluster, b, "Dependency")
    wait_reason(cluster, c, "Dependency")
    got = show(cluster, b)
    assert field(got, "Dependency") == f"afterok:{a}(unfulfilled)", got
    assert field(got, "EligibleTime") == "Unknown", got
    go.touch()
    cluster.wait_state(c, "COMPLETED", timeout=60)
    assert log.read_text().split() == ["a", "b", "c"], log.read_text()
    done = show(cluster, b)
    assert field(done, "Dependency") == "(null)", done
    assert field(done, "JobState") == "COMPLETED", done


def test_afternotok_of_a_job_that_completed_is_never_satisfied(cluster):
    a = cluster.sbatch("--wrap", "true")
    keep = cluster.sbatch(f"--dependency=afternotok:{a}", "--wrap", "true")
    kill = cluster.sbatch(f"--dependency=afternotok:{a}", "--kill-on-invalid-dep=yes",
                          "--wrap", "true")
    cluster.wait_state(a, "COMPLETED")
    wait_reason(cluster, keep, "DependencyNeverSatisfied")
    got = show(cluster, keep)
    assert field(got, "Dependency") == f"afternotok:{a}(failed)", got
    cluster.wait_state(kill, "CANCELLED")
    cluster.run(["scancel", str(keep)], check=True)


def test_afternotok_of_a_failed_job_runs(cluster):
    a = cluster.sbatch("--wrap", "exit 3")
    b = cluster.sbatch(f"--dependency=afternotok:{a}", "--wrap", "true")
    cluster.wait_state(a, "FAILED")
    cluster.wait_state(b, "COMPLETED")


def test_any_of_list_runs_when_one_is_satisfied(cluster):
    go, wait = gate(cluster, "anyof.go")
    slow = cluster.sbatch("--wrap", wait)
    fast = cluster.sbatch("--wrap", "true")
    b = cluster.sbatch(f"--dependency=afterok:{slow}?afterok:{fast}", "--wrap", "true")
    cluster.wait_state(b, "COMPLETED")
    assert cluster.state_of(slow) == "RUNNING"
    go.touch()


def test_singleton_runs_one_job_of_a_name_at_a_time(cluster):
    go, wait = gate(cluster, "single.go")
    first = cluster.sbatch("-J", "solo", "--dependency=singleton", "--wrap", wait)
    second = cluster.sbatch("-J", "solo", "--dependency=singleton", "--wrap", "true")
    cluster.wait_state(first, "RUNNING")
    wait_reason(cluster, second, "Dependency")
    assert field(show(cluster, second), "Dependency") == "singleton(unfulfilled)"
    go.touch()
    cluster.wait_state(second, "COMPLETED")


def test_dependency_on_an_unknown_job_is_accepted_and_runs(cluster):
    # Slurm 22.05 (golden err_sbatch_bad_dependency) accepts it: the job is
    # taken for one long finished and forgotten.
    p = cluster.run(["sbatch", "--dependency=afterok:999999", "--wrap", "true"])
    assert p.returncode == 0 and p.stdout.startswith("Submitted batch job "), p
    cluster.wait_state(int(p.stdout.split()[-1]), "COMPLETED")


@pytest.mark.parametrize("args,want_err,want_rc", [
    (["--dependency=bogus"], "sbatch: error: Batch job submission failed: Job dependency problem", 1),
    (["--dependency=afterok:1,afterany:2?afterok:3"],
     "sbatch: error: Batch job submission failed: Job dependency problem", 1),
    (["--dependency=afterok:1", "--kill-on-invalid-dep=maybe"],
     "sbatch: error: Invalid --kill-on-invalid-dep specification", 255),
    (["--begin=whenever"], "Invalid time specification (pos=0): whenever\n"
                           "sbatch: error: Invalid --begin specification", 255),
    (["--deadline=now+1h"], "Invalid time specification (pos=4): now+1h\n"
                            "sbatch: error: Invalid --deadline specification", 255),
], ids=["an unknown dependency type", "both ',' and '?' in one list",
        "kill-on-invalid-dep neither yes nor no", "a begin time nobody can read",
        "a deadline nobody can read"])
def test_bad_input_changes_nothing(cluster, args, want_err, want_rc):
    before = cluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout
    p = cluster.run(["sbatch", *args, "--wrap", "true"])
    assert (p.returncode, p.stderr.strip()) == (want_rc, want_err), p
    assert p.stdout == ""
    assert cluster.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout == before


def test_begin_time_holds_a_job_until_then(cluster):
    t0 = time.time()
    job = cluster.sbatch("--begin=now+8", "--wrap", "true")
    wait_reason(cluster, job, "BeginTime")
    eligible = field(show(cluster, job), "EligibleTime")
    assert time.mktime(time.strptime(eligible, "%Y-%m-%dT%H:%M:%S")) >= int(t0) + 8, eligible
    cluster.wait_state(job, "COMPLETED", timeout=30)
    start = cluster.squeue(job, "%S")
    assert time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S")) >= int(t0) + 8, start


def test_deadline_ends_a_pending_job_in_state_deadline(cluster):
    job = cluster.sbatch("--hold", "--deadline=now+2", "--wrap", "true")
    assert field(show(cluster, job), "Deadline") != "N/A"
    cluster.wait_state(job, "DEADLINE", timeout=30)
    assert cluster.squeue(job, "%T %r") == "DEADLINE DeadLine"
