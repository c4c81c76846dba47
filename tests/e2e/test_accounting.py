"""sacct on a real cluster: steps, MaxRSS measured by the agents, and the
--json/--yaml documents other tools parse (issue: formats).

One module-scoped cluster; the jobs are submitted together up front so that
they run side by side and the module stays within seconds.
"""
from __future__ import annotations

import json
import sys

import hostlist
import pytest

PY = sys.executable
HOLD_200M = "b=bytearray(200*2**20); import time; time.sleep(3)"
MIB = 1024


def expand(nodes: str) -> list[str]:
    return hostlist.expand_hostlist(nodes)


def to_kib(text: str) -> float:
    """sacct's MaxRSS ("205464K", "200M", "0") in KiB."""
    if not text or text == "0":
        return 0.0
    scale = {"K": 1, "M": 1024, "G": 1024 ** 2, "T": 1024 ** 3}
    if text[-1] in scale:
        return float(text[:-1]) * scale[text[-1]]
    return float(text) / 1024


@pytest.fixture(scope="module")
def jobs(cluster):
    """Submitted once: a batch job holding 200 MiB, a `true` job, and a job
    whose srun step holds 200 MiB on two nodes."""
    ids = {
        "big": cluster.sbatch("-J", "big", "-o", "/dev/null", "--wrap", f"{PY} -c '{HOLD_200M}'"),
        "true": cluster.sbatch("-J", "nothing", "-o", "/dev/null", "--wrap", "true"),
        "srun": cluster.sbatch("-J", "stepper", "-N", "2", "-o", "/dev/null", "--wrap",
                               f"srun {PY} -c '{HOLD_200M}'"),
    }
    for jid in ids.values():
        cluster.wait_state(jid, ("COMPLETED", "FAILED"), timeout=90)
    return ids


def sacct(cluster, *args: str) -> list[list[str]]:
    p = cluster.run(["sacct", "--parsable2", "-n", *args], check=True)
    return [line.split("|") for line in p.stdout.splitlines()]


def test_a_job_holding_200_mib_shows_maxrss_near_200m(cluster, jobs):
    jid = jobs["big"]
    rows = {r[0]: r for r in sacct(cluster, "-j", str(jid), "-o", "JobID,State,MaxRSS,MaxRSSNode")}
    assert rows[str(jid)][1:] == ["COMPLETED", "", ""], rows  # the allocation row has no stats
    batch = rows[f"{jid}.batch"]
    got = to_kib(batch[2]) / MIB
    assert 150 <= got <= 400, f"want MaxRSS of {jid}.batch in [150, 400] MiB, got {batch[2]}"
    assert batch[3] == "node1", batch


def test_a_true_job_shows_a_few_megabytes_at_most(cluster, jobs):
    jid = jobs["true"]
    rows = {r[0]: r for r in sacct(cluster, "-j", str(jid), "-o", "JobID,MaxRSS")}
    got = to_kib(rows[f"{jid}.batch"][1]) / MIB
    assert got <= 8, f"want MaxRSS of a `true` job <= 8 MiB, got {rows[f'{jid}.batch'][1]}"


def test_an_srun_step_reports_the_highest_task_peak_and_where(cluster, jobs):
    jid = jobs["srun"]
    rows = {r[0]: r for r in sacct(cluster, "-j", str(jid),
                                   "-o", "JobID,JobName,State,NTasks,MaxRSS,MaxRSSNode,AveRSS")}
    assert list(rows) == [str(jid), f"{jid}.batch", f"{jid}.0"], rows
    step = rows[f"{jid}.0"]
    assert step[2:4] == ["COMPLETED", "2"], step
    assert 150 <= to_kib(step[4]) / MIB <= 400, step
    assert step[5] in expand(sacct(cluster, "-X", "-j", str(jid), "-o", "NodeList")[0][0]), step
    assert 0 < to_kib(step[6]) <= to_kib(step[4]), step


def test_sacct_json_has_slurms_shape(cluster, jobs):
    jid = jobs["srun"]
    p = cluster.run(["sacct", "-j", str(jid), "--json"], check=True)
    doc = json.loads(p.stdout)
    assert list(doc) == ["meta", "errors", "jobs"]
    assert doc["meta"]["plugin"]["type"] == "openapi/dbv0.0.38"
    assert doc["errors"] == []
    (job,) = doc["jobs"]
    want_types = {"job_id": int, "name": str, "account": str, "user": str, "partition": str,
                  "nodes": str, "state": dict, "exit_code": dict, "derived_exit_code": dict,
                  "time": dict, "steps": list, "tres": dict, "priority": int,
                  "working_directory": str, "array": dict, "het": dict}
    got_types = {k: type(job.get(k)) for k in want_types}
    assert got_types == want_types
    # Where it ran depends on whether the other two jobs still held node1: ask.
    where = sacct(cluster, "-X", "-j", str(jid), "-o", "NodeList")[0][0]
    assert len(expand(where)) == 2, where
    assert (job["job_id"], job["name"], job["nodes"]) == (jid, "stepper", where)
    assert job["state"] == {"current": "COMPLETED", "reason": "None"}
    assert job["exit_code"] == {"status": "SUCCESS", "return_code": 0}
    assert set(job["time"]) >= {"elapsed", "eligible", "end", "start", "submission",
                                "suspended", "limit", "system", "total", "user"}
    assert all(isinstance(job["time"][k], int)
               for k in ("elapsed", "eligible", "end", "start", "submission"))
    assert job["time"]["end"] >= job["time"]["start"] > 0
    ids = [s["step"]["id"] for s in job["steps"]]
    assert ids == [f"{jid}.batch", f"{jid}.0"]
    step0 = job["steps"][1]
    assert step0["state"] == "COMPLETED"
    assert step0["nodes"] == {"count": 2, "range": where, "list": expand(where)}
    assert step0["tasks"] == {"count": 2}
    (mem,) = step0["tres"]["requested"]["max"]
    assert mem["type"] == "mem" and 150 * 2 ** 20 <= mem["count"] <= 400 * 2 ** 20, mem


def test_squeue_json_lists_jobs_with_slurms_keys_and_types(cluster, jobs):
    gate = cluster.work / "json-gate"
    jid = cluster.sbatch("-J", "waiter", "-t", "5", "-o", "/dev/null", "--wrap",
                         f"while [ ! -e {gate} ]; do sleep 0.1; done")
    try:
        cluster.wait_state(jid, "RUNNING")
        doc = json.loads(cluster.run(["squeue", "--json"], check=True).stdout)
        yaml_text = cluster.run(["squeue", "--yaml"], check=True).stdout
    finally:
        gate.touch()
    assert list(doc) == ["meta", "errors", "jobs"]
    by_id = {j["job_id"]: j for j in doc["jobs"]}
    job = by_id[jid]
    assert (job["job_state"], job["name"], job["nodes"], job["partition"]) == \
        ("RUNNING", "waiter", "node1", "debug")
    assert (job["time_limit"], job["array_job_id"], job["array_task_id"]) == (5, 0, None)
    assert job["end_time"] == job["start_time"] + 300
    assert isinstance(job["user_name"], str) and isinstance(job["user_id"], int)
    assert job["job_resources"]["allocated_hosts"] == 1
    assert job["cluster"] != "", "the controller's cluster name"
    assert by_id[jobs["big"]]["job_state"] == "COMPLETED"  # finished jobs are listed too
    assert yaml_text.startswith("%YAML 1.1\n--- !!map\n!!str meta: !!map\n")
    assert f"  !!str job_id: !!int {jid}\n" in yaml_text


def test_sinfo_json_lists_nodes_and_partitions(cluster):
    doc = json.loads(cluster.run(["sinfo", "--json"], check=True).stdout)
    assert list(doc) == ["meta", "errors", "nodes", "partitions"]
    assert [n["name"] for n in doc["nodes"]] == ["node1", "node2", "node3", "node4"]
    n1 = doc["nodes"][0]
    assert (n1["cpus"], n1["partitions"], type(n1["real_memory"])) == (2, ["debug"], int)
    assert n1["state"] in ("idle", "mixed", "allocated")
    (part,) = doc["partitions"]
    assert (part["name"], part["nodes"], part["total_cpus"]) == ("debug", "node[1-4]", 8)
