"""sbatch --max-restarts/--hang-timeout, sacct -D and lingjun events as commands
(a fake controller answers)."""
from __future__ import annotations

import io

import grpc
import pytest

from cli import events, sacct
from lingjun import sbatch_options
from lingjun.v1 import api_pb2
from tests.cli.fakes import RpcFailure
from tests.cli.test_commands import FakeApi, run, running

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}


@pytest.mark.parametrize("argv,max_restarts,hang_s", [
    (["--max-restarts=3"], 3, 0),
    (["--max-restarts", "0"], 0, 0),
    (["--hang-timeout=30"], None, 1800),
    (["--hang-timeout=0:05"], None, 5),
    (["--hang-timeout=1:00:00", "--max-restarts=2"], 2, 3600),
    ([], None, 0),
], ids=["three restarts", "zero restarts is a policy too", "minutes by default",
        "min:sec for seconds", "both, in h:m:s", "neither: no policy, no hang check"])
def test_sbatch_restart_and_hang_options(argv, max_restarts, hang_s, tmp_path):
    spec = sbatch_options.build_request([*argv, "--wrap=x"], None, ENV, str(tmp_path)).spec
    got = spec.max_restarts if spec.HasField("max_restarts") else None
    assert (got, spec.hang_timeout_s) == (max_restarts, hang_s)


@pytest.mark.parametrize("argv,text", [
    (["--max-restarts=-1"], 'Invalid numeric value "-1" for --max-restarts.'),
    (["--max-restarts=x"], 'Invalid numeric value "x" for --max-restarts.'),
    (["--hang-timeout=soon"], "Invalid --hang-timeout specification"),
    (["--hang-timeout=UNLIMITED"], "Invalid --hang-timeout specification"),
], ids=["a negative count", "not a number", "not a time", "unlimited is no timeout"])
def test_sbatch_refuses_bad_values_and_submits_nothing(argv, text, tmp_path):
    with pytest.raises(sbatch_options.CommandError) as e:
        sbatch_options.build_request([*argv, "--wrap=x"], None, ENV, str(tmp_path))
    assert str(e.value) == f"sbatch: error: {text}"


def restarted_job():
    job = running(7, "COMPLETED", end_time=190, restarts=1, node_names=["node1", "node3"],
                  attempts=[api_pb2.JobAttempt(attempt=1, nodes="node[1-2]",
                                                    start_time=100, end_time=140,
                                                    state="NODE_FAIL", exit_signal=9)])
    job.nodes, job.start_time, job.num_nodes = "node[1,3]", 150, 2
    return job


def test_sacct_D_shows_every_run_oldest_first_and_without_D_only_the_last():
    api = FakeApi(GetAccounting=[api_pb2.GetJobsResponse(jobs=[restarted_job()], now=200)])  # one page
    argv = ["-j", "7", "-X", "-P", "-n", "-o", "JobID,State,NodeList,ExitCode"]
    rc, out, err = run(sacct.main, ["-D", *argv], api)
    assert (rc, err) == (0, "")
    assert out.split() == ["7|NODE_FAIL|node[1-2]|0:9", "7|COMPLETED|node[1,3]|0:0"]
    rc, out, err = run(sacct.main, argv, api)
    assert out.split() == ["7|COMPLETED|node[1,3]|0:0"]


def test_lingjun_events_prints_each_event_in_order():
    reply = api_pb2.GetJobEventsResponse(state="RUNNING", attempts=restarted_job().attempts, events=[
        api_pb2.JobEvent(time=1_800_000_000, kind="node_lost", text="node node2 lost"),
        api_pb2.JobEvent(time=1_800_000_001, kind="restarted", text="attempt 2 started on node[1,3]")])
    out, err = io.StringIO(), io.StringIO()
    assert events.events("7", out, err, FakeApi(GetJobEvents=reply)) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "JobId=7 State=RUNNING Restarts=1"
    assert lines[1].endswith(" node_lost node node2 lost")
    assert lines[2].endswith(" restarted attempt 2 started on node[1,3]")


def test_lingjun_events_of_an_unknown_job_says_so_in_slurms_words():
    api = FakeApi(GetJobEvents=RpcFailure(grpc.StatusCode.NOT_FOUND, "Invalid job id specified"))
    out, err = io.StringIO(), io.StringIO()
    assert events.events("99", out, err, api) == 1
    assert (out.getvalue(), err.getvalue()) == ("", "lingjun: error: Invalid job id specified\n")
    assert events.events("x", out, err, api) == 1
