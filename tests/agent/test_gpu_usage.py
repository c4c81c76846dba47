"""The agent's GPU usage samples of its jobs, through the fake NVML."""
from __future__ import annotations

import logging
import sys

import pytest

from lingjun_agent import gpuusage
from tests.agent import fake_nvml


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_nvml_for_usage", fake_nvml)
    fake_nvml.reset([{"util": 10, "mem_used": 1 << 30}, {"util": 90, "mem_used": 3 << 30},
                     {"util": 50, "mem_used": 5 << 30}])
    yield fake_nvml
    fake_nvml.reset([])


def test_each_job_gets_the_mean_and_peak_of_its_own_gpus(nvml):
    s = gpuusage.GpuSampler("fake_nvml_for_usage")
    s.sample({7: (0, 1), 8: (2,)})
    nvml.GPUS[0]["util"], nvml.GPUS[1]["util"] = 30, 100
    nvml.GPUS[1]["mem_used"] = 7 << 30
    s.sample({7: (0, 1), 8: (2,), 9: ()})
    # job 7: samples (10+90)/2=50 with 4 GiB, then (30+100)/2=65 with 8 GiB
    assert s.take(7) == gpuusage.GpuUsage(util_ave=57, util_max=65, mem_ave_kb=6 << 20,
                                          mem_max_kb=8 << 20)
    assert s.take(8) == gpuusage.GpuUsage(50, 50, 5 << 20, 5 << 20), "GPU 2 alone"
    assert s.take(7) == gpuusage.GpuUsage(), "taken once"
    assert s.take(9) == gpuusage.GpuUsage(), "no GPUs: nothing sampled"


def test_without_nvml_nothing_is_sampled_and_it_is_said_once(nvml, caplog):
    nvml.reset([{}], missing=True)
    s = gpuusage.GpuSampler("fake_nvml_for_usage")
    with caplog.at_level(logging.WARNING):
        s.sample({7: (0,)})
        s.sample({7: (0,)})
    assert s.take(7) == gpuusage.GpuUsage()
    assert caplog.text.count("GPU usage not sampled here") == 1
