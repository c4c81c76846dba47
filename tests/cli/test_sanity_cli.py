"""[sanity] from the config file and from `lingjun up --sanity`; the health output."""
from __future__ import annotations

import argparse

import pytest

from cli.formats import show_node
from cli.lingjun import _sanity_text
from lingjun import config
from lingjun.v1 import api_pb2


def args(*sanity: str, gpus: int = 0) -> argparse.Namespace:
    return argparse.Namespace(sanity=list(sanity), gpus=gpus)


def test_up_sanity_values_become_a_sanity_table_the_config_reads():
    text = _sanity_text(args("interval_s=1.5", "dropin_dir=/etc/lingjun/probes.d",
                             "scratch_paths=['/scratch/{node}']", "prolog=false"))
    cfg = config.parse(text).sanity
    assert (cfg.interval_s, cfg.dropin_dir, cfg.scratch_paths, cfg.prolog) == \
        (1.5, "/etc/lingjun/probes.d", ("/scratch/{node}",), False)
    assert cfg.path(cfg.scratch_paths[0], "node3") == "/scratch/node3"


def test_up_without_sanity_writes_nothing_and_declared_gpus_turn_the_gpu_probe_off():
    assert _sanity_text(args()) == ""
    assert config.parse(_sanity_text(args(gpus=2))).sanity.disabled == ("gpu",)
    assert config.parse(_sanity_text(args('disabled=[]', gpus=2))).sanity.disabled == ()


@pytest.mark.parametrize("text, message", [
    ("[sanity]\ndisabled = ['gpus']", "[sanity] disabled: unknown probe(s) gpus"),
    ("[sanity]\nseverity = {disk = 'panic'}", "[sanity] severity.disk: 'panic' is not drain or warn"),
    ("[sanity]\nintervall_s = 3", "[sanity]: unknown key(s) intervall_s"),
    ("[sanity]\njitter = 1.5", "jitter = 1.5: expected `float` < 1.0"),
], ids=["an unknown probe", "an unknown severity", "a misspelt key", "jitter of a whole interval"])
def test_a_bad_sanity_table_is_refused(text, message):
    with pytest.raises(config.ConfigError) as e:
        config.parse(text)
    assert message in str(e.value)


def test_bad_up_sanity_item_is_refused():
    with pytest.raises(ValueError, match="want KEY=VALUE"):
        _sanity_text(args("interval_s"))


def test_health_line_only_for_failures():
    n = api_pb2.NodeInfo(name="node1", sanity_results=[
        api_pb2.SanityResult(name="cpu", severity="drain", ok=True)])
    assert show_node.health_line(n) == ""
    n.sanity_results.add(name="disk", severity="drain", ok=False, reason="x")
    n.sanity_results.add(name="processes", severity="warn", ok=False, reason="y")
    assert show_node.health_line(n) == "HealthCheck=disk:FAIL(drain),processes:FAIL(warn)"


def test_health_show_lists_every_probe_then_events():
    nodes = [api_pb2.SanityNode(name="node1", results=[
        api_pb2.SanityResult(name="disk", severity="drain", ok=False, reason="/s: 1 MB free < 2 MB",
                             duration_s=0.0021, time=1700000000, phase="periodic"),
        api_pb2.SanityResult(name="gpu", severity="drain", ok=True, duration_s=0.5, time=1700000000,
                             phase="periodic")],
        events=[api_pb2.SanityEvent(time=1700000000, node="node1", event="drain",
                                    reason="disk: /s: 1 MB free < 2 MB")]),
        api_pb2.SanityNode(name="node2")]
    out = show_node.health_show(nodes).splitlines()
    assert out[0].split() == ["NODE", "PROBE", "SEVERITY", "RESULT", "DURATION", "TIME", "PHASE", "REASON"]
    assert out[1].split()[:5] == ["node1", "disk", "drain", "FAIL", "0.002s"]
    assert out[1].endswith("periodic  /s: 1 MB free < 2 MB")
    assert out[2].split()[:5] == ["node1", "gpu", "drain", "ok", "0.500s"]
    assert out[3].split()[:4] == ["node2", "-", "-", "none"]
    assert out[5] == "EVENTS" and out[6].endswith(" node1 drain: disk: /s: 1 MB free < 2 MB")
