"""The agent's /metrics page from its parts: the GPU sampler over the fake
NVML, the probes' newest results, and the network owner's reports (uplink
failovers counted as they happen, RDMA ports, interfaces). The page is read
back with prometheus-client's parser, as Prometheus would."""
from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lingjun_agent import gpuusage, metrics
from lingjun_agent.network.agent import NetworkOwner
from lingjun_agent.network.rdma import RdmaPort
from lingjun_agent.network.watcher import IfaceReport, Report
from lingjun_agent.sanity.checks import Result
from tests.agent import fake_nvml


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_nvml_for_metrics", fake_nvml)
    fake_nvml.reset([{"util": 25, "mem_used": 1 << 30}, {"util": 75, "mem_used": 2 << 30}])
    yield fake_nvml
    fake_nvml.reset([])


class Sent:
    def __init__(self):
        self.msgs = []

    def send(self, msg):
        self.msgs.append(msg)
        return True


def agent(nvml_module: str = "fake_nvml_for_metrics"):
    a = SimpleNamespace(node="node7", batches={}, steps={},
                        gpu_usage=gpuusage.GpuSampler(nvml_module),
                        sanity=SimpleNamespace(latest={}))
    a.net = NetworkOwner(Sent(), "/nonexistent")
    return a


def page(a) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    text = metrics.render(metrics.registry(a)).decode()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_each_gpu_of_each_job_as_nvml_last_saw_it(nvml):
    a = agent()
    a.batches[12] = SimpleNamespace(pid=0)
    a.steps[(12, 0)] = SimpleNamespace(running=lambda: False)
    a.gpu_usage.sample({12: (0, 1), (12, 0): (1,)})      # the batch job and its step
    p = page(a)
    util = p["lingjun_job_gpu_utilization_ratio"]
    assert util == {(("gpu", "0"), ("job_id", "12")): 0.25, (("gpu", "1"), ("job_id", "12")): 0.75}
    assert p["lingjun_job_gpu_memory_used_bytes"][(("gpu", "1"), ("job_id", "12"))] == 2 << 30
    nvml.GPUS[0]["util"] = 90
    a.gpu_usage.sample({12: (0, 1)})
    assert page(a)["lingjun_job_gpu_utilization_ratio"][(("gpu", "0"), ("job_id", "12"))] == 0.9
    a.gpu_usage.take(12)
    a.gpu_usage.take((12, 0))
    assert "lingjun_job_gpu_utilization_ratio" not in page(a), "gone with the job"
    # a sample that was under way when the job ended: not shown, and dropped next time
    a.gpu_usage.sample({13: (0,)})
    del a.batches[12]
    a.gpu_usage.latest[12] = ((0, 50, 1),)
    assert "lingjun_job_gpu_utilization_ratio" not in page(a)
    a.gpu_usage.sample({})
    assert a.gpu_usage.latest == {}
    assert page(a)["lingjun_agent_info"] == {(("node", "node7"),): 1}


def test_probe_results_each_the_newest(nvml):
    a = agent()
    a.sanity.latest = {
        "disk": Result(name="disk", severity="drain", ok=False, reason="/tmp full",
                       duration_s=0.25, time=1000.0, phase="periodic"),
        "clock": Result(name="clock", severity="warn", ok=True, reason="", duration_s=0.01,
                        time=990.0, phase="register")}
    p = page(a)
    assert p["lingjun_probe_ok"] == {
        (("phase", "periodic"), ("probe", "disk"), ("severity", "drain")): 0,
        (("phase", "register"), ("probe", "clock"), ("severity", "warn")): 1}
    assert p["lingjun_probe_duration_seconds"][(("probe", "disk"),)] == 0.25
    assert p["lingjun_probe_last_run_timestamp_seconds"][(("probe", "clock"),)] == 990.0


def test_uplink_failovers_are_counted_as_reports_come(nvml):
    async def go():
        a = agent()
        net = a.net
        net.loop = asyncio.get_running_loop()
        port = RdmaPort(device="mlx5_0", port=1, state="ACTIVE", link_layer="Ethernet")
        ok = IfaceReport("eth1", "10.0.0.2/24 up", "10.0.0.2/24 up", True)
        for active, state in (("primary", "converged"), ("backup", "degraded"),
                              ("backup", "degraded"), ("primary", "converged"),
                              ("backup", "degraded")):
            down = RdmaPort(device="mlx5_0", port=1, state="DOWN", link_layer="Ethernet")
            net._report(Report(profile="rails", state=state, interfaces=(ok,),
                               active=(("up0", active),),
                               rdma=(port if active == "primary" else down,),
                               changes=("route",)))
        return page(a)
    p = asyncio.run(go())
    assert p["lingjun_net_failovers_total"] == {(("uplink", "up0"),): 2}
    assert p["lingjun_net_uplink_backup_active"] == {(("uplink", "up0"),): 1}
    assert p["lingjun_net_state"][(("profile", "rails"), ("state", "degraded"))] == 1
    assert p["lingjun_net_state"][(("profile", "rails"), ("state", "converged"))] == 0
    assert p["lingjun_rdma_port_up"] == {
        (("device", "mlx5_0"), ("link_layer", "Ethernet"), ("port", "1")): 0}
    assert p["lingjun_net_interface_ok"] == {(("interface", "eth1"),): 1}
