"""scontrol on jobs through the real commands: hold/release, update, requeue,
show -o, and the hostlist helpers. One real cluster for the whole file.

The tests run as root, as the golden Slurm captures did, so ``scontrol hold``
is an admin hold (JobHeldAdmin, Priority=0) like golden scontrol_show_job_updated.
"""
from __future__ import annotations

import os
import re
import time

import pytest

from tests.e2e.test_dependencies import field, gate, show, wait_reason

AS_ROOT = os.getuid() == 0


def scontrol(cluster, *args: str):
    return cluster.run(["scontrol", *args])


def test_hold_and_release(cluster):
    job = cluster.sbatch("--hold", "-J", "held", "--wrap", "true")
    got = show(cluster, job)
    assert (field(got, "JobState"), field(got, "Reason"), field(got, "Priority")) == \
        ("PENDING", "JobHeldUser", "0"), got
    p = scontrol(cluster, "release", str(job))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), p
    cluster.wait_state(job, "COMPLETED")


def test_hold_by_root_is_an_admin_hold_and_uhold_a_user_hold(cluster):
    job = cluster.sbatch("--hold", "--wrap", "true")
    assert scontrol(cluster, "hold", str(job)).returncode == 0
    want = "JobHeldAdmin" if AS_ROOT else "JobHeldUser"    # hold by the owner is a user hold
    wait_reason(cluster, job, want)
    got = show(cluster, job)
    assert (field(got, "Reason"), field(got, "Priority")) == (want, "0"), got
    assert scontrol(cluster, "uhold", str(job)).returncode == 0
    wait_reason(cluster, job, "JobHeldUser")
    assert scontrol(cluster, "release", str(job)).returncode == 0
    cluster.wait_state(job, "COMPLETED")


@pytest.mark.parametrize("args,want_err", [
    (["hold", "999999"], "Invalid job id specified for job 999999"),
    (["release", "abc"], "Invalid job id specified for job abc"),
    (["requeue", "999999"], "Invalid job id specified for job 999999"),
    (["update", "JobId=999999", "TimeLimit=5"], "Invalid job id specified for job 999999"),
], ids=["hold of a job nobody knows", "release of something that is no job id",
        "requeue of a job nobody knows", "update of a job nobody knows"])
def test_unknown_jobs(cluster, args, want_err):
    p = scontrol(cluster, *args)
    assert (p.returncode, p.stderr.strip()) == (1, want_err), p


def test_hold_of_a_running_job_is_refused(cluster):
    go, wait = gate(cluster, "holdrun.go")
    job = cluster.sbatch("--wrap", wait)
    cluster.wait_state(job, "RUNNING")
    p = scontrol(cluster, "hold", str(job))
    assert (p.returncode, p.stderr.strip()) == (1, f"Job is no longer pending execution for job {job}"), p
    assert cluster.state_of(job) == "RUNNING"
    go.touch()


def test_update_time_limit_shows_in_scontrol(cluster):
    parent = cluster.sbatch("--hold", "--wrap", "true")
    job = cluster.sbatch("--hold", "-t", "5", "--wrap", "true")
    p = scontrol(cluster, "update", f"JobId={job}", "TimeLimit=10")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), p
    got = show(cluster, job)
    assert field(got, "TimeLimit") == "00:10:00", got
    assert scontrol(cluster, "update", f"jobid={job}", "Name=renamed", "Comment=hello",
                    f"Dependency=afterany:{parent}").returncode == 0
    got = show(cluster, job)
    assert (field(got, "JobName"), field(got, "Comment"), field(got, "Dependency")) == \
        ("renamed", "hello", f"afterany:{parent}(unfulfilled)"), got
    scontrol(cluster, "update", f"JobId={job}", "TimeLimit=+5")
    assert field(show(cluster, job), "TimeLimit") == "00:15:00"
    cluster.run(["scancel", str(job), str(parent)], check=True)


@pytest.fixture(scope="module")
def held_job(cluster):
    """One held job every refused update is tried on, and how it looked first."""
    job = cluster.sbatch("--hold", "-t", "5", "--wrap", "true")
    yield job, show(cluster, job)
    cluster.run(["scancel", str(job)])


@pytest.mark.parametrize("args,want_err", [
    (["Foo=bar"], "Update of this parameter is not supported: Foo=bar\nRequest aborted"),
    (["TimeLimit=abc"], "scontrol: error: Invalid TimeLimit value"),
    (["Partition=nosuch"], "Invalid partition name specified for job {job}"),
    (["Dependency=bogus"], "Job dependency problem for job {job}"),
    (["Dependency=afterok:{job}"], "Job dependency problem for job {job}"),
    (["NumNodes=lots"], "scontrol: error: Invalid node count specified: lots"),
    (["Nice=99999999999"], "scontrol: error: Nice value out of range (+/- 2147483645). Value ignored"),
    ([], "No changes specified"),
], ids=["a key scontrol does not know", "a time limit nobody can read", "a partition that does not exist",
        "a dependency nobody can read", "a job that depends on itself", "a node count nobody can read",
        "a nice value out of range", "nothing to change"])
def test_bad_updates_change_nothing(cluster, held_job, args, want_err):
    job, before = held_job
    p = scontrol(cluster, "update", f"JobId={job}", *[a.format(job=job) for a in args])
    assert (p.returncode, p.stderr.strip()) == (1, want_err.format(job=job)), p
    assert show(cluster, job) == before


def test_running_jobs_refuse_pending_only_changes(cluster):
    go, wait = gate(cluster, "updrun.go")
    job = cluster.sbatch("-t", "5", "--wrap", wait)
    cluster.wait_state(job, "RUNNING")
    p = scontrol(cluster, "update", f"JobId={job}", "NumNodes=2")
    assert (p.returncode, p.stderr.strip()) == (1, f"Job is no longer pending execution for job {job}"), p
    # Lowering a running job's limit is anyone's right; root may also raise it.
    assert scontrol(cluster, "update", f"JobId={job}", "TimeLimit=3").returncode == 0
    assert field(show(cluster, job), "TimeLimit") == "00:03:00"
    go.touch()


def test_requeue_reruns_a_job_with_restarts_1(cluster):
    out = cluster.work / "requeue.out"
    go, wait = gate(cluster, "requeue.go")
    job = cluster.sbatch("-o", str(out), "--open-mode=append", "--wrap",
                         f'echo run $SLURM_RESTART_COUNT; {wait}')
    cluster.wait_state(job, "RUNNING")
    cluster.wait_file(out, contains="run")
    p = scontrol(cluster, "requeue", str(job))
    assert (p.returncode, p.stderr) == (0, ""), p
    # It pends with reason BeginTime for requeue_delay_s (2 s) only, too short
    # to catch on a loaded machine; tests/lingjund/test_jobctl.py checks that.
    deadline = time.time() + 30
    while field(show(cluster, job), "Restarts") != "1":
        assert time.time() < deadline, "Restarts never became 1"
        time.sleep(0.2)
    go.touch()
    cluster.wait_state(job, "COMPLETED", timeout=30)
    lines = out.read_text().split("\n")
    assert (lines[0], lines[2]) == ("run", "run 1"), lines
    # between the runs, slurmstepd's line for the stop, as Slurm writes it
    assert re.fullmatch(rf"slurmstepd-node\d: error: \*\*\* JOB {job} ON node\d CANCELLED AT "
                        r"\S+ DUE TO JOB REQUEUE \*\*\*", lines[1]), lines
    assert field(show(cluster, job), "Restarts") == "1"


def test_requeue_of_a_pending_job_is_refused(cluster):
    job = cluster.sbatch("--hold", "--wrap", "true")
    p = scontrol(cluster, "requeue", str(job))
    assert (p.returncode, p.stderr.strip()) == (1, f"Job is pending execution for job {job}"), p
    cluster.run(["scancel", str(job)], check=True)


def test_requeuehold_puts_a_finished_job_back_held(cluster):
    job = cluster.sbatch("--wrap", "true")
    cluster.wait_state(job, "COMPLETED")
    deadline = time.time() + 20
    while scontrol(cluster, "requeuehold", str(job)).returncode != 0:  # until cleaned up
        assert time.time() < deadline, "requeuehold kept failing"
        time.sleep(0.3)
    wait_reason(cluster, job, "JobHeldUser")
    assert field(show(cluster, job), "Restarts") == "1"
    assert scontrol(cluster, "release", str(job)).returncode == 0
    cluster.wait_state(job, "COMPLETED", timeout=30)


def test_show_job_oneliner(cluster):
    job = cluster.sbatch("--hold", "-J", "one", "--wrap", "true")
    for argv in (["show", "job", "-o", str(job)], ["-o", "show", "job", str(job)]):
        p = scontrol(cluster, *argv)
        assert p.returncode == 0, p
        assert p.stdout.count("\n") == 1 and p.stdout.endswith(" \n"), repr(p.stdout)
        assert re.match(rf"JobId={job} JobName=one UserId=\S+ GroupId=\S+ MCS_label=N/A Priority=0 ",
                        p.stdout), p.stdout
        assert " Dependency=(null) " in p.stdout and " Power= \n" in p.stdout
    cluster.run(["scancel", str(job)], check=True)


@pytest.mark.parametrize("argv,want", [
    (["show", "hostnames", "node[1-3],gpu01"], "node1\nnode2\nnode3\ngpu01\n"),
    (["show", "hostlist", "node1,node2,node3"], "node[1-3]\n"),
    (["show", "hostlist", "node3,node1,node2"], "node[3,1-2]\n"),
    (["show", "hostlistsorted", "node3,node1,node2"], "node[1-3]\n"),
], ids=["hostnames expands a hostlist", "hostlist compresses", "hostlist keeps the order given",
        "hostlistsorted sorts"])
def test_hostlist_helpers(cluster, argv, want):
    p = scontrol(cluster, *argv)
    assert (p.returncode, p.stdout) == (0, want), p
