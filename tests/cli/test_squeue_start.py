"""squeue --start and scontrol show job for jobs backfill gave a reservation,
against a fake controller; the header is real Slurm 22.05's (/usr/bin/squeue --start)."""
from __future__ import annotations

import time

from cli import scontrol, squeue
from lingjun.v1 import api_pb2
from tests.cli.test_commands import FakeApi, run

SLURM_START_HEADER = ("             JOBID PARTITION     NAME     USER ST          START_TIME  NODES "
                      "SCHEDNODES           NODELIST(REASON)")
T = 1_800_000_000


def _local(ts: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def _jobs():
    return [
        api_pb2.JobInfo(job_id=11, name="late", user="bob", state="PENDING", partition="debug",
                        reason="Priority", num_nodes=1, sched_start_time=T + 600,
                        sched_nodes="node1"),
        api_pb2.JobInfo(job_id=10, name="gang", user="ann", state="PENDING", partition="debug",
                        reason="Resources", num_nodes=4, sched_start_time=T,
                        sched_nodes="node[1-4]"),
        api_pb2.JobInfo(job_id=12, name="far", user="bob", state="PENDING", partition="debug",
                        reason="Priority", num_nodes=2),
    ]


def test_start_shows_pending_jobs_earliest_first_in_slurms_format():
    api = FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=_jobs(), now=T - 60, squeue_order=True))
    rc, out, err = run(squeue.main, ["--start"], api)
    assert (rc, err) == (0, "")
    lines = out.split("\n")[:-1]
    assert lines[0] == SLURM_START_HEADER
    assert [line.split() for line in lines[1:]] == [
        ["12", "debug", "far", "bob", "PD", "N/A", "2", "(null)", "(Priority)"],
        ["10", "debug", "gang", "ann", "PD", _local(T), "4", "node[1-4]", "(Resources)"],
        ["11", "debug", "late", "bob", "PD", _local(T + 600), "1", "node1", "(Priority)"],
    ]
    request = api.calls[0][1]
    assert list(request.states) == ["PENDING"]
    assert {"sched_start_time", "sched_nodes"} <= set(request.job_fields)


def test_an_explicit_format_or_state_replaces_starts_own():
    api = FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=_jobs(), now=T - 60, squeue_order=True))
    rc, out, err = run(squeue.main, ["--start", "-h", "-t", "PD,R", "-o", "%i %Y"], api)
    assert (rc, err) == (0, "")
    assert out.split("\n")[:-1] == ["12 (null)", "10 node[1-4]", "11 node1"]
    assert sorted(api.calls[0][1].states) == ["PENDING", "RUNNING"]


def test_scontrol_show_job_gives_the_expected_start_and_sched_nodes():
    job = api_pb2.JobInfo(job_id=10, name="gang", user="ann", state="PENDING", partition="debug",
                          reason="Resources", num_nodes=4, sched_start_time=T,
                          sched_nodes="node[1-4]", time_limit_min=10, submit_time=T - 100)
    api = FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=[job], now=T - 60),
                  GetPartitions=api_pb2.GetPartitionsResponse())
    rc, out, err = run(scontrol.main, ["show", "job", "10"], api)
    assert (rc, err) == (0, "")
    assert f"   StartTime={_local(T)} EndTime={_local(T + 600)} Deadline=N/A\n" in out
    assert "   NodeList= SchedNodeList=node[1-4]\n" in out


def test_a_pending_job_without_reservation_shows_unknown_and_no_sched_nodes():
    job = api_pb2.JobInfo(job_id=12, name="far", user="bob", state="PENDING", partition="debug",
                          reason="Priority", num_nodes=2, submit_time=T - 100)
    api = FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=[job], now=T - 60),
                  GetPartitions=api_pb2.GetPartitionsResponse())
    rc, out, err = run(scontrol.main, ["show", "job", "12"], api)
    assert (rc, err) == (0, "")
    assert "   StartTime=Unknown EndTime=Unknown Deadline=N/A\n" in out
    assert "SchedNodeList" not in out
