"""squeue/sinfo/sacct --json, --yaml and -O as commands: what they ask the
controller, what they print, their exit codes (a fake controller answers)."""
from __future__ import annotations

import json

from cli import sacct, sinfo, squeue
from lingjun.v1 import api_pb2
from tests.cli.test_commands import FakeApi, run, running
from tests.cli.test_formats import PART, idle_nodes


def jobs_api(*jobs):
    return FakeApi(GetJobs=api_pb2.GetJobsResponse(jobs=list(jobs), now=103),
                   Ping=api_pb2.PingResponse(cluster="lingjun"),
                   GetAccounting=[api_pb2.GetJobsResponse(jobs=list(jobs), now=103)])  # a stream of pages


def test_squeue_json_asks_for_every_job_and_prints_one_document():
    api = jobs_api(running(7), running(3, "COMPLETED"))
    rc, out, err = run(squeue.main, ["--json", "-o", "%i", "-t", "PD"], api)
    assert (rc, err) == (0, "")
    assert api.calls[0][1].all_states, "finished jobs belong in the document too"
    doc = json.loads(out)
    assert [j["job_id"] for j in doc["jobs"]] == [3, 7]
    assert doc["jobs"][0]["cluster"] == "lingjun"
    assert not out.endswith("\n"), "json-c's printer ends without a newline, as Slurm's"


def test_squeue_yaml_is_a_tagged_document():
    rc, out, err = run(squeue.main, ["--yaml"], jobs_api(running(7)))
    assert (rc, err) == (0, "")
    assert out.startswith("%YAML 1.1\n--- !!map\n") and out.endswith("...\n")
    assert "  !!str job_id: !!int 7\n" in out


def test_squeue_O_unknown_field_is_reported_and_the_rest_printed():
    rc, out, err = run(squeue.main, ["-O", "JobID:6,bogus,State:8"], jobs_api(running(7)))
    assert (rc, err) == (0, "squeue: error: Invalid job format specification: bogus\n")
    assert out == "JOBID STATE   \n7     RUNNING \n"


def test_sinfo_json_and_O():
    api = FakeApi(GetPartitions=api_pb2.GetPartitionsResponse(partitions=[PART]),
                  GetNodes=api_pb2.GetNodesResponse(nodes=idle_nodes()))
    rc, out, err = run(sinfo.main, ["--json"], api)
    assert (rc, err) == (0, "")
    doc = json.loads(out)
    assert [n["name"] for n in doc["nodes"]] == ["node1", "node2", "node3", "node4"]
    assert doc["partitions"][0]["name"] == "debug"
    rc, out, err = run(sinfo.main, ["-O", "NodeList:10,Nope,StateLong:6"], api)
    assert (rc, err) == (0, "sinfo: error: Invalid job format specification: Nope\n")
    assert out == "NODELIST  STATE \nnode[1-4] idle  \n"


def test_sacct_json_nests_steps_and_X_leaves_them_out():
    job = running(7, "COMPLETED", end_time=110, steps=[api_pb2.StepInfo(
        step_id="batch", name="batch", state="COMPLETED", nodes="node1", num_tasks=1,
        num_cpus=1, start_time=100, end_time=110, max_rss_kb=2048)])
    rc, out, err = run(sacct.main, ["-j", "7", "--json"], jobs_api(job))
    assert (rc, err) == (0, "")
    (got,) = json.loads(out)["jobs"]
    assert [s["step"]["id"] for s in got["steps"]] == ["7.batch"]
    assert got["time"]["elapsed"] == 10
    rc, out, _ = run(sacct.main, ["-j", "7", "-X", "--json"], jobs_api(job))
    assert json.loads(out)["jobs"][0]["steps"] == []


def test_squeue_o_with_a_spec_that_names_no_field_reports_it_and_prints_it_as_typed():
    rc, out, err = run(squeue.main, ["-h", "-o", "%i %-10j|%T"], jobs_api(running(7)))
    assert (rc, err) == (0, "squeue: error: Invalid job format specification: -\n")
    assert out == "7 %-10j|RUNNING\n"
