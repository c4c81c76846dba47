"""Must-show: a scrape of both endpoints while a job runs finds its GPU and
memory series. A real local cluster (`lingjun up` turns both endpoints on);
the only fake is NVML (tests/agent/fake_nvml.py, whose GPUs a JSON file
describes). Scrapes are parsed by prometheus-client's own parser, as
Prometheus would read them."""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import Cluster, wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mc(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics")
    gpus = root / "gpus.json"
    gpus.write_text(json.dumps([{"util": 40, "mem_used": 1 << 30},
                                {"util": 80, "mem_used": 3 << 30}]))
    c = Cluster(root, nodes=2, cpus=2,
                up_args=("--gpus", "2", "--sanity", "nvml_module=tests.agent.fake_nvml"))
    c.env["PYTHONPATH"] = str(REPO)
    c.env["LINGJUN_FAKE_NVML_GPUS"] = str(gpus)
    yield from c.serving()


def scrape(address: str) -> dict[str, list]:
    """name -> [(labels, value)] of every sample on the page."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(page: dict, name: str, **labels) -> float | None:
    for got, v in page.get(name, ()):
        if all(got.get(k) == str(w) for k, w in labels.items()):
            return v
    return None


def test_lingjun_up_says_where_the_metrics_are(mc):
    where = mc.info()["metrics"]
    assert set(where) == {"lingjund", "node1", "node2"}
    assert all(a.startswith("127.0.0.1:") for a in where.values())


def test_a_scrape_while_a_job_runs_finds_its_gpu_and_memory_series(mc):
    c = mc
    jid = c.sbatch("--gres=gpu:2", "--mem=100M", "-w", "node1", "-o", "/dev/null",
                   input="#!/bin/bash\npython3 -c 'b = bytearray(30 << 20); import time; time.sleep(60)'\n")
    try:
        c.wait_state(jid, "RUNNING", timeout=30)
        where = c.info()["metrics"]
        # the agent: NVML's sample of each of the job's GPUs (every 2 s), its memory
        def sampled():
            p = scrape(where["node1"])
            held = value(p, "lingjun_job_memory_bytes", job_id=jid) or 0
            if value(p, "lingjun_job_gpu_utilization_ratio", job_id=jid, gpu=1) is not None \
                    and held > 30 << 20:
                return p
            return None
        agent = wait_for("the job's GPU and memory series on node1's /metrics", sampled, timeout=30)
        assert value(agent, "lingjun_job_gpu_utilization_ratio", job_id=jid, gpu=0) == 0.4
        assert value(agent, "lingjun_job_gpu_utilization_ratio", job_id=jid, gpu=1) == 0.8
        assert value(agent, "lingjun_job_gpu_memory_used_bytes", job_id=jid, gpu=0) == 1 << 30
        assert value(agent, "lingjun_job_gpu_memory_used_bytes", job_id=jid, gpu=1) == 3 << 30
        # the 30 MiB the script holds, and less than its 100M limit
        assert 30 << 20 < value(agent, "lingjun_job_memory_bytes", job_id=jid) < 100 << 20
        assert value(agent, "lingjun_job_cpu_seconds_total", job_id=jid) >= 0
        assert value(agent, "lingjun_agent_info", node="node1") == 1
        # the node's probes: the register phase's and the job's prolog's, each its newest
        assert value(agent, "lingjun_probe_ok", probe="memory", phase="register") == 1
        assert value(agent, "lingjun_probe_ok", probe="disk", phase="prolog") == 1
        assert value(agent, "lingjun_probe_last_run_timestamp_seconds", probe="disk") > 0
        # node2 runs nothing of it
        assert value(scrape(where["node2"]), "lingjun_job_memory_bytes", job_id=jid) is None

        ctl = scrape(where["lingjund"])
        assert value(ctl, "lingjun_jobs", state="RUNNING", partition="debug") == 1
        assert value(ctl, "lingjun_partition_gpus", partition="debug", state="allocated") == 2
        assert value(ctl, "lingjun_partition_gpus", partition="debug", state="idle") == 2
        assert value(ctl, "lingjun_account_gpus_allocated", partition="debug") == 2
        assert value(ctl, "lingjun_nodes", partition="debug", state="mixed") == 1
        assert value(ctl, "lingjun_nodes", partition="debug", state="idle") == 1
        # just started: not silent, so not named among the silent ones
        assert value(ctl, "lingjun_job_last_activity_timestamp_seconds", job_id=jid) is None
        # the histograms: passes ran, and the sbatch above was timed as SubmitJob
        assert value(ctl, "lingjun_scheduler_pass_seconds_count") >= 1
        # (sbatch on the controller's host calls through the local command socket;
        # `lingjun up` polled GetNodes over gRPC)
        assert value(ctl, "lingjun_rpc_duration_seconds_count", method="SubmitJob",
                     door="socket") >= 1
        assert value(ctl, "lingjun_rpc_duration_seconds_count", method="GetNodes", door="grpc") >= 1
    finally:
        c.run(["scancel", str(jid)])
    c.wait_state(jid, ("CANCELLED",), timeout=30)
    # gone from the agent's page with the job
    wait_for("the ended job's series gone", lambda: value(scrape(c.info()["metrics"]["node1"]),
             "lingjun_job_gpu_utilization_ratio", job_id=jid, gpu=0) is None, timeout=15)


def test_a_pending_job_is_counted_with_its_reason(mc):
    c = mc
    jid = c.sbatch("-H", "-o", "/dev/null", input="#!/bin/bash\ntrue\n")
    try:
        c.wait_state(jid, "PENDING")
        ctl = scrape(c.info()["metrics"]["lingjund"])
        reason = c.squeue(jid, "%r")
        assert value(ctl, "lingjun_jobs", state="PENDING", partition="debug", reason=reason) == 1
    finally:
        c.run(["scancel", str(jid)])


def test_the_metrics_door_is_read_only_and_says_so(mc):
    address = mc.info()["metrics"]["lingjund"]
    req = urllib.request.Request(f"http://{address}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405 and e.value.headers["Allow"] == "GET, HEAD"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://{address}/nothing-here", timeout=10)
    assert e.value.code == 404
