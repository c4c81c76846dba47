"""The NIC probe against real links: a veth pair between two throwaway namespaces."""
from __future__ import annotations

import pytest

from lingjun_agent.sanity import facts, probes
from tests.agent.netns import Netns, sh


@pytest.fixture
def two_hosts():
    n = Netns()
    try:
        a, b = n.add("sa"), n.add("sb")
        n.veth(a, "rail0", b, "peer0")
        sh("ip", "-n", a, "link", "set", "rail0", "up")
        yield n, a, b
    finally:
        n.cleanup()


def probe(ns: str, *specs: str):
    return probes.check_nics(facts.nics(ns), probes.parse_nics(specs))


def test_nic_probe_reads_link_carrier_and_mtu_through_netlink(two_hosts):
    n, a, b = two_hosts
    v = probe(a, "rail0:1500")
    assert v.ok, v
    assert probe(a, "rail0:9000").reason == "rail0: MTU 1500 != 9000"
    assert probe(a, "rail1").reason == "rail1: not found"
    sh("ip", "-n", b, "link", "set", "peer0", "down")      # the cable's far end goes dark
    assert probe(a, "rail0").reason == "rail0: no carrier"
    sh("ip", "-n", a, "link", "set", "rail0", "down")
    assert probe(a, "rail0").reason == "rail0: down"
    sh("ip", "-n", a, "link", "set", "rail0", "mtu", "9000", "up")
    sh("ip", "-n", b, "link", "set", "peer0", "up")
    assert probe(a, "rail0:9000").ok
